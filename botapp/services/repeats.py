"""A broadcast's messages whose sends Telegram confirmed only by refusing a repeat
(RANDOM_ID_DUPLICATE: delivered by an earlier attempt, its message id never known), found again so
that their deletion after the broadcast's lifetime is done, as runbot's recovery finds a delivery's
copies (services/delivery.py, `delivery_find`): read back up the bot's message box, each matched by
what it shows."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, HandledUpdate
from botapp.telegram.gateway import Gateway, MessageNotFound

log = logging.getLogger(__name__)

# How many ids of the bot's box a search reads at most past the broadcast's last message: the
# broadcast's own messages plus what else the bot sent and received meanwhile (a bound on its cost).
SCAN_SLACK = 20_000
# Messages handled before the broadcast started, of which the newest id is the search's floor.
FLOOR_FROM = 100


def box_floor(*, before) -> int:
    """An id of the bot's message box below every message sent at `before` or later: the newest of
    the private messages runbot handled before then (ids grow with time; handled updates are kept
    for a week); 0 (the box's start) when none is kept."""
    ids = (
        HandledUpdate.objects.filter(kind=HandledUpdate.Kind.MESSAGE, chat_id__gt=0, claimed_at__lt=before)
        .order_by("-claimed_at")
        .values_list("update_id", flat=True)[:FLOOR_FROM]
    )
    return max(ids, default=0)


def broadcast_content(*, gateway: Gateway, broadcast: Broadcast) -> str:
    """What the broadcast's messages show (OwnMessage.content's form): read from one of them whose
    id is known, else its text (a broadcast without media); "" when neither tells."""
    known = (
        BroadcastDelivery.objects.filter(broadcast=broadcast, message_id__isnull=False)
        .exclude(status=BroadcastDelivery.Status.DELETED)
        .values_list("chat_id", "message_id")[:5]
    )
    for chat_id, message_id in known:
        try:
            if found := gateway.message_contents(chat_id, [message_id]):
                return next(iter(found.values()))
        except MessageNotFound:
            continue
    if broadcast.media_kind or broadcast.copy_message_ids:
        return ""
    return f"text:{html.unescape(re.sub(r'<[^>]+>', '', broadcast.text))}"


@dataclass(frozen=True)
class RepeatSearch:
    """Where a broadcast's messages confirmed only as repeats are looked for (`broadcast_repeats_search`)."""

    broadcast_id: int
    content: str  # what they show; "": not known, not looked for
    after_id: int
    box_to: int
    until: datetime
    scan_max: int


def broadcast_repeats_search(*, gateway: Gateway, broadcast_id: int) -> RepeatSearch:
    """The search for one broadcast, made once for all its rows (a deleter's run keeps it): from
    the box's floor before the broadcast began to its end, past every id of its messages known
    (deleted ones read as empty: no end of the box below them), showing what they show."""
    broadcast = Broadcast.objects.get(pk=broadcast_id)
    content = broadcast_content(gateway=gateway, broadcast=broadcast) if broadcast.started_at is not None else ""
    rows = BroadcastDelivery.objects.filter(broadcast=broadcast)
    known = rows.aggregate(top=Max("message_id"))["top"] or 0
    # Above the newest known id lie the repeats' own messages, which searches of other rows may be
    # deleting meanwhile: runs of them read as empty too, so the box's end is looked for past them.
    repeats = rows.filter(status=BroadcastDelivery.Status.SENT, message_id__isnull=True).count()
    return RepeatSearch(
        broadcast_id, content, box_floor(before=broadcast.started_at) if content else 0, known + repeats,
        broadcast.finished_at or clock.now(), broadcast.total + SCAN_SLACK,
    )  # fmt: skip


def broadcast_repeats_find(*, gateway: Gateway, search: RepeatSearch, chat_ids: Collection[int]) -> dict[int, int]:
    """{chat: message id} of the broadcast's messages in `chat_ids` (chats whose send was confirmed
    only as a repeat), read back from the bot's box as `search` says; chats whose message is not
    found are left out (the user deleted it, or nothing tells what it shows). Raises TelegramError
    when Telegram refuses the reads (tried again later)."""
    if not search.content:
        log.warning("broadcast=%s: what its messages show is not known: %d repeats not looked for", search.broadcast_id,
                    len(chat_ids))  # fmt: skip
        return {}
    found = gateway.own_messages_in(
        chat_ids, after_id=search.after_id, until=search.until, content=search.content, scan_max=search.scan_max,
        box_to=search.box_to,
    )  # fmt: skip
    log.info("broadcast=%s: %d of %d messages confirmed only as repeats found (ids from %s)", search.broadcast_id,
             len(found), len(chat_ids), search.after_id)  # fmt: skip
    return found
