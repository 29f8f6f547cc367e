"""Scheduler statistics: what is waiting, what went out in the last 24 hours, and how each job's
last run went. One service for the HTTP API (`/api/v1/scheduler/stats/`) and the admin's
*Background jobs* page.

- pending: the durable rows still to do, by kind: scheduled broadcasts and messages not started
  yet, broadcast deliveries not settled yet (read off the broadcasts' counters: rows made less rows
  recorded, in flight included), sequence messages and auto-deletions not due or not done;
- earliest_due / latest_due: the range of their due times (a started broadcast's deliveries are
  due since it started);
- sent_24h: messages that reached a user in the last 24 h (broadcast deliveries, scheduled
  messages, sequence steps), by their sent time;
- failed_24h: what the job runs that started in the last 24 h reported as failed (rows a send or
  deletion could not do, including FloodWait hand-backs tried again later), and failed_runs_24h
  the runs that failed as a whole;
- jobs: per job, its last run (when, status, processed, failed, detail, the first line of an error).

A fixed number of queries, each served by an index (partial ones for the pending rows).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Q, Sum

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, ClaimStatus, PendingDeletion, SequenceMessage
from botapp.services.backlog import deliveries_left
from scheduler.jobs.registry import JOBS
from scheduler.models import JobRun

DAY = timedelta(hours=24)
ACTIVE = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)


@dataclass(frozen=True)
class JobLastRun:
    job: str
    summary: str
    last_run_at: datetime | None
    status: str  # ok | failed | running | "" (never ran)
    processed: int = 0
    failed: int = 0
    detail: str = ""
    error: str = ""  # the first line of the last run's error


@dataclass(frozen=True)
class SchedulerStats:
    pending: int
    pending_by_kind: dict[str, int]
    earliest_due: datetime | None
    latest_due: datetime | None
    sent_24h: int
    failed_24h: int
    failed_runs_24h: int
    jobs: list[JobLastRun] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def scheduler_stats() -> SchedulerStats:
    """The figures above, read now."""
    now = clock.now()
    since = now - DAY
    scheduled = Broadcast.objects.filter(status=Broadcast.Status.SCHEDULED).aggregate(
        n=Count("id"), first=Min("scheduled_at"), last=Max("scheduled_at")
    )
    active = Broadcast.objects.filter(status__in=ACTIVE).aggregate(first=Min("started_at"), last=Max("started_at"))
    deliveries, _ = deliveries_left()  # off the broadcasts' counters, not a count of their rows
    steps = SequenceMessage.objects.filter(status=SequenceMessage.Status.PENDING).aggregate(
        n=Count("id"), first=Min("due_at"), last=Max("due_at")
    )
    deletions = PendingDeletion.objects.filter(status=ClaimStatus.PENDING).aggregate(
        n=Count("id"), first=Min("delete_at"), last=Max("delete_at")
    )
    by_kind = {
        "scheduled_broadcasts": scheduled["n"],
        "broadcast_deliveries": deliveries,
        "sequence_messages": steps["n"],
        "deletions": deletions["n"],
    }
    firsts = [scheduled["first"], steps["first"], deletions["first"], active["first"] if deliveries else None]
    lasts = [scheduled["last"], steps["last"], deletions["last"], active["last"] if deliveries else None]
    sent = (
        BroadcastDelivery.objects.filter(sent_at__gte=since).count() + SequenceMessage.objects.filter(sent_at__gte=since).count()
    )
    runs = JobRun.objects.filter(started_at__gte=since).aggregate(
        failed=Sum("failed"), failed_runs=Count("id", filter=Q(status=JobRun.Status.FAILED))
    )
    return SchedulerStats(
        pending=sum(by_kind.values()),
        pending_by_kind=by_kind,
        earliest_due=min((d for d in firsts if d is not None), default=None),
        latest_due=max((d for d in lasts if d is not None), default=None),
        sent_24h=sent,
        failed_24h=runs["failed"] or 0,
        failed_runs_24h=runs["failed_runs"],
        jobs=_last_runs(),
    )


def _last_runs() -> list[JobLastRun]:
    """Each registered job's latest run: one query (DISTINCT ON, through the (job, -started_at) index)."""
    runs = JobRun.objects.filter(job__in=list(JOBS))
    latest = {r.job: r for r in runs.order_by("job", "-started_at").distinct("job")}
    rows = []
    for name, job in JOBS.items():
        run = latest.get(name)
        if run is None:
            rows.append(JobLastRun(name, job.summary, None, ""))
            continue
        rows.append(
            JobLastRun(
                name,
                job.summary,
                run.started_at,
                run.status,
                run.processed,
                run.failed,
                run.detail,
                run.error.splitlines()[0] if run.error else "",
            )
        )
    return rows
