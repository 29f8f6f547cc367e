"""Auto-delete, the whole story: a delivery schedules its messages' deletion (`deletion_schedule`,
the one durable row a delivery writes), the `delete_due_messages` sweep deletes them when due
(`DeletionSweep` in scheduler/jobs/deletions.py: claim, work, record, by the rules below), and the
user is told with the "deleted" notice (`deleted_notice_send`: *Get files again* and *Close*).

Deletions are at-least-once: a claim whose worker died is handed back by the reaper, and deleting
twice is harmless. The notice is exactly once: it carries a random_id derived from its row
(the sweep's `Due.key`, fixed before the first attempt), so a notice whose outcome is unknown (a lost answer, a
-503 or 500 INTERNAL, a worker that died holding the row: the reaper keeps it due) is sent again
with the same one, which Telegram refuses as RANDOM_ID_DUPLICATE when the first one arrived
(`AlreadySent`: told). That holds for TELEGRAM_RANDOM_ID_WINDOW after its first attempt of unknown
outcome (`notice_from`); later the notice is given up, logged (the dead worker may have sent it).

A deletion is never given up while Telegram would still make it. Whatever kept it from being made
(an outage, a FloodWait, any refusal of Telegram's, a row handed back after an exception that was
not Telegram's) it is tried again later, with back-off (`deletion_retry_at`: 1, 2, 4 and 8 minutes,
then every 15, and a last try a minute before the window closes), until Telegram's 48 h window
closes (`DELETE_WINDOW` after the messages were sent). A row whose window has closed is kept as
`expired`, logged at WARNING and counted on the dashboard (`deletions_expired_count`): its messages
stay in the chat, and no notice says otherwise. The broadcast deleter (scheduler/jobs/broadcast_delete.py)
follows the same rule.

The sweep lives with its siblings in the scheduler, which calls the rules here: botapp never
imports scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, Value, When
from django.db.models.functions import Least

from botapp.db import row_insert, row_update
from botapp.models import BotSettings, BroadcastDelivery, ClaimStatus, PendingDeletion
from botapp.models.settings import AGAIN_BUTTON_TEXT
from botapp.services.files import deep_link
from botapp.services.texts import human_span
from botapp.signals import work_scheduled_announce
from botapp.telegram.gateway import Button, Gateway, SendItem, Sent
from botapp.telegram.limits import DELETE_WINDOW, DELETE_WINDOW_MINUTES

log = logging.getLogger(__name__)

WILL_DELETE = "⏳ These files will be deleted in {minutes}. Save them somewhere else if you want to keep them."

# A file delivery takes seconds (a few FloodWaits: a minute or two): a row still `delivering` this
# long after it was written belongs to a runbot that died between the copy and writing its ids.
# Also how long after its row an attempt's copies are looked for (services/delivery.py).
DELIVERY_GRACE = timedelta(minutes=10)
# A deletion not made is tried again RETRY_FIRST later, the wait doubling after each failure up to
# RETRY_MAX; the last try comes LAST_TRY before Telegram's window closes.
RETRY_FIRST = timedelta(minutes=1)
RETRY_MAX = timedelta(minutes=15)
LAST_TRY = timedelta(minutes=1)


# --- when a file is delivered --------------------------------------------------------------------


def auto_delete_set(*, minutes: int) -> None:
    """Bot settings' auto-delete time, as an admin's /autodelete sets it: 0 (never) to Telegram's
    48 h in minutes, or a ValidationError saying so, nothing changed. Files delivered from then on
    follow it; a link's own time still wins (services/files.py)."""
    if not 0 <= minutes <= DELETE_WINDOW_MINUTES:
        raise ValidationError(
            f"At most {DELETE_WINDOW_MINUTES // 60} hours ({DELETE_WINDOW_MINUTES} minutes): Telegram lets a bot delete its messages for 48 hours."
        )
    conf = BotSettings.load()
    conf.auto_delete_minutes = minutes
    conf.save(update_fields=["auto_delete_minutes"])


def deletion_warning(*, minutes: int) -> str:
    """The line a delivery adds to tell the user when the files will be deleted."""
    return WILL_DELETE.format(minutes=human_span(delta=timedelta(minutes=minutes)))


def deletion_schedule(
    *,
    chat_id: int,
    message_ids: Sequence[int],
    share_id: str,
    minutes: int,
    now: datetime,
    delivering: bool = False,
    delivery_key: str = "",
    after_id: int | None = None,
) -> PendingDeletion:
    """Record that these messages are to be deleted `minutes` after `now`: one INSERT, its own
    transaction, so the deletion survives any restart (and the sweep is woken for it: no query).
    `share_id` makes the notice's *Get files again* button (empty: no button). `delivering`: the
    messages are not sent yet (intent before effect): the row waits, `delivering`, until
    `deletion_delivered` writes their ids (`delivery_key`, `after_id`: PendingDeletion's)."""
    row = row_insert(
        PendingDeletion(
            chat_id=chat_id, message_ids=list(message_ids), delete_at=now + timedelta(minutes=minutes), share_id=share_id,
            status=ClaimStatus.DELIVERING if delivering else ClaimStatus.PENDING, delivery_key=delivery_key,
            after_id=after_id,
        )
    )  # fmt: skip
    work_scheduled_announce(work="deletion", due_at=row.delete_at)
    return row


def deletion_intent(
    *, chat_id: int, share_id: str, minutes: int, now: datetime, delivery_key: str, after_id: int | None, look: bool = True
) -> tuple[PendingDeletion, bool]:
    """The row of a delivery about to be made (`delivering`), and whether this call wrote it:
    False when the same delivery (`delivery_key`, an update handled again after a crash) wrote
    it before; then it is `delivering` still (cut off before its ids were written) or already
    holds its ids. `look`: False when no earlier handling can have written it (a read saved)."""
    if delivery_key and look:
        earlier = PendingDeletion.objects.filter(delivery_key=delivery_key).first()
        if earlier is not None:
            return earlier, False
    row = deletion_schedule(
        chat_id=chat_id, message_ids=[], share_id=share_id, minutes=minutes, now=now, delivering=True,
        delivery_key=delivery_key, after_id=after_id,
    )  # fmt: skip
    return row, True


def deletion_delivered(*, row: PendingDeletion, message_ids: Sequence[int]) -> None:
    """The delivery's messages are in the chat: their ids, and the row is due like any other.
    When the row is no longer `delivering` (the search for a cut-off delivery settled it, finding
    nothing: this delivery was alive after all), the messages get a row of their own."""
    written = row_update(
        PendingDeletion, row.pk, where={"status": ClaimStatus.DELIVERING}, message_ids=list(message_ids),
        status=ClaimStatus.PENDING,
    )  # fmt: skip
    if not written and not PendingDeletion.objects.filter(pk=row.pk).exists():
        log.warning("deletion=%s was settled while its delivery was alive: its messages get a row of their own", row.pk)
        deletion_schedule(chat_id=row.chat_id, message_ids=message_ids, share_id=row.share_id, minutes=0, now=row.delete_at)


def deletions_due_count(*, now: datetime) -> int:
    """How many deletions a sweep would take now (the job's dry run)."""
    return PendingDeletion.objects.filter(status=ClaimStatus.PENDING, delete_at__lte=now).count()


# --- when a deletion was not made ---------------------------------------------------------------


def deletion_last_try(*, sent_at: datetime) -> datetime:
    """The last moment a deletion of messages sent at `sent_at` is tried: LAST_TRY before Telegram's
    window closes. One that fails then (or later) is expired."""
    return sent_at + DELETE_WINDOW - LAST_TRY


def deletion_retry_at(*, now: datetime, attempts: str, sent_at: str) -> Least:
    """When deletions that failed at `now` are tried next, as an expression a bulk UPDATE sets per
    row from two of its columns: `attempts` (its failures before this one) and `sent_at` (when its
    messages were sent). RETRY_FIRST after the first failure, doubling after each one up to
    RETRY_MAX (1, 2, 4, 8, 15, 15, ... minutes), and never after `deletion_last_try`."""
    steps, wait = [], RETRY_FIRST
    while wait < RETRY_MAX:
        steps.append(When(**{attempts: len(steps)}, then=Value(now + wait)))
        wait *= 2
    backoff = Case(*steps, default=Value(now + RETRY_MAX), output_field=DateTimeField())
    last = ExpressionWrapper(F(sent_at) + Value(DELETE_WINDOW - LAST_TRY), output_field=DateTimeField())
    return Least(backoff, last)


def deletions_expired_count() -> dict[str, int]:
    """How many deletions Telegram's window closed on before they could be made, whose messages
    are still in the chats: {"files": auto-delete rows, "broadcasts": broadcast messages} (the
    dashboard; two counts, each through a partial index)."""
    return {
        "files": PendingDeletion.objects.filter(status=ClaimStatus.EXPIRED).count(),
        "broadcasts": BroadcastDelivery.objects.filter(status=BroadcastDelivery.Status.EXPIRED).count(),
    }


# --- and then ------------------------------------------------------------------------------------


def deleted_notice_send(
    *, gateway: Gateway, chat_id: int, share_id: str, text: str, label: str = AGAIN_BUTTON_TEXT, key: str = ""
) -> Sent:
    """After an auto-delete: say so, with the *Get files again* button (`label`: Bot settings'
    text; the same deep link; none without a share id) and *Close*. `key`: its random_id key
    (`Due.key`). Telegram's refusal is raised to the caller."""
    item = deleted_notice_item(gateway=gateway, chat_id=chat_id, share_id=share_id, text=text, label=label, key=key)
    return gateway.send_text(chat_id, item.text, buttons=item.buttons, key=key)


def deleted_notice_item(
    *, gateway: Gateway, chat_id: int, share_id: str, text: str, label: str = AGAIN_BUTTON_TEXT, key: str = ""
) -> SendItem:
    """The "deleted" notice as one send of a batch."""
    buttons = [[Button("❌ Close", callback_data="close")]]
    if share_id:
        again = Button(label, url=deep_link(bot_username=gateway.bot_username, payload=share_id))
        buttons = [[again, buttons[0][0]]]
    return SendItem(chat_id, text, buttons=buttons, key=key)
