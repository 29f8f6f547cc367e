"""Keeping per-user rows from growing without end: every broadcast adds a row per active user, every
new user a row per sequence step, every tracked button a row per user who taps it.

`prune_deliveries` deletes them DELIVERY_RETENTION_DAYS (30) after they are settled:

- deliveries of broadcasts that are done or cancelled (scheduled one-off messages are broadcasts),
  counted from the broadcast's end. The broadcast keeps its counters (total, sent, failed, blocked),
  which are what the admin shows, so its list row reads the same afterwards. A sent message whose
  lifetime deletion is still pending keeps its row until it is deleted (the deleter needs its
  message id), and a send caught mid-call keeps it until the reaper settles it (a row `sending`, or
  any row of a broadcast a dead sender's claim still holds).
- sequence messages that are sent, skipped, failed or interrupted, counted from when they were sent
  (or, when never sent, from when they were due).
- button clicks not repeated for that long, except a click that a conditional step still pending
  for that user looks at: pruning it would flip that step's condition.

Rows go in chunks (`chunk_size` per DELETE, each statement its own transaction), found by walking an
index onwards from where the previous chunk ended, so a million-user broadcast never holds one long
transaction and no chunk rescans what earlier ones deleted or kept. A run stops between chunks when
its time budget is spent; the next run carries on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from time import monotonic

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet

from botapp import clock
from botapp.models import Broadcast, BroadcastClaim, BroadcastDelivery, ButtonClick, SequenceMessage, SequenceStep
from scheduler.jobs.registry import Job, Outcome, job_register

CHUNK = 10_000
FINISHED = (Broadcast.Status.DONE, Broadcast.Status.CANCELLED)
Delivery = BroadcastDelivery.Status
Message = SequenceMessage.Status
SETTLED = (Message.SENT, Message.SKIPPED, Message.FAILED, Message.INTERRUPTED)
UNSETTLED = (Message.PENDING, Message.SENDING)
LABELS = {"deliveries": "broadcast deliveries", "messages": "sequence messages", "clicks": "button clicks"}


def broadcasts_finished(cutoff: datetime) -> QuerySet:
    """Broadcasts that ended (done or cancelled) before `cutoff`, none of whose rows a sender's
    claim holds (a broadcast cancelled mid-send, its dead sender's claim not yet reaped)."""
    claimed = BroadcastClaim.objects.filter(broadcast=OuterRef("pk"))
    return Broadcast.objects.filter(status__in=FINISHED, finished_at__lt=cutoff).exclude(Exists(claimed))


def deliveries_prunable() -> QuerySet:
    """Delivery rows that no job needs any more (of a finished broadcast: filter by broadcast)."""
    return BroadcastDelivery.objects.exclude(status=Delivery.SENDING).exclude(status=Delivery.SENT, delete_at__isnull=False)


def messages_prunable(cutoff: datetime) -> QuerySet:
    """Sequence messages settled before `cutoff` (sent_at is set only for sent ones, and never
    precedes due_at)."""
    return SequenceMessage.objects.filter(status__in=SETTLED, due_at__lt=cutoff).filter(
        Q(sent_at__isnull=True) | Q(sent_at__lt=cutoff)
    )


def clicks_prunable(cutoff: datetime) -> QuerySet:
    """Clicks not repeated since `cutoff` that no pending conditional step of their user looks at."""
    needed = SequenceMessage.objects.filter(
        user_id=OuterRef("user_id"), status__in=UNSETTLED, step__condition_button=OuterRef("button")
    ).exclude(step__condition=SequenceStep.Condition.ALWAYS)
    return ButtonClick.objects.filter(last_clicked_at__lt=cutoff).exclude(Exists(needed))


@dataclass
class Pruner:
    deadline: float
    chunk_size: int
    deleted: Counter = field(default_factory=Counter)

    def out_of_time(self) -> bool:
        return monotonic() >= self.deadline

    def prune(self, rows: QuerySet, *, key: str, label: str) -> bool:
        """Delete every row of `rows`, `chunk_size` at a time, walking the indexed, unique `key`
        upwards from where the previous chunk ended. Returns False when the budget ran out first."""
        after = None
        while not self.out_of_time():
            page = rows if after is None else rows.filter(**{f"{key}__gt": after})
            found = list(page.order_by(key).values_list("pk", key)[: self.chunk_size])
            if not found:
                return True
            # The DELETE checks the conditions again: a row that changed since (a click repeated,
            # a row claimed) stays.
            n, _ = rows.filter(pk__in=[pk for pk, _ in found]).delete()
            self.deleted[label] += n
            if len(found) < self.chunk_size:
                return True
            after = found[-1][1]
        return False

    def run(self, cutoff: datetime) -> bool:
        # A broadcast's rows sit together in its (broadcast, user) unique index: walk them by user.
        for broadcast_id in (
            broadcasts_finished(cutoff)
            .filter(Exists(deliveries_prunable().filter(broadcast=OuterRef("pk"))))
            .order_by("finished_at", "pk")
            .values_list("pk", flat=True)
        ):
            if not self.prune(deliveries_prunable().filter(broadcast_id=broadcast_id), key="user_id", label="deliveries"):
                return False
        # Rows are created (and so numbered) about in the order they become due: walk the primary key.
        return self.prune(messages_prunable(cutoff), key="pk", label="messages") and self.prune(
            clicks_prunable(cutoff), key="pk", label="clicks"
        )


def _counts(counts: Counter) -> str:
    return ", ".join(f"{counts[name]} {label}" for name, label in LABELS.items())


def prune_deliveries(*, gateway=None, dry_run: bool = False, chunk_size: int = CHUNK, time_budget: float = 240.0) -> Outcome:
    """Delete per-user rows settled more than DELIVERY_RETENTION_DAYS ago (see the module's text)."""
    days = settings.DELIVERY_RETENTION_DAYS
    cutoff = clock.now() - timedelta(days=days)
    if dry_run:
        counts = Counter(
            deliveries=deliveries_prunable().filter(broadcast__in=broadcasts_finished(cutoff)).count(),
            messages=messages_prunable(cutoff).count(),
            clicks=clicks_prunable(cutoff).count(),
        )
        return Outcome(counts.total(), detail=f"would delete {_counts(counts)} older than {days} days")
    # The budget stays well under CELERY_TASK_SOFT_TIME_LIMIT (300 s): a run ends between chunks,
    # never killed in the middle of one.
    pruner = Pruner(deadline=monotonic() + time_budget, chunk_size=chunk_size)
    finished = pruner.run(cutoff)
    detail = f"deleted {_counts(pruner.deleted)} older than {days} days"
    if not finished:
        detail += "; time budget spent, the next run continues"
    return Outcome(pruner.deleted.total(), detail=detail)


job_register(
    Job(
        "prune_deliveries",
        prune_deliveries,
        {"minute": "45", "hour": "3"},
        "Delete old broadcast deliveries, sequence messages and button clicks",
    )
)
