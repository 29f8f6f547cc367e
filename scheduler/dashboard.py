"""What the jobs dashboard shows: each job with its schedule, last run and next run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from botapp import clock
from scheduler.jobs.registry import JOBS, Job
from scheduler.models import JobRun


@dataclass
class JobRow:
    job: Job
    task: object | None  # django_celery_beat PeriodicTask
    last: JobRun | None
    last_ok: JobRun | None
    next_run: datetime | None

    @property
    def failing(self) -> bool:
        return self.last is not None and self.last.status == JobRun.Status.FAILED

    @property
    def schedule_text(self) -> str:
        """The schedule in force: the operator may have edited the default."""
        if self.task is None:
            return ""
        if self.task.crontab_id:
            c = self.task.crontab
            return f"{c.minute} {c.hour} {c.day_of_month} {c.month_of_year} {c.day_of_week} ({c.timezone})"
        return str(self.task.interval or self.task.clocked or self.task.solar or "")

    @property
    def error_line(self) -> str:
        return self.last.error.splitlines()[0] if self.failing and self.last.error else ""


def jobs_overview() -> list[JobRow]:
    from django_celery_beat.models import PeriodicTask

    tasks = {
        t.task: t
        for t in PeriodicTask.objects.select_related("crontab", "interval").filter(task__in=[j.task_name for j in JOBS.values()])
    }
    rows = []
    for job in JOBS.values():
        last = JobRun.objects.filter(job=job.name).first()
        last_ok = (
            last
            if last and last.status == JobRun.Status.OK
            else JobRun.objects.filter(job=job.name, status=JobRun.Status.OK).first()
        )
        task = tasks.get(job.task_name)
        rows.append(JobRow(job, task, last, last_ok, _next_run(task)))
    return rows


def _next_run(task) -> datetime | None:
    if task is None or not task.enabled:
        return None
    now = clock.now()
    schedule = task.schedule
    zone = getattr(task.crontab, "timezone", None) if task.crontab_id else None
    schedule.nowfun = lambda: timezone.localtime(clock.now(), zone) if zone else clock.now()  # the one clock
    last = task.last_run_at or now
    if timezone.is_naive(last):
        last = timezone.make_aware(last, timezone.utc)
    moment = now + schedule.remaining_estimate(last)
    # The estimate is computed against a second reading of the clock: round off the microseconds.
    return (moment + timedelta(microseconds=500_000)).replace(microsecond=0)


def dashboard_callback(request, context: dict) -> dict:
    """The console's home page (django-unfold's DASHBOARD_CALLBACK)."""
    return context
