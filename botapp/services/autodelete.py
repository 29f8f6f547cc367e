"""Auto-delete, the whole story: a delivery schedules its messages' deletion (`deletion_schedule`,
the one durable row a delivery writes), the `delete_due_messages` sweep deletes them when due
(`DeletionSweep`: claim, work, record), and the user is told with the "deleted" notice
(`deleted_notice_send`: *Get files again* and *Close*).

Deletions are at-least-once: a claim whose worker died is handed back by the reaper, and deleting
twice is harmless. The notice is exactly once: it carries a random_id derived from its row
(`Due.key`, fixed before the first attempt), so a notice whose outcome is unknown (a lost answer, a
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

The scheduler only wires `DeletionSweep` into its sweep loop and job registry
(scheduler/jobs/deletions.py): botapp never imports scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, OuterRef, Subquery, Value, When
from django.db.models.functions import Least

from botapp import clock
from botapp.db import ids_delete, ids_update, row_insert, row_update
from botapp.models import BotSettings, BroadcastDelivery, ClaimStatus, PendingDeletion, TelegramUser
from botapp.models.settings import AGAIN_BUTTON_TEXT
from botapp.services.files import deep_link
from botapp.services.outgoing import send_key
from botapp.services.texts import human_span
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.signals import work_scheduled_announce
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    AlreadySent,
    Button,
    FloodWait,
    Gateway,
    OutcomeUnknown,
    SendItem,
    Sent,
    TelegramError,
    TransientError,
)
from botapp.telegram.limits import DELETE_WINDOW, DELETE_WINDOW_MINUTES

log = logging.getLogger(__name__)

WILL_DELETE = "⏳ These files will be deleted in {minutes}. Save them somewhere else if you want to keep them."

# A file delivery takes seconds (a few FloodWaits: a minute or two): a row still `delivering` this
# long after it was written belongs to a runbot that died between the copy and writing its ids.
# Also how long after its row an attempt's copies are looked for (services/delivery.py).
DELIVERY_GRACE = timedelta(minutes=10)
LEASE = timedelta(minutes=5)  # a claimed row whose sweeper is silent this long goes back (the reaper)
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


# --- when they are due ---------------------------------------------------------------------------


@dataclass(slots=True)
class Due:
    id: int
    chat_id: int
    message_ids: list[int]  # none left: deleted by an earlier try, whose notice is still to be sent
    share_id: str
    notice_due: bool = True
    created_at: datetime | None = None  # when the messages were sent (the row is made just before)
    attempts: int = 0  # tries that failed so far
    notice_from: datetime | None = None  # the notice's first attempt of unknown outcome (None: none)
    late: bool = False  # that attempt is older than TELEGRAM_RANDOM_ID_WINDOW: the notice is given up

    @property
    def key(self) -> str:
        """The notice's random_id key (`send_key` kind "n"): the row and when it was made, the same
        in every process and attempt."""
        return send_key(kind="n", row_id=self.id, made_at=self.created_at) if self.created_at is not None else ""

    def past_window(self, now: datetime) -> bool:
        """Telegram no longer lets the bot delete these messages (DELETE_WINDOW after sending)."""
        return bool(self.message_ids) and self.created_at is not None and now - self.created_at >= DELETE_WINDOW

    def last_chance(self, now: datetime) -> bool:
        """A try that fails now leaves no time for another one."""
        return self.created_at is not None and now >= deletion_last_try(sent_at=self.created_at)


EXPIRED = "past Telegram's 48 h window: the messages stay in the chat, and no notice says they were deleted"


@dataclass(slots=True)
class Done:
    id: int
    chat_id: int
    # deleted | skipped (Telegram deleted none: gone already) | retry | notice (deleted, the notice
    # is tried again) | expired
    outcome: str
    unreachable: str = ""  # a TelegramUser.State when the user blocked the bot or is gone
    error: str = ""
    # Set: the notice's outcome is unknown and it is sent again with the same random_id, until
    # TELEGRAM_RANDOM_ID_WINDOW after this (its first such attempt).
    notice_from: datetime | None = None


def _quietly(exc: Exception) -> int:
    """The log level of a deletion Telegram did not make: expected in an outage, odd otherwise."""
    return logging.INFO if isinstance(exc, (FloodWait, TransientError)) else logging.WARNING


@dataclass
class DeletionSweep:
    """claim / work / handback / record for the sweep loop (scheduler/jobs/sweep.py): the claim
    leases due rows with SKIP LOCKED, `work` calls Telegram with no lock held, `record` settles a
    batch in a constant number of statements."""

    gateway: Gateway
    conf: BotSettings = field(default_factory=BotSettings.load)

    def claim(self, n: int) -> list[Due]:
        now = clock.now()
        with transaction.atomic():
            rows = list(
                PendingDeletion.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=ClaimStatus.PENDING, delete_at__lte=now)
                .order_by("delete_at")
                .annotate(
                    access_hash=Subquery(TelegramUser.objects.filter(telegram_id=OuterRef("chat_id")).values("access_hash")[:1])
                )
                .values_list(
                    "id", "chat_id", "message_ids", "share_id", "notice_due", "created_at", "attempts", "notice_from",
                    "access_hash", named=True,
                )[:n]
            )  # fmt: skip
            if rows:
                ids_update(PendingDeletion, [r.id for r in rows], status=ClaimStatus.CLAIMED, lease_until=now + LEASE)
        self.gateway.peers_remember({r.chat_id: r.access_hash for r in rows})
        cutoff = now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
        return [
            Due(
                r.id,
                r.chat_id,
                r.message_ids,
                r.share_id,
                r.notice_due,
                r.created_at,
                r.attempts,
                r.notice_from,
                late=r.notice_from is not None and r.notice_from < cutoff,
            )
            for r in rows
        ]

    def _expired(self, due: Due, error: str = "") -> Done:
        """A row whose messages Telegram will not delete any more (the window closed before a try
        could be made, or its last try failed): nothing is deleted, no notice claims it was, and
        the row stays, `expired`."""
        last = f" (last try: {error})" if error else ""
        log.warning(
            "deletion=%s chat=%s messages=%s expired after %s failed tries: %s%s",
            due.id, due.chat_id, due.message_ids, due.attempts + bool(error), EXPIRED, last,
        )  # fmt: skip
        return Done(due.id, due.chat_id, "expired", error=error or EXPIRED)

    def _not_deleted(self, due: Due, exc: TelegramError, now: datetime) -> Done:
        """Telegram did not delete (an outage, a FloodWait, a refusal): tried again later, or
        expired when no time is left."""
        if due.last_chance(now):
            return self._expired(due, str(exc))
        return Done(due.id, due.chat_id, "retry", error=str(exc))

    def work(self, due: Due) -> Done:
        now = clock.now()
        if due.past_window(now):
            return self._expired(due)
        deleted = 0
        if due.message_ids:
            try:
                deleted = self.gateway.delete_messages(due.chat_id, due.message_ids)
            except TelegramError as exc:
                log.log(_quietly(exc), "deletion=%s chat=%s not made, tried again later: %s", due.id, due.chat_id, exc)
                return self._not_deleted(due, exc, now)
            if deleted < len(due.message_ids):
                # Deleted by the user already, or the chat is gone: nothing more to do.
                log.info("deletion=%s chat=%s: Telegram deleted %s of %s", due.id, due.chat_id, deleted, len(due.message_ids))
        outcome = "deleted" if deleted or not due.message_ids else "skipped"
        if not due.notice_due:
            return Done(due.id, due.chat_id, outcome)
        if due.late:
            return self._notice_late(due)
        try:
            deleted_notice_send(
                gateway=self.gateway, chat_id=due.chat_id, share_id=due.share_id, text=self.conf.deleted_notice_text,
                label=self.conf.again_button_text, key=due.key,
            )  # fmt: skip
        except TelegramError as exc:
            return self._noticed(due, exc, now)
        return Done(due.id, due.chat_id, outcome)

    group = DELETE_CHUNK  # rows per work_many: one messages.deleteMessages for all their private chats

    def work_many(self, dues: Sequence[Due]) -> list[Done | Exception]:
        """What `work` does, for many rows at once: the messages of every private chat deleted
        together (`delete_private`: one call per DELETE_CHUNK ids), then the notices sent together
        (`send_many`: a container per window of the limiter). Channels and groups go row by row.
        A row's exception is its entry (handed back)."""
        results: dict[int, Done | Exception] = {}
        now = clock.now()
        results.update({d.id: self._expired(d) for d in dues if d.past_window(now)})
        private = [d for d in dues if d.chat_id > 0 and d.id not in results]
        for due in dues:
            if due.chat_id <= 0 and due.id not in results:
                try:
                    results[due.id] = self.work(due)
                except Exception as exc:  # noqa: BLE001 - that row goes back
                    results[due.id] = exc
        deleting = [d for d in private if d.message_ids]
        try:
            self.gateway.delete_private([(d.chat_id, d.message_ids) for d in deleting])
        except TelegramError as exc:
            log.log(
                _quietly(exc),
                "deletion not made for %d chats (deletion=%s…), tried again later: %s",
                len(deleting),
                deleting[0].id,
                exc,
            )
            results.update({d.id: self._not_deleted(d, exc, now) for d in deleting})
            private = [d for d in private if not d.message_ids]
        except Exception as exc:  # noqa: BLE001 - Redis down in the limiter: the rows go back
            results.update({d.id: exc for d in deleting})
            private = [d for d in private if not d.message_ids]
        notices = [d for d in private if d.notice_due and not d.late]
        results.update({d.id: Done(d.id, d.chat_id, "deleted") for d in private if not d.notice_due})
        results.update({d.id: self._notice_late(d) for d in private if d.notice_due and d.late})
        items = []
        for due in list(notices):
            try:
                items.append(
                    deleted_notice_item(
                        gateway=self.gateway,
                        chat_id=due.chat_id,
                        share_id=due.share_id,
                        text=self.conf.deleted_notice_text,
                        label=self.conf.again_button_text,
                        key=due.key,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - a bug building one notice: that row goes back
                results[due.id] = exc
                notices.remove(due)
        if notices:
            # Never raises: a notice that could not be sent (Redis down, the token refused) has the
            # exception, and its row goes back (deleted again next run, harmless, then told); a
            # notice that was sent is never sent again (one of unknown outcome only with its
            # random_id, which Telegram delivers once).
            answers = self.gateway.send_many(items)
            for due, answer in zip(notices, answers, strict=True):
                sent_or_refused = isinstance(answer, TelegramError) or not isinstance(answer, Exception)
                results[due.id] = self._noticed(due, answer, now) if sent_or_refused else answer
        return [results[d.id] for d in dues]

    def _noticed(self, due: Due, answer: Sent | TelegramError, now: datetime) -> Done:
        """A row whose messages are deleted, after its notice's answer. A notice Telegram did not
        send (FloodWait, an outage) is tried again later without deleting again; one whose outcome
        is unknown (a lost answer, -503, 500 INTERNAL) too, with the same random_id (`notice_from`
        starts its window; a later claim gives it up past TELEGRAM_RANDOM_ID_WINDOW); when no
        time is left for a try, it is given up (the files are gone; the notice would come days
        late). Telegram's refusal of a repeat (AlreadySent) means an earlier attempt told the user."""
        repeat = isinstance(answer, OutcomeUnknown) and answer.repeatable
        if isinstance(answer, (FloodWait, TransientError)) or repeat:
            if due.last_chance(now):
                log.warning("deleted notice given up deletion=%s chat=%s: %s", due.id, due.chat_id, answer)
                return Done(due.id, due.chat_id, "deleted", error=f"notice: {answer}")
            if not repeat:
                return Done(due.id, due.chat_id, "notice", error=f"notice: {answer}")
            log.warning("deleted notice of unknown outcome deletion=%s chat=%s, sent again: %s", due.id, due.chat_id, answer)
            return Done(due.id, due.chat_id, "notice", error=f"notice: {answer}", notice_from=due.notice_from or now)
        if isinstance(answer, AlreadySent):
            log.info("deleted notice delivered by an earlier attempt deletion=%s chat=%s", due.id, due.chat_id)
            return Done(due.id, due.chat_id, "deleted")
        if isinstance(answer, TelegramError):
            if unreachable := unreachable_state(exc=answer):  # the user blocked the bot or deleted their account
                return Done(due.id, due.chat_id, "skipped", unreachable=unreachable)
            # The messages are gone; a notice Telegram refused (or may have delivered) is not sent again.
            log.warning("deleted notice not sent deletion=%s chat=%s: %s", due.id, due.chat_id, answer)
        return Done(due.id, due.chat_id, "deleted")

    def _notice_late(self, due: Due) -> Done:
        """A row whose notice's outcome has been unknown since longer ago than Telegram is known to
        remember its random_id: it is not sent again (it may have arrived: at most once)."""
        log.warning(
            "deleted notice given up deletion=%s chat=%s: outcome unknown since %s, past TELEGRAM_RANDOM_ID_WINDOW",
            due.id, due.chat_id, due.notice_from,
        )  # fmt: skip
        return Done(due.id, due.chat_id, "deleted", error="notice: outcome unknown, past TELEGRAM_RANDOM_ID_WINDOW")

    def handback(self, due: Due, exc: Exception) -> Done:
        """Tried again later; a bug that struck while its notice was on its way (`maybe_delivered`,
        set by the gateway) starts its window of repeats as a lost answer does."""
        maybe = due.notice_due and getattr(exc, "maybe_delivered", False)
        notice_from = (due.notice_from or clock.now()) if maybe else None
        return Done(due.id, due.chat_id, "retry", error=f"handed back: {exc}", notice_from=notice_from)

    def record(self, results: list[Done]) -> tuple[int, int]:
        """Deleted rows go; rows to try again wait with back-off (`deletion_retry_at`), those whose
        messages are deleted without them (only the notice is left), and those whose notice's
        outcome became unknown keep when (`notice_from`, the earliest of the batch's: their window
        is never longer than Telegram's memory); expired rows stay. At most five statements, and
        the users found unreachable."""
        now = clock.now()
        ids: dict[str, list[int]] = {"deleted": [], "skipped": [], "retry": [], "notice": [], "expired": []}
        for r in results:
            ids[r.outcome].append(r.id)
        finished, again = ids["deleted"] + ids["skipped"], ids["retry"] + ids["notice"]
        if finished:
            ids_delete(PendingDeletion, finished)
        if ids["notice"]:
            ids_update(PendingDeletion, ids["notice"], message_ids=[])
        if unknown := [r for r in results if r.notice_from is not None and r.outcome in ("retry", "notice")]:
            PendingDeletion.objects.filter(id__in=[r.id for r in unknown], notice_from__isnull=True).update(
                notice_from=min(r.notice_from for r in unknown)
            )
        if again:
            PendingDeletion.objects.filter(id__in=again).update(
                status=ClaimStatus.PENDING,
                lease_until=None,
                attempts=F("attempts") + 1,
                delete_at=deletion_retry_at(now=now, attempts="attempts", sent_at="created_at"),
            )
        if ids["expired"]:
            ids_update(PendingDeletion, ids["expired"], status=ClaimStatus.EXPIRED, lease_until=None)
        users_mark_unreachable(by_telegram_id={r.chat_id: r.unreachable for r in results if r.unreachable})
        return len(finished), len(again) + len(ids["expired"])


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
