"""Broadcasts: composed in the admin, sent to every active user by the `send_broadcasts` sweep.

Guarantees: each active user gets a delivery row when the broadcast starts (users who sent /stop,
blocked the bot or deleted their account get none); each row is sent at most once; a row whose
send was cut off by a crash becomes `interrupted`, never re-sent.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef

from botapp import clock
from botapp.models import BotSettings, Broadcast, BroadcastAttachment, BroadcastDelivery, TelegramUser
from botapp.services.audit import audit_record
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
            audit_record(action="broadcast.start", target=locked, detail=f"scheduled for {locked.scheduled_at:%Y-%m-%d %H:%M %Z}")
        else:
            total = _queue(locked)
            audit_record(action="broadcast.start", target=locked, detail=f"queued for {total} user(s)")
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


# Starting a broadcast answers at once whatever its audience (the admin's view, the API's, /broadcast;
# gunicorn's timeout killed a start of a few million users when every row was made in the request).
# The request makes the first START_ROWS delivery rows, so a broadcast to that many or fewer is
# queued whole and at once, and sending starts with them; a worker makes the rest
# (`broadcasts_prepare`, the job `prepare_broadcasts`), PREPARE_CHUNK rows per transaction.
# Both are sized so that the request's rows take a fraction of a second and a chunk's transaction
# stays short (the INSERT … SELECT and its indexes; docs/benchmarks.md has the figures).
START_ROWS = 10_000
PREPARE_CHUNK = 50_000
# Statuses in which rows are still made: a paused broadcast is one whose sending stopped.
PREPARED_IN = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.PAUSED)
# pg_try_advisory_xact_lock(PREPARE_LOCK, broadcast id): one worker makes a broadcast's rows at a time.
PREPARE_LOCK = 0x62726472  # "brdr"


def _queue(broadcast: Broadcast, *, wake: bool = True) -> int:
    """Queue a broadcast: its first START_ROWS delivery rows now, and, when its audience is larger,
    the rest by a worker (`broadcasts_prepare`; `prepare_after` says how far it is). With `wake`,
    `broadcast_queued` is sent when the transaction commits (the scheduler wakes the sender, and
    the preparer when rows are left to make). Call inside a transaction, row locked. Returns the
    recipients queued so far."""
    made, not_users, after = _rows_make(broadcast, after=None, limit=START_ROWS)
    total = made + not_users
    now = clock.now()
    waiting = bool(made) or after is not None
    Broadcast.objects.filter(pk=broadcast.pk).update(
        status=Broadcast.Status.QUEUED if waiting else Broadcast.Status.DONE,
        total=total, not_users=not_users, started_at=now, finished_at=None if waiting else now,
        prepare_after=after, audience_size=None,
    )  # fmt: skip
    if waiting and (wake or after is not None):
        pk, preparing = broadcast.pk, after is not None
        transaction.on_commit(
            lambda: broadcast_queued.send_robust(sender=Broadcast, broadcast_id=pk, send=wake, preparing=preparing)
        )
    return total


def _rows_make(broadcast: Broadcast, *, after: int | None, limit: int) -> tuple[int, int, int | None]:
    """Make up to `limit` delivery rows of the broadcast's audience past `after` (None: from the
    start), in one statement. Returns (rows made, listed ids that are no user, where the next
    chunk starts — None when the audience is done).

    Every active user (or those a start payload brought): in the order of their pk, so a chunk is a
    walk of the primary key from `after`; users who join while the rows are being made get it too
    (as a scheduled broadcast's later joiners do). Listed users: the list in its order, each user
    once however often it names them, whatever their state (the sender records why a stopped or
    unreachable one got nothing); listed ids that are no user count as `not_users`."""
    table, users = BroadcastDelivery._meta.db_table, TelegramUser._meta.db_table
    pending = BroadcastDelivery.Status.PENDING
    with connection.cursor() as cursor:
        if broadcast.audience == Broadcast.Audience.USERS:
            listed = list(broadcast.recipient_ids)
            start = after or 0
            seen = set(listed[:start])
            ids = [i for i in dict.fromkeys(listed[start : start + limit]) if i not in seen]
            # The chunk as one array parameter, one statement; no ON CONFLICT (its speculative
            # inserts cost a third): the ids are distinct and new to the broadcast.
            cursor.execute(
                f"INSERT INTO {table} (broadcast_id, user_id, chat_id, status, error) "
                f"SELECT %s, id, telegram_id, %s, '' FROM {users} WHERE telegram_id = ANY(%s)",
                [broadcast.pk, pending, ids],
            )
            made = cursor.rowcount
            end = start + limit
            return made, len(ids) - made, end if end < len(listed) else None
        where, params = "state = %s", [TelegramUser.State.ACTIVE]
        if broadcast.audience == Broadcast.Audience.PAYLOAD:
            where, params = "state = %s AND start_payload = %s", [TelegramUser.State.ACTIVE, broadcast.audience_payload]
        cursor.execute(
            f"WITH chunk AS (SELECT id, telegram_id FROM {users} WHERE {where} AND id > %s ORDER BY id LIMIT %s), "
            f"made AS (INSERT INTO {table} (broadcast_id, user_id, chat_id, status, error) "
            f"SELECT %s, id, telegram_id, %s, '' FROM chunk) "
            "SELECT count(*), max(id) FROM chunk",
            [*params, after or 0, limit, broadcast.pk, pending],
        )
        made, last = cursor.fetchone()
        return made, 0, last if made == limit else None


def _audience_left(broadcast: Broadcast, *, after: int) -> int:
    """Recipients past `after` whose rows are still to be made (one count, slow at millions of users:
    asked once per broadcast prepared, not per chunk)."""
    if broadcast.audience == Broadcast.Audience.USERS:
        listed = list(broadcast.recipient_ids)
        return len(set(listed[after:]) - set(listed[:after]))
    users = TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE, pk__gt=after)
    if broadcast.audience == Broadcast.Audience.PAYLOAD:
        users = users.filter(start_payload=broadcast.audience_payload)
    return users.count()


@dataclass
class Prepared:
    rows: int = 0  # delivery rows made
    broadcasts: int = 0  # broadcasts whose rows are now all made
    more: bool = False  # the budget ran out with rows left to make


def broadcasts_prepare(*, time_budget: float = 50.0, chunk: int | None = None) -> Prepared:
    """Make the delivery rows of started broadcasts whose audience was too large to queue at once,
    `chunk` rows per transaction (the rows and how far they go, committed together: a worker killed
    mid-chunk leaves nothing of it), oldest broadcast first, until none is left or `time_budget`
    seconds have passed. A broadcast another worker is preparing is left to it; one cancelled
    meanwhile gets no more rows. When the last rows are made and all were sent already, the
    broadcast is marked done here (no send is left to do it)."""
    deadline = time.monotonic() + time_budget
    chunk = chunk or PREPARE_CHUNK  # read at the call: the chaos suite's workers make smaller chunks
    done = Prepared()
    pks = (
        Broadcast.objects.filter(status__in=PREPARED_IN, prepare_after__isnull=False).order_by("id").values_list("pk", flat=True)
    )
    for pk in list(pks):
        while True:
            if time.monotonic() >= deadline:
                done.more = True
                return done
            step = _prepare_chunk(pk, chunk=chunk)
            if step is None:  # another worker has it, or it was cancelled or finished meanwhile
                break
            made, finished = step
            done.rows += made
            if finished:
                done.broadcasts += 1
                broadcasts_finish(broadcast_ids=[pk])
                break
    return done


def _prepare_chunk(pk: int, *, chunk: int) -> tuple[int, bool] | None:
    """One chunk of a broadcast's rows and its new place, in one transaction. Returns (rows made,
    whether that was the last chunk), or None when there is nothing to do here."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [PREPARE_LOCK, pk])
            if not cursor.fetchone()[0]:
                return None
        broadcast = Broadcast.objects.filter(pk=pk, status__in=PREPARED_IN, prepare_after__isnull=False).first()
        if broadcast is None:
            return None
        size = broadcast.audience_size
        if size is None:  # the progress's "of N": counted once, when the worker takes it up
            size = broadcast.total + _audience_left(broadcast, after=broadcast.prepare_after)
        made, not_users, after = _rows_make(broadcast, after=broadcast.prepare_after, limit=chunk)
        # Only while it is still being sent: a broadcast cancelled since gets none of this chunk. The
        # row lock this takes is held to the commit only (the sender records counters on it too).
        moved = Broadcast.objects.filter(pk=pk, status__in=PREPARED_IN).update(
            total=F("total") + made + not_users,
            not_users=F("not_users") + not_users,
            prepare_after=after,
            audience_size=None if after is None else max(size, broadcast.total + made + not_users),
        )
        if not moved:
            transaction.set_rollback(True)
            return None
    log.info("broadcast %s: %s rows made%s", pk, made, "" if after is not None else ", all of them")
    return made, after is None


def broadcasts_finish(*, broadcast_ids) -> int:
    """Mark done those of the broadcasts being sent whose rows are all made and none is pending or
    being sent (the sender after its last results, the preparer after its last chunk, the reaper
    as a safety net). Returns how many."""
    if not broadcast_ids:
        return 0
    return broadcasts_settled(
        broadcasts=Broadcast.objects.filter(
            id__in=list(broadcast_ids), status__in=(Broadcast.Status.QUEUED, Broadcast.Status.SENDING), prepare_after__isnull=True
        )
    ).update(status=Broadcast.Status.DONE, finished_at=clock.now())


def broadcasts_settled(*, broadcasts):
    """Those of the broadcasts none of whose rows is pending or being sent. One NOT EXISTS per
    status, each a look into its partial index (`delivery_pending`, `delivery_sending`): asked as
    one `status IN ('pending', 'sending')`, PostgreSQL matched neither index and scanned the whole
    table, in the reaper's every minute."""
    Status = BroadcastDelivery.Status
    left = {s: BroadcastDelivery.objects.filter(broadcast=OuterRef("pk"), status=s) for s in (Status.PENDING, Status.SENDING)}
    return broadcasts.exclude(Exists(left[Status.PENDING])).exclude(Exists(left[Status.SENDING]))


def broadcast_progress_text(*, broadcast: Broadcast) -> str:
    """Its recipients, for the operator: "1,234 users", or while its rows are still being made
    "preparing 3,400,000 of 10,000,000 users"."""
    if broadcast.prepare_after is not None and broadcast.status in PREPARED_IN:
        size = f" of {broadcast.audience_size:,}" if broadcast.audience_size is not None else ""
        return f"preparing {broadcast.total:,}{size} users"
    return f"{broadcast.total:,} user{'s' if broadcast.total != 1 else ''}"


def broadcast_cancel(*, broadcast: Broadcast) -> int:
    """Stop sending: deliveries not yet sent stay unsent. Returns how many were left unsent."""
    if broadcast.status not in (
        Broadcast.Status.SCHEDULED, Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.PAUSED
    ):  # fmt: skip
        raise ValidationError("Only a scheduled, sending or paused broadcast can be cancelled.")
    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.CANCELLED, finished_at=clock.now())
    left = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
    broadcast.refresh_from_db()
    audit_record(action="broadcast.cancel", target=broadcast, detail=f"{left} user(s) left unsent")
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
    left = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
    audit_record(action="broadcast.resume", target=broadcast, detail=f"{left} user(s) left to send")
    return left
