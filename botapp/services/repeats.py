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


def broadcast_repeats_find(*, gateway: Gateway, broadcast_id: int, chat_ids: Collection[int]) -> dict[int, int]:
    """{chat: message id} of the broadcast's messages in `chat_ids` (chats whose send was confirmed
    only as a repeat), read back from the bot's box between the broadcast's start and its end (or
    now); chats whose message is not found are left out (the user deleted it, or nothing tells what
    it shows). Raises TelegramError when Telegram refuses the reads (tried again later)."""
    broadcast = Broadcast.objects.get(pk=broadcast_id)
    content = broadcast_content(gateway=gateway, broadcast=broadcast)
    if not content or broadcast.started_at is None:
        log.warning("broadcast=%s: what its messages show is not known: %d repeats not looked for", broadcast_id, len(chat_ids))
        return {}
    floor = box_floor(before=broadcast.started_at)
    found = gateway.own_messages_in(
        chat_ids, after_id=floor, until=broadcast.finished_at or clock.now(), content=content,
        scan_max=broadcast.total + SCAN_SLACK,
    )  # fmt: skip
    log.info("broadcast=%s: %d of %d messages confirmed only as repeats found from id %s", broadcast_id, len(found),
             len(chat_ids), floor)  # fmt: skip
    return found
