"""The work waiting in the database, as /metrics shows it at each scrape: per queue, the rows due
now and how late the oldest of them is. Each query walks the partial index of its claim, but the
broadcasts' deliveries: those are read off the broadcasts' counters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Min, Sum

from botapp.models import Broadcast, ClaimStatus, PendingDeletion, SequenceMessage


@dataclass(frozen=True)
class Backlog:
    queue: str  # deletions | sequence_messages | broadcast_deliveries | scheduled_broadcasts
    rows: int  # due now and not done
    late_seconds: float  # how long the oldest of them has been due (0: none)


def backlog_read(*, now: datetime) -> list[Backlog]:
    """Every queue of due work, in a fixed order; a queue with nothing due has 0 rows, 0 s."""
    found = []
    for queue, rows, oldest in (
        ("deletions", *_due(PendingDeletion.objects.filter(status=ClaimStatus.PENDING), "delete_at", now)),
        ("sequence_messages", *_due(SequenceMessage.objects.filter(status=SequenceMessage.Status.PENDING), "due_at", now)),
        ("broadcast_deliveries", *deliveries_left()),
        ("scheduled_broadcasts", *_due(Broadcast.objects.filter(status=Broadcast.Status.SCHEDULED), "scheduled_at", now)),
    ):
        found.append(Backlog(queue, rows, max(0.0, (now - oldest).total_seconds()) if oldest else 0.0))
    return found


def _due(rows, field: str, now: datetime) -> tuple[int, datetime | None]:
    got = rows.filter(**{f"{field}__lte": now}).aggregate(n=Count("id"), oldest=Min(field))
    return got["n"], got["oldest"]


def deliveries_left() -> tuple[int, datetime | None]:
    """Deliveries of broadcasts being sent that are not settled yet (pending or in flight), due
    since their broadcast started. Read off each broadcast's counters (its rows made, less those
    recorded), one row per broadcast: counting the pending rows walked an index entry per
    recipient at every scrape."""
    active = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)
    settled = F("sent") + F("failed") + F("blocked") + F("skipped") + F("interrupted") + F("not_users")
    left = Broadcast.objects.filter(status__in=active).annotate(left=F("total") - settled).filter(left__gt=0)
    got = left.aggregate(n=Sum("left"), oldest=Min("started_at"))
    return got["n"] or 0, got["oldest"]
