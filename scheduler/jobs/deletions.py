"""The message deleter: deletes auto-delete messages when due, then sends the "deleted" notice
with a button to get the files again. Deletions are at-least-once: a claim whose worker died is
handed back by the reaper, and deleting twice is harmless. The notice is at most once: a row the
reaper handed back is deleted again without one (the dead worker may have sent it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.db.models import F, OuterRef, Subquery

from botapp import clock
from botapp.models import BotSettings, ClaimStatus, PendingDeletion, TelegramUser
from botapp.services.delivery import deleted_notice_send
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.telegram.gateway import FloodWait, Gateway, TelegramError, TransientError
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import sweep_outcome

log = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)
MAX_ATTEMPTS = 5
RETRY_AFTER = timedelta(minutes=1)


@dataclass
class Due:
    id: int
    chat_id: int
    message_ids: list[int]
    share_id: str
    notice_due: bool = True


@dataclass
class Done:
    id: int
    chat_id: int
    outcome: str  # deleted | skipped | retry | failed
    unreachable: str = ""  # a TelegramUser.State when the user blocked the bot or is gone
    error: str = ""


@dataclass
class DeletionSweep:
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
                .values_list("id", "chat_id", "message_ids", "share_id", "notice_due", "access_hash")[:n]
            )
            if rows:
                PendingDeletion.objects.filter(id__in=[r[0] for r in rows]).update(
                    status=ClaimStatus.CLAIMED, lease_until=now + LEASE
                )
        self.gateway.peers_remember({r[1]: r[5] for r in rows})
        return [Due(*r[:5]) for r in rows]

    def work(self, due: Due) -> Done:
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

    def handback(self, due: Due, exc: Exception) -> Done:
        return Done(due.id, due.chat_id, "retry", error=f"handed back: {exc}")

    def record(self, results: list[Done]) -> tuple[int, int]:
        finished = [r.id for r in results if r.outcome != "retry"]
        retry = [r.id for r in results if r.outcome == "retry"]
        if finished:
            PendingDeletion.objects.filter(id__in=finished).delete()
        if retry:
            now = clock.now()
            PendingDeletion.objects.filter(id__in=retry, attempts__lt=MAX_ATTEMPTS - 1).update(
                status=ClaimStatus.PENDING, lease_until=None, delete_at=now + RETRY_AFTER, attempts=F("attempts") + 1
            )
            PendingDeletion.objects.filter(id__in=retry, status=ClaimStatus.CLAIMED).delete()  # out of attempts
        users_mark_unreachable(by_telegram_id={r.chat_id: r.unreachable for r in results if r.unreachable})
        return sum(r.outcome in ("deleted", "skipped") for r in results), sum(r.outcome in ("failed", "retry") for r in results)


def delete_due_messages(*, gateway: Gateway, dry_run: bool = False, batch_size: int = 500, time_budget: float = 50.0) -> Outcome:
    if dry_run:
        due = PendingDeletion.objects.filter(status=ClaimStatus.PENDING, delete_at__lte=clock.now()).count()
        return Outcome(due, detail="deletions due")
    return sweep_outcome(DeletionSweep(gateway), batch_size=batch_size, time_budget=time_budget)


job_register(
    Job(
        "delete_due_messages",
        delete_due_messages,
        {"minute": "*"},
        "Delete auto-delete messages that are due",
        needs_gateway=True,
    )
)
