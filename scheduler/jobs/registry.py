"""Every background job: its code, its default schedule, and one way to run it that records a JobRun.

Celery tasks (scheduler/tasks.py), management commands and the sandbox all call `job_run`, so a
job behaves the same whoever starts it.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sentry_sdk
from celery.schedules import crontab
from django.db import DatabaseError
from django.utils import timezone

from botapp import clock
from botapp.metrics import JOB_RUN_SECONDS, JOB_RUNS
from scheduler import sender
from scheduler.models import JobRun

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    processed: int = 0
    failed: int = 0
    detail: str = ""
    # Its time budget ran out with work left: the Celery task runs the job again at once (a
    # 10M-user broadcast runs end to end, not in 50 s slices a minute apart; beat stays the net).
    more: bool = False

    def __str__(self) -> str:
        text = f"{self.processed} processed, {self.failed} failed"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass(frozen=True)
class Job:
    name: str  # also the management command and the Celery task suffix
    func: Callable[..., Outcome]  # func(*, gateway, dry_run) -> Outcome
    cron: dict[str, str]  # crontab fields, in TIME_ZONE: minute, hour, day_of_week, day_of_month, month_of_year
    summary: str
    needs_gateway: bool = False
    # Due work on time (scheduler/wakeup.py): `wakes_on` names the work botapp announces when it
    # writes a due row for this job (botapp.signals.work_scheduled); `due_next()` is the earliest due
    # time of the job's pending rows (or None), one query on the partial index its claim uses.
    wakes_on: str = ""
    due_next: Callable[[], datetime | None] | None = None

    @property
    def task_name(self) -> str:
        return f"scheduler.{self.name}"

    def crontab(self) -> crontab:
        return crontab(**self.cron)

    def cron_text(self) -> str:
        c = {"minute": "*", "hour": "*", "day_of_week": "*", "day_of_month": "*", "month_of_year": "*"} | self.cron
        return f"{c['minute']} {c['hour']} {c['day_of_month']} {c['month_of_year']} {c['day_of_week']}"


JOBS: dict[str, Job] = {}
Lingering = Callable[[Job, Outcome, Callable[[], Outcome]], Outcome]


def job_register(job: Job) -> Job:
    JOBS[job.name] = job
    return job


def job_run(name: str, *, trigger: str, gateway=None, dry_run: bool = False, linger: Lingering | None = None, **scope) -> Outcome:
    """Run a job now and record the run (dry runs are not recorded). Re-raises the job's error
    after recording it, so Celery and commands report failure. `scope`: arguments a job takes to
    do part of its work (the admin's "Back up now" names its files). `linger` (a wake-up's
    `wakeup_linger`, scheduler/wakeup.py): `linger(job, outcome, run_again)` may run the job
    again while its next due row is a moment away, in the same recorded run."""
    job = JOBS[name]
    if dry_run:
        return job.func(gateway=gateway, dry_run=True, **scope)  # dry runs only count rows: no Telegram needed
    run = JobRun.objects.create(job=name, trigger=trigger)
    with sentry_sdk.new_scope() as report:  # an error report names the job and its run (a no-op without SENTRY_DSN)
        report.set_tag("job", name)
        report.set_context("job run", {"job": name, "run": run.pk, "trigger": trigger})
        return _job_run(job, run, gateway=gateway, scope=scope, linger=linger)


def _job_run(job: Job, run: JobRun, *, gateway, scope: dict, linger: Lingering | None = None) -> Outcome:
    """The run, timed and counted for /metrics by its result."""
    started, result = time.monotonic(), "failed"
    try:
        outcome = _job_work(job, run, gateway=gateway, scope=scope, linger=linger)
        result = "ok"
        return outcome
    finally:
        JOB_RUN_SECONDS.labels(job.name).observe(time.monotonic() - started)
        JOB_RUNS.labels(job.name, result).inc()


def _job_work(job: Job, run: JobRun, *, gateway, scope: dict, linger: Lingering | None = None) -> Outcome:
    name = job.name
    try:
        if job.needs_gateway and gateway is None:
            gateway = sender.worker_gateway()
        outcome = job.func(gateway=gateway, dry_run=False, **scope)
        if linger is not None and job.due_next is not None:
            outcome = linger(job, outcome, lambda: job.func(gateway=gateway, dry_run=False, **scope))
    except Exception as exc:
        # Logged first: the bookkeeping needs the database, which may be what failed. With the
        # exception: an error report is made of it (once: the same exception reaching Celery's
        # handler is recognised as reported).
        log.error("job failed job=%s run=%s: %s: %s", name, run.pk, type(exc).__name__, exc, exc_info=exc)
        try:
            JobRun.objects.filter(pk=run.pk).update(
                status=JobRun.Status.FAILED,
                finished_at=clock.now(),
                error=f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}"[:10000],
            )
        except DatabaseError:
            log.exception(
                "job run not recorded job=%s run=%s: the reaper marks it failed after the hard time limit", name, run.pk
            )
        raise
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.OK,
        finished_at=clock.now(),
        processed=outcome.processed,
        failed=outcome.failed,
        detail=outcome.detail[:255],
    )
    log.info("job done job=%s run=%s %s", name, run.pk, outcome)
    return outcome


def cron_matches(c: crontab, moment: datetime) -> bool:
    """Whether crontab `c` fires at `moment` (a minute, in the operator's time zone)."""
    local = timezone.localtime(moment)
    return (
        local.minute in c.minute
        and local.hour in c.hour
        and local.day in c.day_of_month
        and local.month in c.month_of_year
        and local.isoweekday() % 7 in c.day_of_week
    )


def job_fires_between(job: Job, start: datetime, end: datetime, *, limit: int) -> int:
    """How many times `job`'s schedule fires in (start, end], counted up to `limit`."""
    c = job.crontab()
    moment = (start + timedelta(minutes=1)).replace(second=0, microsecond=0)
    fires = 0
    while moment <= end and fires < limit:
        fires += cron_matches(c, moment)
        moment += timedelta(minutes=1)
    return fires


def jobs_due_between(start: datetime, end: datetime) -> list[Job]:
    """Jobs whose schedule fires at least once in (start, end], in registry order."""
    first_minute = (start + timedelta(minutes=1)).replace(second=0, microsecond=0)
    due = []
    for job in JOBS.values():
        c = job.crontab()
        moment = first_minute
        while moment <= end:
            if cron_matches(c, moment):
                due.append(job)
                break
            moment += timedelta(minutes=1)
    return due
