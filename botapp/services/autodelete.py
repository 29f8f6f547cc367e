"""Auto-delete, the whole story: a delivery schedules its messages' deletion (`deletion_schedule`,
the one durable row a delivery writes), the `delete_due_messages` sweep deletes them when due
(`DeletionSweep`: claim, work, record), and the user is told with the "deleted" notice
(`deleted_notice_send`: *Get files again* and *Close*).

Deletions are at-least-once: a claim whose worker died is handed back by the reaper, and deleting
twice is harmless. The notice is at most once: a row the reaper handed back is deleted again
without one (the dead worker may have sent it). Messages Telegram will no longer delete (older than 48 h, already gone, bot blocked) are
logged and their row removed, never retried forever; a FloodWait or an outage hands the row back
for a later run, MAX_ATTEMPTS times at most.

The scheduler only wires `DeletionSweep` into its sweep loop and job registry
(scheduler/jobs/deletions.py): botapp never imports scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, OuterRef, Subquery

from botapp import clock
from botapp.db import ids_delete, ids_update
from botapp.models import BotSettings, ClaimStatus, PendingDeletion, TelegramUser
from botapp.services.files import deep_link
from botapp.services.texts import human_span
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.signals import work_scheduled_announce
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    Button,
    FloodWait,
    Gateway,
    SendItem,
    Sent,
    TelegramError,
    TransientError,
)
from botapp.telegram.limits import DELETE_WINDOW

log = logging.getLogger(__name__)

WILL_DELETE = "⏳ These files will be deleted in {minutes}. Save them somewhere else if you want to keep them."

LEASE = timedelta(minutes=5)  # a claimed row whose sweeper is silent this long goes back (the reaper)
MAX_ATTEMPTS = 5
RETRY_AFTER = timedelta(minutes=1)


# --- when a file is delivered --------------------------------------------------------------------


def deletion_warning(*, minutes: int) -> str:
    """The line a delivery adds to tell the user when the files will be deleted."""
    return WILL_DELETE.format(minutes=human_span(delta=timedelta(minutes=minutes)))


def deletion_schedule(*, chat_id: int, message_ids: Sequence[int], share_id: str, minutes: int, now: datetime) -> PendingDeletion:
    """Record that these messages are to be deleted `minutes` after `now`: one INSERT, its own
    transaction, so the deletion survives any restart (and the sweep is woken for it: no query).
    `share_id` makes the notice's *Get files
    again* button (empty: no button)."""
    row = PendingDeletion.objects.create(
        chat_id=chat_id, message_ids=list(message_ids), delete_at=now + timedelta(minutes=minutes), share_id=share_id
    )
    work_scheduled_announce(work="deletion", due_at=row.delete_at)
    return row


def deletions_due_count(*, now: datetime) -> int:
    """How many deletions a sweep would take now (the job's dry run)."""
    return PendingDeletion.objects.filter(status=ClaimStatus.PENDING, delete_at__lte=now).count()


# --- when they are due ---------------------------------------------------------------------------


@dataclass(slots=True)
class Due:
    id: int
    chat_id: int
    message_ids: list[int]
    share_id: str
    notice_due: bool = True
    created_at: datetime | None = None  # when the messages were sent (the row is made just before)

    def past_window(self, now: datetime) -> bool:
        """Telegram no longer lets the bot delete these messages (DELETE_WINDOW after sending)."""
        return self.created_at is not None and now - self.created_at >= DELETE_WINDOW


PAST_WINDOW = "past Telegram's 48 h window: the messages stay in the chat, and no notice says they were deleted"


UNRECORDED = (
    "the delivery was cut off before its message ids were written (runbot stopped mid-delivery): its copies cannot be deleted"
)


@dataclass(slots=True)
class Done:
    id: int
    chat_id: int
    outcome: str  # deleted | skipped | retry | failed
    unreachable: str = ""  # a TelegramUser.State when the user blocked the bot or is gone
    error: str = ""


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
                .values_list("id", "chat_id", "message_ids", "share_id", "notice_due", "created_at", "access_hash", named=True)[
                    :n
                ]
            )
            if rows:
                ids_update(PendingDeletion, [r.id for r in rows], status=ClaimStatus.CLAIMED, lease_until=now + LEASE)
        self.gateway.peers_remember({r.chat_id: r.access_hash for r in rows})
        return [Due(r.id, r.chat_id, r.message_ids, r.share_id, r.notice_due, r.created_at) for r in rows]

    def _late(self, due: Due) -> Done:
        """A row whose messages Telegram will not delete any more: nothing is deleted and no
        notice claims it was (the sweep ran too late: workers down, or a backlog)."""
        log.warning("deletion=%s chat=%s messages=%s %s", due.id, due.chat_id, due.message_ids, PAST_WINDOW)
        return Done(due.id, due.chat_id, "failed", error=PAST_WINDOW)

    def _unrecorded(self, due: Due) -> Done:
        """A delivery cut off between Telegram's answer and writing its message ids (runbot killed
        in between): its copies cannot be found to delete. Said loudly; no notice claims they were."""
        log.warning("deletion=%s chat=%s: %s", due.id, due.chat_id, UNRECORDED)
        return Done(due.id, due.chat_id, "failed", error=UNRECORDED)

    def work(self, due: Due) -> Done:
        if not due.message_ids:
            return self._unrecorded(due)
        if due.past_window(clock.now()):
            return self._late(due)
        try:
            deleted = self.gateway.delete_messages(due.chat_id, due.message_ids)
        except (FloodWait, TransientError) as exc:
            return Done(due.id, due.chat_id, "retry", error=str(exc))
        except TelegramError as exc:
            log.warning("deletion failed deletion=%s chat=%s: %s", due.id, due.chat_id, exc)
            return Done(due.id, due.chat_id, "failed", error=str(exc))
        if deleted < len(due.message_ids):
            # Older than 48 h, already deleted by the user, or the chat is gone: nothing more to do.
            log.info("deletion=%s chat=%s: Telegram deleted %s of %s", due.id, due.chat_id, deleted, len(due.message_ids))
        if not due.notice_due:
            return Done(due.id, due.chat_id, "deleted" if deleted else "skipped")
        try:
            deleted_notice_send(
                gateway=self.gateway, chat_id=due.chat_id, share_id=due.share_id, text=self.conf.deleted_notice_text
            )
        except (FloodWait, TransientError) as exc:
            # Telegram sent nothing: the next run deletes again (nothing left: harmless) and tells the user then.
            return Done(due.id, due.chat_id, "retry", error=f"notice: {exc}")
        except TelegramError as exc:
            if unreachable := unreachable_state(exc=exc):  # the user blocked the bot or deleted their account
                return Done(due.id, due.chat_id, "skipped", unreachable=unreachable)
            # The messages are gone; a notice Telegram refused (or may have delivered) is not sent again.
            log.warning("deleted notice not sent deletion=%s chat=%s: %s", due.id, due.chat_id, exc)
        return Done(due.id, due.chat_id, "deleted" if deleted else "skipped")

    group = DELETE_CHUNK  # rows per work_many: one messages.deleteMessages for all their private chats

    def work_many(self, dues: Sequence[Due]) -> list[Done | Exception]:
        """What `work` does, for many rows at once: the messages of every private chat deleted
        together (`delete_private`: one call per DELETE_CHUNK ids), then the notices sent together
        (`send_many`: a container per window of the limiter). Channels and groups go row by row.
        A row's exception is its entry (handed back)."""
        results: dict[int, Done | Exception] = {}
        now = clock.now()
        results.update({d.id: self._unrecorded(d) for d in dues if not d.message_ids})
        late = [d for d in dues if d.past_window(now) and d.id not in results]
        results.update({d.id: self._late(d) for d in late})
        private = [d for d in dues if d.chat_id > 0 and d.id not in results]
        for due in dues:
            if due.chat_id <= 0 and due.id not in results:
                try:
                    results[due.id] = self.work(due)
                except Exception as exc:  # noqa: BLE001 - that row goes back
                    results[due.id] = exc
        try:
            self.gateway.delete_private([(d.chat_id, d.message_ids) for d in private])
        except (FloodWait, TransientError) as exc:
            results.update({d.id: Done(d.id, d.chat_id, "retry", error=str(exc)) for d in private})
            private = []
        except TelegramError as exc:
            log.warning("deletion failed for %d chats (deletion=%s…): %s", len(private), private[0].id, exc)
            results.update({d.id: Done(d.id, d.chat_id, "failed", error=str(exc)) for d in private})
            private = []
        except Exception as exc:  # noqa: BLE001 - Redis down in the limiter: the rows go back
            results.update({d.id: exc for d in private})
            private = []
        notices = [d for d in private if d.notice_due]
        results.update({d.id: Done(d.id, d.chat_id, "deleted") for d in private if not d.notice_due})
        items = []
        for due in list(notices):
            try:
                items.append(
                    deleted_notice_item(
                        gateway=self.gateway, chat_id=due.chat_id, share_id=due.share_id, text=self.conf.deleted_notice_text
                    )
                )
            except Exception as exc:  # noqa: BLE001 - a bug building one notice: that row goes back
                results[due.id] = exc
                notices.remove(due)
        if notices:
            # Never raises: a notice that could not be sent (Redis down, the token refused) has the
            # exception, and its row goes back (deleted again next run, harmless, then told); a
            # notice that was sent is never sent again.
            answers = self.gateway.send_many(items)
            for due, answer in zip(notices, answers, strict=True):
                sent_or_refused = isinstance(answer, TelegramError) or not isinstance(answer, Exception)
                results[due.id] = self._noticed(due, answer) if sent_or_refused else answer
        return [results[d.id] for d in dues]

    def _noticed(self, due: Due, answer: Sent | TelegramError) -> Done:
        """A row whose messages are deleted, after its notice's answer (as in `work`)."""
        if isinstance(answer, (FloodWait, TransientError)):
            return Done(due.id, due.chat_id, "retry", error=f"notice: {answer}")
        if isinstance(answer, TelegramError):
            if unreachable := unreachable_state(exc=answer):
                return Done(due.id, due.chat_id, "skipped", unreachable=unreachable)
            log.warning("deleted notice not sent deletion=%s chat=%s: %s", due.id, due.chat_id, answer)
        return Done(due.id, due.chat_id, "deleted")

    def handback(self, due: Due, exc: Exception) -> Done:
        return Done(due.id, due.chat_id, "retry", error=f"handed back: {exc}")

    def record(self, results: list[Done]) -> tuple[int, int]:
        finished = [r.id for r in results if r.outcome != "retry"]
        retry = [r.id for r in results if r.outcome == "retry"]
        if finished:
            ids_delete(PendingDeletion, finished)
        if retry:
            now = clock.now()
            PendingDeletion.objects.filter(id__in=retry, attempts__lt=MAX_ATTEMPTS - 1).update(
                status=ClaimStatus.PENDING, lease_until=None, delete_at=now + RETRY_AFTER, attempts=F("attempts") + 1
            )
            PendingDeletion.objects.filter(id__in=retry, status=ClaimStatus.CLAIMED).delete()  # out of attempts
        users_mark_unreachable(by_telegram_id={r.chat_id: r.unreachable for r in results if r.unreachable})
        return sum(r.outcome in ("deleted", "skipped") for r in results), sum(r.outcome in ("failed", "retry") for r in results)


# --- and then ------------------------------------------------------------------------------------


def deleted_notice_send(*, gateway: Gateway, chat_id: int, share_id: str, text: str) -> Sent:
    """After an auto-delete: say so, with *Get files again* (the same deep link; none without a
    share id) and *Close*. Telegram's refusal is raised to the caller."""
    item = deleted_notice_item(gateway=gateway, chat_id=chat_id, share_id=share_id, text=text)
    return gateway.send_text(chat_id, item.text, buttons=item.buttons)


def deleted_notice_item(*, gateway: Gateway, chat_id: int, share_id: str, text: str) -> SendItem:
    """The "deleted" notice as one send of a batch."""
    buttons = [[Button("❌ Close", callback_data="close")]]
    if share_id:
        again = Button("♻️ Get files again", url=deep_link(bot_username=gateway.bot_username, payload=share_id))
        buttons = [[again, buttons[0][0]]]
    return SendItem(chat_id, text, buttons=buttons)
