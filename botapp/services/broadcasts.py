"""Broadcasts: composed in the admin, sent to every active user by the `send_broadcasts` sweep.

Guarantees: each active user gets a delivery row when the broadcast starts (users who sent /stop,
blocked the bot or deleted their account get none); each row is sent at most once; a row whose
send was cut off by a crash becomes `interrupted`, never re-sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from botapp import clock
from botapp.models import BotSettings, Broadcast, BroadcastDelivery, TelegramUser
from botapp.services.broadcast_copy import MessageCopy, message_pin
from botapp.services.outgoing import Outgoing
from botapp.signals import broadcast_queued, broadcast_test_requested, work_scheduled_announce
from botapp.telegram.gateway import Gateway, Media, SendItem, Sent, TelegramError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BroadcastMessage:
    """A broadcast, ready to send: parsed once per batch, sent once per user."""

    outgoing: Outgoing
    delete_after: timedelta | None
    copy: MessageCopy | None = None  # a copy of existing message(s) instead of the composed one
    pin: bool = False
    reported: bool = False  # has a progress message in an admin's chat (/broadcast)
    made_at: datetime | None = None  # the broadcast's creation: part of its sends' keys (send_key)

    @classmethod
    def of(cls, broadcast: Broadcast, *, optout: str = "") -> BroadcastMessage:
        """`optout`: the opt-out button's text, under the message's buttons ("": none). A copy of
        several messages (an album) carries no buttons, so no opt-out button either."""
        return cls(
            outgoing=Outgoing.compose(
                text=broadcast.text,
                media_kind=broadcast.media_kind,
                media=broadcast.media,
                buttons=broadcast.buttons,
                protect=broadcast.protect_content,
                # Prefetched by the sender; every one has its file id by then (uploaded first).
                attachments=[Media(a.kind, a.file_id) for a in broadcast.attachments.all()],
                source=f"b{broadcast.pk}",
                optout=optout,
            ),
            delete_after=timedelta(minutes=broadcast.delete_after_minutes) if broadcast.delete_after_minutes else None,
            copy=MessageCopy.of(broadcast, optout=optout),
            pin=broadcast.pin,
            reported=broadcast.report_message_id is not None,
            made_at=broadcast.created_at,
        )

    def item(self, chat_id: int, *, user_id: int, key: str = "") -> SendItem | None:
        """One send of a batch (`Gateway.send_many`), or None when this broadcast is sent by `send`
        (a copy of posts, a pin after the send, several files). `key`: the delivery's random_id
        key (`send_key`)."""
        if self.copy is not None or self.pin:
            return None
        return self.outgoing.item(chat_id, user_id=user_id, key=key)

    def send(self, gateway: Gateway, chat_id: int, *, user_id: int, key: str = "") -> Sent:
        if self.copy is not None:
            sent = self.copy.send(
                gateway, chat_id, protect=self.outgoing.protect, user_id=user_id, source=self.outgoing.source, key=key
            )  # fmt: skip
        else:
            sent = self.outgoing.send(gateway, chat_id, user_id=user_id, key=key)
        if self.pin:
            message_pin(gateway=gateway, sent=sent)
        return sent


def broadcast_test_send(*, gateway: Gateway, broadcast: Broadcast, chat_ids: frozenset[int]) -> list[dict]:
    """Send the broadcast to the admins only, as users would see it (tracked buttons untracked).
    Every admin is tried, whatever the others gave; each one's result (chat_id, ok, error, at) is
    recorded on the broadcast for the console, and returned."""
    conf = BotSettings.load()
    message = BroadcastMessage.of(broadcast, optout=conf.optout_label if conf.optout_enabled else "")
    results = []
    for chat_id in sorted(chat_ids):
        try:
            if message.copy is not None:  # a copy of a post: as users get it
                message.copy.send(gateway, chat_id, protect=message.outgoing.protect, source=message.outgoing.source)
            else:
                message.outgoing.send(gateway, chat_id)
        except TelegramError as exc:
            results.append({"chat_id": chat_id, "ok": False, "error": str(exc)[:255], "at": clock.now().isoformat()})
        else:
            results.append({"chat_id": chat_id, "ok": True, "error": "", "at": clock.now().isoformat()})
    Broadcast.objects.filter(pk=broadcast.pk).update(test_results=results)
    return results


def broadcast_test_request(*, broadcast: Broadcast, admin_count: int) -> None:
    """Ask a worker to send the test (botapp's `broadcast_test_requested`; the scheduler queues it).
    Raises ValidationError when there is nobody to send it to or when it could not be queued (the
    task queue is unreachable): then nothing is recorded as requested."""
    if not admin_count:
        raise ValidationError("Set ADMIN_IDS to receive tests.")
    try:
        if not broadcast_test_requested.send(sender=Broadcast, broadcast_id=broadcast.pk):
            raise ValidationError("No background worker app is installed to send it.")
    except ValidationError:
        raise
    except Exception as exc:  # the broker is down
        raise ValidationError("Not queued: the task queue (the Celery broker) is unreachable.") from exc
    broadcast.test_requested_at, broadcast.test_results = clock.now(), []
    Broadcast.objects.filter(pk=broadcast.pk).update(test_requested_at=broadcast.test_requested_at, test_results=[])


def broadcast_audience() -> int:
    """How many users a broadcast to everyone started now would be queued for (the active ones)."""
    return TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE).count()


def broadcast_recipients_text(*, broadcast: Broadcast) -> tuple[int, str]:
    """Who `broadcast` goes to if started now, as `broadcast_start` queues them: how many, and
    in words ("4 active users", "the 2 listed users", "3 active users who came through 'spring'")."""
    if broadcast.audience == Broadcast.Audience.USERS:
        n = len(broadcast.recipient_ids or [])
        return n, f"the {n:,} listed user{'s' if n != 1 else ''}"
    if broadcast.audience == Broadcast.Audience.PAYLOAD:
        n = TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE, start_payload=broadcast.audience_payload).count()
        return n, f"{n:,} active user{'s' if n != 1 else ''} who came through “{broadcast.audience_payload}”"
    n = broadcast_audience()
    return n, f"{n:,} active user{'s' if n != 1 else ''}"


def broadcast_duplicate(*, broadcast: Broadcast) -> Broadcast:
    """A new draft with the same message and the same recipients: text, media, buttons, attachments
    (a scheduled message's files: Telegram's file id, or a copy of a file not uploaded yet), copied
    messages, protection, pin, lifetime, kind and audience (every active user, the listed users, or
    a start payload's). Titled as a copy; its schedule, counters and test results start empty."""
    from django.core.files import File

    from botapp.models import BroadcastAttachment

    with transaction.atomic():
        copy = Broadcast.objects.create(
            title=f"{broadcast.title} (copy)"[:255],
            text=broadcast.text,
            media_kind=broadcast.media_kind,
            media=broadcast.media,
            buttons=broadcast.buttons,
            protect_content=broadcast.protect_content,
            pin=broadcast.pin,
            delete_after_minutes=broadcast.delete_after_minutes,
            kind=broadcast.kind,
            audience=broadcast.audience,
            audience_payload=broadcast.audience_payload,
            recipient_ids=list(broadcast.recipient_ids),
            copy_chat_id=broadcast.copy_chat_id,
            copy_message_ids=list(broadcast.copy_message_ids),
            origin=broadcast.origin,
            created_by=broadcast.created_by,
            api_client=broadcast.api_client,
        )
        for old in broadcast.attachments.all():
            new = BroadcastAttachment(
                broadcast=copy, position=old.position, kind=old.kind, file_name=old.file_name, size=old.size, file_id=old.file_id
            )
            if not old.file_id and old.upload:  # its own file: the original's may be replaced (and deleted)
                with old.upload.open("rb") as stored:  # copied in chunks: a file may be 2 GB
                    new.upload.save(old.file_name or old.upload.name.rsplit("/", 1)[-1], File(stored), save=False)
            new.save()
    return copy


def broadcast_delete_refusal(*, broadcast: Broadcast) -> str:
    """Why this broadcast may not be deleted yet ("" when it may): a broadcast with a lifetime
    whose messages are still in users' chats keeps its deliveries until the deleter has removed
    them (deleting the rows would leave the messages there for good), and one being sent is
    cancelled first."""
    if broadcast.status in (Broadcast.Status.QUEUED, Broadcast.Status.SENDING):
        return "It is being sent: cancel it first."
    if broadcast.delete_after_minutes:
        waiting = broadcast.deliveries.filter(status=BroadcastDelivery.Status.SENT, delete_at__isnull=False).count()
        if waiting:
            return (
                f"{waiting} of its messages are still in users' chats and are deleted when their lifetime ends; "
                "delete the broadcast after that."
            )
    return ""


def broadcast_start(*, broadcast: Broadcast) -> int:
    """Start a draft: queue it for every active user now, or, when its `scheduled_at` is in the
    future, schedule it (users are chosen when it comes due, so later joiners get it too).
    Returns how many users it was queued for (0 when scheduled)."""
    if broadcast.status != Broadcast.Status.DRAFT:
        raise ValidationError(f"Only a draft can be started; this one is {broadcast.get_status_display().lower()}.")
    with transaction.atomic():
        locked = Broadcast.objects.select_for_update().get(pk=broadcast.pk)
        if locked.status != Broadcast.Status.DRAFT:
            raise ValidationError("This broadcast was started already.")
        if locked.scheduled_at and locked.scheduled_at > clock.now():
            Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.SCHEDULED)
            work_scheduled_announce(work="broadcast", due_at=locked.scheduled_at)
            total = 0
        else:
            total = _queue(locked)
    broadcast.refresh_from_db()
    return total


def broadcasts_start_due() -> int:
    """Queue scheduled broadcasts whose time has come (the sender runs this every minute)."""
    started = 0
    due = Broadcast.objects.filter(status=Broadcast.Status.SCHEDULED, scheduled_at__lte=clock.now()).values_list("pk", flat=True)
    for pk in due:
        with transaction.atomic():
            locked = (
                Broadcast.objects.select_for_update(skip_locked=True).filter(pk=pk, status=Broadcast.Status.SCHEDULED).first()
            )
            if locked is not None:
                _queue(locked, wake=False)  # the sender calling this sends it next: no wake-up
                started += 1
    return started


def _queue(broadcast: Broadcast, *, wake: bool = True) -> int:
    """One delivery row per recipient (one INSERT ... SELECT; listed ids as one array on PostgreSQL,
    10,000 per statement elsewhere); with `wake`, `broadcast_queued` is sent when the transaction
    commits (the scheduler wakes the sender). Listed users are queued whatever their state: the sender records why a
    stopped or unreachable one got nothing; listed ids that are no user count as `not_users`. Call
    inside a transaction, row locked. Returns the number of recipients."""
    table, users = BroadcastDelivery._meta.db_table, TelegramUser._meta.db_table
    insert = (
        f"INSERT INTO {table} (broadcast_id, user_id, chat_id, status, error) SELECT %s, id, telegram_id, %s, '' FROM {users}"
    )
    pending = BroadcastDelivery.Status.PENDING
    queued = not_users = 0
    with connection.cursor() as cursor:
        if broadcast.audience == Broadcast.Audience.USERS:
            ids = list(broadcast.recipient_ids)
            # The whole list as one array parameter, one statement. Each user matches once however
            # often the list names them, so no ON CONFLICT (its speculative inserts cost a third).
            cursor.execute(f"{insert} WHERE telegram_id = ANY(%s)", [broadcast.pk, pending, ids])
            queued = cursor.rowcount
            not_users = len(ids) - queued
        elif broadcast.audience == Broadcast.Audience.PAYLOAD:
            cursor.execute(
                f"{insert} WHERE state = %s AND start_payload = %s",
                [broadcast.pk, pending, TelegramUser.State.ACTIVE, broadcast.audience_payload],
            )
            queued = cursor.rowcount
        else:
            cursor.execute(f"{insert} WHERE state = %s", [broadcast.pk, pending, TelegramUser.State.ACTIVE])
            queued = cursor.rowcount
    total = queued + not_users
    now = clock.now()
    status = Broadcast.Status.QUEUED if queued else Broadcast.Status.DONE
    Broadcast.objects.filter(pk=broadcast.pk).update(
        status=status, total=total, not_users=not_users, started_at=now, finished_at=None if queued else now
    )
    if queued and wake:
        pk = broadcast.pk
        transaction.on_commit(lambda: broadcast_queued.send_robust(sender=Broadcast, broadcast_id=pk))
    return total


def broadcast_cancel(*, broadcast: Broadcast) -> int:
    """Stop sending: deliveries not yet sent stay unsent. Returns how many were left unsent."""
    if broadcast.status not in (
        Broadcast.Status.SCHEDULED, Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.PAUSED
    ):  # fmt: skip
        raise ValidationError("Only a scheduled, sending or paused broadcast can be cancelled.")
    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.CANCELLED, finished_at=clock.now())
    left = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
    broadcast.refresh_from_db()
    return left


# The same unexpected error (not Telegram's answer: a bug, ours or a library's) in this many runs in
# a row pauses a broadcast: its rows go back untouched each time, and an operator should look
# rather than have every worker meet it again every minute.
PAUSE_AFTER = 3


def broadcast_handback_note(*, broadcast_id: int, error: str) -> bool:
    """A run handed rows of the broadcast back for `error` ("Type: message"). The same error in
    PAUSE_AFTER runs in a row pauses it (logged, on its page and the dashboard; resumable); another
    error starts the count again. Call once per run. Returns whether it is now paused."""
    error = error[:255]
    with transaction.atomic():
        broadcast = Broadcast.objects.select_for_update().filter(pk=broadcast_id).first()
        if broadcast is None:
            return False
        streak = broadcast.error_streak + 1 if broadcast.error_last == error else 1
        fields = {"error_last": error, "error_streak": streak}
        pause = streak >= PAUSE_AFTER and broadcast.status in (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)
        if pause:
            fields.update(
                status=Broadcast.Status.PAUSED,
                paused_reason=f"Paused after the same unexpected error in {streak} runs in a row: {error}. "
                "Its users who have not got it are kept; resume it once the cause is fixed.",
            )
        Broadcast.objects.filter(pk=broadcast_id).update(**fields)
    if pause:
        log.error("broadcast %s paused after %s runs in a row with: %s", broadcast_id, streak, error)
    return pause


def broadcasts_progress_note(*, broadcast_ids) -> None:
    """Rows of these broadcasts were sent or settled: whatever error streak they had is over."""
    if broadcast_ids:
        Broadcast.objects.filter(pk__in=list(broadcast_ids), error_streak__gt=0).update(error_streak=0, error_last="")


def broadcast_resume(*, broadcast: Broadcast) -> int:
    """Send a paused broadcast again (its streak forgotten). Returns how many users are left."""
    if broadcast.status != Broadcast.Status.PAUSED:
        raise ValidationError("Only a paused broadcast can be resumed.")
    Broadcast.objects.filter(pk=broadcast.pk, status=Broadcast.Status.PAUSED).update(
        status=Broadcast.Status.SENDING, error_streak=0, error_last="", paused_reason=""
    )
    broadcast.refresh_from_db()
    return broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
