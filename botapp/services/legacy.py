"""Links made by the file-store bot an operator moved from, kept working.

CodeXBotz-style file-store bots put in `start=` the URL-safe base64 (padding stripped) of
`get-<message id × |channel id|>` for one message, or `get-<first × |channel id|>-<last × |channel id|>`
for a range (first to last inclusive, counting down when first > last), where the channel is their
storage channel. With that channel's id in Bot settings (`legacy_channel_id`), such a link becomes a
stored file of Courier's on first use, and from then on goes through the very same gates and
delivery as Courier's own links.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

from django.conf import settings

from botapp.models import StoredFile
from botapp.services.files import MAX_BATCH

LEGACY_RE = re.compile(r"^[A-Za-z0-9_-]{4,}$")
LEGACY_TEXT_RE = re.compile(r"^get-(\d{1,40})(?:-(\d{1,40}))?$")
SHARE_PREFIX = "lg"


def legacy_payload_parse(*, payload: str) -> tuple[int, ...] | None:
    """The numbers a legacy link carries (one, or first and last), or None when `payload` is not
    shaped like one. Says nothing yet about whether they fit a channel."""
    if not LEGACY_RE.match(payload):
        return None
    try:
        text = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    match = LEGACY_TEXT_RE.match(text)
    if match is None:
        return None
    return tuple(int(n) for n in match.groups() if n is not None)


def legacy_payload_shaped(*, payload: str) -> bool:
    """Whether `payload` looks like a legacy link (the base64 of `get-…`) even when it carries no
    usable numbers: such a payload is a broken file link, never a campaign tag."""
    if not LEGACY_RE.match(payload):
        return False
    try:
        return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).startswith(b"get-")
    except (binascii.Error, ValueError):
        return False


def legacy_message_ids(*, numbers: tuple[int, ...], channel_id: int) -> list[int] | None:
    """The storage-channel message ids behind a legacy link's numbers, in the order the old bot
    sent them; None when they were not made for this channel (not a multiple of its id) or the
    range holds more than MAX_BATCH messages. Exact integer division: the old bots divide with
    floats, which only ever differs for numbers past 2**53."""
    factor = abs(channel_id)
    ids = []
    for number in numbers:
        message_id, remainder = divmod(number, factor)
        if remainder or message_id <= 0:
            return None
        ids.append(message_id)
    if len(ids) == 1:
        return ids
    first, last = ids
    if abs(last - first) + 1 > MAX_BATCH:
        return None
    step = 1 if first <= last else -1
    return list(range(first, last + step, step))


def legacy_share_id(*, channel_id: int, message_ids: list[int]) -> str:
    """The share id of the stored file a legacy link becomes: the same for every spelling of the
    same link, and not guessable from the messages (an HMAC under SECRET_KEY), so Courier's own
    links stay as hard to enumerate as before."""
    key = f"{channel_id}:{message_ids[0]}:{message_ids[-1]}:{len(message_ids)}".encode()
    digest = hmac.new(settings.SECRET_KEY.encode(), key, hashlib.sha256).digest()
    return SHARE_PREFIX + base64.urlsafe_b64encode(digest).decode("ascii")[:14]


def legacy_file_resolve(*, numbers: tuple[int, ...], channel_id: int | None) -> StoredFile | None:
    """The stored file behind a legacy link, made on its first use; None when no legacy channel
    is set or the link was not made for it. Two first uses at once make one row."""
    if channel_id is None:
        return None
    ids = legacy_message_ids(numbers=numbers, channel_id=channel_id)
    if ids is None:
        return None
    share_id = legacy_share_id(channel_id=channel_id, message_ids=ids)
    found = StoredFile.objects.filter(share_id=share_id).first()
    if found is not None:
        return found
    span = f"message {ids[0]}" if len(ids) == 1 else f"messages {ids[0]}–{ids[-1]}"
    StoredFile.objects.bulk_create(
        [StoredFile(share_id=share_id, source_chat_id=channel_id, message_ids=ids, title=f"Legacy link: {span}")],
        ignore_conflicts=True,
    )
    return StoredFile.objects.get(share_id=share_id)
