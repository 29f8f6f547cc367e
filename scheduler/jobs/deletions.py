"""The `delete_due_messages` job: the auto-delete sweep (`DeletionSweep`: claim, work, record) run
in the sweep loop, as a Celery task, a command and a dashboard row. The rules it follows are the
service's (botapp/services/autodelete.py, which tells the whole story: the row a delivery writes,
when a deletion not made is tried again, the "deleted" notice)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, OuterRef, Subquery

from botapp import clock
from botapp.db import ids_delete, ids_update
from botapp.metrics import sends_count
from botapp.models import BotSettings, ClaimStatus, PendingDeletion, TelegramUser
from botapp.services.autodelete import (
    deleted_notice_item,
    deleted_notice_send,
    deletion_last_try,
    deletion_retry_at,
    deletions_due_count,
)
from botapp.services.delivery import deliveries_cut_off_settle
from botapp.services.outgoing import send_key
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    AlreadySent,
    FloodWait,
    Gateway,
    OutcomeUnknown,
    Sent,
    TelegramError,
    TransientError,
)
from botapp.telegram.limits import DELETE_WINDOW
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE, sweep_outcome

log = logging.getLogger(__name__)


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
    batch in a constant number of statements (and counts its results for /metrics)."""

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
        # The row's columns but the access hash are Due's, in its order.
        return [Due(*r[:-1], late=r.notice_from is not None and r.notice_from < cutoff) for r in rows]

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
        sends_count("deletion", (r.outcome for r in results))  # for /metrics: a "retry" is a deletion not done yet
        return len(finished), len(again) + len(ids["expired"])


def delete_due_messages(*, gateway: Gateway, dry_run: bool = False, batch_size: int = 500, time_budget: float = 50.0) -> Outcome:
    if dry_run:
        return Outcome(deletions_due_count(now=clock.now()), detail="deletions due")
    outcome = sweep_outcome(DeletionSweep(gateway), batch_size=batch_size, time_budget=time_budget)
    # Then the deliveries runbot was killed in the middle of: their copies, found, are due by the
    # next run (after the sweep, so that a bug in this rare path never holds every deletion back).
    found, removed = deliveries_cut_off_settle(gateway=gateway)
    if found or removed:
        outcome.detail = f"{outcome.detail}; cut-off deliveries: {found} found, {removed} with nothing sent"
    return outcome


def deletion_due_next():
    """When the earliest pending deletion is due (the partial index `deletion_due`), for the wake-up."""
    pending = PendingDeletion.objects.filter(status=ClaimStatus.PENDING)
    return pending.order_by("delete_at").values_list("delete_at", flat=True).first()


job_register(
    Job(
        "delete_due_messages",
        delete_due_messages,
        {"minute": "*"},
        "Delete auto-delete messages that are due",
        needs_gateway=True,
        wakes_on="deletion",
        due_next=deletion_due_next,
    )
)
