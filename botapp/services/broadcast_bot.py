"""Broadcasts started from Telegram: an admin's `/broadcast` (or `/pbroadcast`) reply, and marked
posts in the broadcast source channel. Each is an ordinary Broadcast row: the operator console
shows its progress and can cancel it, and the sender (`send_broadcasts`) sends it.

Guarantees: `/broadcast` only drafts; nothing is sent before the admin taps Send. The progress
message is edited at most once every REPORT_EVERY while the broadcast runs, and once more when it
is done (whichever process records the last results), never twice for one state by two workers.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.utils.html import escape

from botapp import clock
from botapp.models import BotSettings, Broadcast, TelegramUser
from botapp.models.buttons import buttons_parse
from botapp.services.broadcasts import broadcast_progress_text, broadcast_start
from botapp.telegram.gateway import Button, ChannelPost, Gateway, TelegramError

log = logging.getLogger(__name__)

REPORT_EVERY = timedelta(seconds=5)
FINISHED = (Broadcast.Status.DONE, Broadcast.Status.CANCELLED)


def broadcast_audience() -> int:
    """How many users a broadcast started now would go to (every active user)."""
    return TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE).count()


def broadcast_copy_draft(*, chat_id: int, message_ids: list[int], pin: bool, created_by: int) -> Broadcast:
    """A draft that copies the admin's message(s) (an album: all of its messages) to every active user."""
    kind = "album" if len(message_ids) > 1 else "message"
    return Broadcast.objects.create(
        title=f"{'/pbroadcast' if pin else '/broadcast'} by {created_by}: {kind} #{message_ids[0]}",
        text="",
        copy_chat_id=chat_id,
        copy_message_ids=list(message_ids),
        pin=pin,
        origin="command",
        created_by=created_by,
    )


def broadcast_report_text(*, broadcast: Broadcast) -> tuple[str, list[list[Button]]]:
    """The progress message: counts so far, with a Cancel button while it runs."""
    b = broadcast
    done = b.sent + b.failed + b.blocked + b.skipped + b.interrupted
    counts = f"Delivered {b.sent}, blocked {b.blocked}, failed {b.failed + b.interrupted}, skipped {b.skipped}."
    if b.status == Broadcast.Status.DONE:
        return f"✅ Broadcast #{b.pk} finished: {b.sent} of {b.total} users got it.\n{counts}", []
    if b.status == Broadcast.Status.CANCELLED:
        return f"⛔ Broadcast #{b.pk} cancelled after {done} of {b.total} users.\n{counts}", []
    of = f"{b.total} users" if b.prepare_after is None else f"{b.total} users so far, {broadcast_progress_text(broadcast=b)}"
    return (
        f"📤 Broadcast #{b.pk}: {done} of {of}…\n{counts}",
        [[Button("⛔ Cancel", callback_data=f"bcast:stop:{b.pk}")]],
    )


def broadcast_report_attach(*, broadcast: Broadcast, chat_id: int, message_id: int) -> None:
    """The message the sender keeps up to date with the broadcast's progress."""
    Broadcast.objects.filter(pk=broadcast.pk).update(
        report_chat_id=chat_id, report_message_id=message_id, reported_at=clock.now()
    )


def broadcasts_report(*, gateway: Gateway, broadcast_ids: list[int]) -> int:
    """Edit the progress messages of these broadcasts that are due an edit (REPORT_EVERY since the
    last, or finished since): each edit is claimed with a conditional UPDATE first, so two workers
    recording at once edit it once. Returns how many were edited; Telegram's refusals are logged."""
    now = clock.now()
    edited = 0
    for b in Broadcast.objects.filter(id__in=broadcast_ids, report_message_id__isnull=False):
        if b.status in FINISHED:
            due = b.finished_at is not None and (b.reported_at is None or b.reported_at < b.finished_at)
        else:
            due = b.reported_at is None or b.reported_at <= now - REPORT_EVERY
        if not due:
            continue
        mark = max(now, b.finished_at) if b.finished_at else now
        if not Broadcast.objects.filter(pk=b.pk, reported_at=b.reported_at).update(reported_at=mark):
            continue  # another worker took this edit
        text, buttons = broadcast_report_text(broadcast=b)
        try:
            gateway.edit_text(b.report_chat_id, b.report_message_id, text, buttons=buttons or None)
            edited += 1
        except TelegramError as exc:
            log.warning("broadcast progress not edited broadcast=%s chat=%s: %s", b.pk, b.report_chat_id, exc)
    return edited


def channel_post_broadcast(*, post: ChannelPost, conf: BotSettings) -> Broadcast | None:
    """A post in the broadcast source channel: when it starts with the marker (Bot settings) it is
    broadcast to every active user at once, without the marker, with the channel-post button if one
    is set. Returns the started broadcast, or None for a post without the marker or with nothing
    left to send once the marker is taken out."""
    marker = conf.channel_post_marker.strip()
    text = post.text
    if not marker or not text.startswith(marker) or text[len(marker) : len(marker) + 1] not in ("", " ", "\n", "\t"):
        return None
    rest = text[len(marker) :].strip()
    html = post.html.strip()
    html = html[len(marker) :].strip() if html.startswith(marker) else escape(rest)  # a marker inside formatting
    if not rest and post.media is None:
        log.warning("channel post %s/%s has only the marker: nothing to broadcast", post.chat_id, post.message_id)
        return None
    buttons = conf.channel_post_button.strip()
    try:
        buttons_parse(text=buttons)
    except ValidationError as exc:
        log.error("channel-post button in Bot settings is invalid, sending without it: %s", exc.messages[0])
        buttons = ""
    broadcast = Broadcast.objects.create(
        title=f"Channel post #{post.message_id}: {rest[:80] or post.media.kind}",
        text=html,
        media_kind=post.media.kind if post.media else "",
        media=post.media.file if post.media else "",
        buttons=buttons,
        copy_chat_id=post.chat_id,
        copy_message_ids=[post.message_id],
        origin="channel",
    )
    total = broadcast_start(broadcast=broadcast)
    log.info(
        "channel post broadcast=%s chat=%s message=%s queued for %s users", broadcast.pk, post.chat_id, post.message_id, total
    )
    return broadcast
