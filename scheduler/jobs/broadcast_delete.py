"""The broadcast deleter: removes broadcast messages from every chat once their lifetime is over
(Broadcast.delete_after_minutes). Sweeps BroadcastDelivery rows like the message deleter does."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from django.db import transaction

from botapp import clock
from botapp.models import BroadcastDelivery
from botapp.telegram.gateway import DELETE_CHUNK, FloodWait, Gateway, TelegramError, TransientError
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import sweep_outcome

log = logging.getLogger(__name__)

Status = BroadcastDelivery.Status
RETRY_AFTER = timedelta(minutes=10)


class Due(NamedTuple):
    """A sent broadcast message whose lifetime is over."""

    id: int  # the delivery's
    chat_id: int
    message_id: int


class Deleted(NamedTuple):
    id: int  # the delivery's
    outcome: str  # deleted | retry | failed


@dataclass
class BroadcastDeletionSweep:
    gateway: Gateway

    def claim(self, n: int) -> list[Due]:
        now = clock.now()
        with transaction.atomic():
            rows = list(
                BroadcastDelivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=Status.SENT, delete_at__isnull=False, delete_at__lte=now)
                .order_by("delete_at")
                .values_list("id", "chat_id", "message_id", "user__access_hash", named=True)[:n]
            )
            # Pushing delete_at forward is the lease: a dead sweeper's rows come due again later.
            if rows:
                BroadcastDelivery.objects.filter(id__in=[r.id for r in rows]).update(delete_at=now + RETRY_AFTER)
        self.gateway.peers_remember({r.chat_id: r.user__access_hash for r in rows})
        return [Due(r.id, r.chat_id, r.message_id) for r in rows]

    def work(self, row: Due) -> Deleted:
        try:
            self.gateway.delete_messages(row.chat_id, [row.message_id])
        except (FloodWait, TransientError) as exc:
            log.info("broadcast delete retry delivery=%s: %s", row.id, exc)
            return Deleted(row.id, "retry")
        except TelegramError as exc:
            log.warning("broadcast delete failed delivery=%s chat=%s: %s", row.id, row.chat_id, exc)
            return Deleted(row.id, "failed")
        return Deleted(row.id, "deleted")

    group = DELETE_CHUNK  # rows per work_many: one messages.deleteMessages for all their chats

    def work_many(self, rows: list[Due]) -> list[Deleted]:
        """The rows' messages deleted together (`delete_private`: one call per DELETE_CHUNK)."""
        try:
            self.gateway.delete_private([(row.chat_id, [row.message_id]) for row in rows])
        except (FloodWait, TransientError) as exc:
            log.info("broadcast delete retry of %d deliveries: %s", len(rows), exc)
            return [Deleted(row.id, "retry") for row in rows]
        except TelegramError as exc:
            log.warning("broadcast delete failed for %d deliveries (delivery=%s…): %s", len(rows), rows[0].id, exc)
            return [Deleted(row.id, "failed") for row in rows]
        return [Deleted(row.id, "deleted") for row in rows]

    def handback(self, row: Due, exc: Exception) -> Deleted:
        return Deleted(row.id, "retry")

    def record(self, results: list[Deleted]) -> tuple[int, int]:
        deleted = [i for i, outcome in results if outcome == "deleted"]
        failed = [i for i, outcome in results if outcome == "failed"]
        if deleted:
            BroadcastDelivery.objects.filter(id__in=deleted).update(status=Status.DELETED, delete_at=None)
        if failed:  # Telegram refused for good (too old, chat gone): stop trying, keep it visible
            BroadcastDelivery.objects.filter(id__in=failed).update(delete_at=None, error="could not delete")
        return sum(o == "deleted" for _, o in results), sum(o != "deleted" for _, o in results)


def delete_expired_broadcasts(
    *, gateway: Gateway, dry_run: bool = False, batch_size: int = 500, time_budget: float = 240.0
) -> Outcome:
    # The budget stays well under CELERY_TASK_SOFT_TIME_LIMIT (300 s): a run ends between batches,
    # never killed in the middle of one.
    if dry_run:
        due = BroadcastDelivery.objects.filter(status=Status.SENT, delete_at__lte=clock.now()).count()
        return Outcome(due, detail="broadcast messages due for deletion")
    return sweep_outcome(BroadcastDeletionSweep(gateway), batch_size=batch_size, time_budget=time_budget)


job_register(
    Job(
        "delete_expired_broadcasts",
        delete_expired_broadcasts,
        {"minute": "0"},
        "Delete broadcast messages past their lifetime",
        needs_gateway=True,
    )
)
