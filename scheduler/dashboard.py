"""What the console shows about background work: each job with its schedule (in words), last run,
next run, whether it missed a run (stale) and whether a "Run now" still waits for a worker; and
the home dashboard (dashboard_callback, django-unfold's DASHBOARD_CALLBACK)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis
from cron_descriptor import Options, get_description
from django.conf import settings
from django.utils import timezone

from botapp import clock
from scheduler.jobs.registry import JOBS, Job
from scheduler.models import JobRun

log = logging.getLogger(__name__)

# A job that missed its due time by this much is stale: for a job due every minute, one that has
# not run for three minutes.
STALE_GRACE = timedelta(minutes=2)


# --- "Run now" waits in the queue until a worker takes it: one Redis hash, field = job name ---


def _queued_key() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX') or 'courier'}:jobs-queued"


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None)


def job_queued_mark(*, name: str) -> None:
    """The operator queued `name` ("Run now"): shown as queued until a worker takes it."""
    try:
        _redis().hset(_queued_key(), name, time.time())
    except redis.RedisError as exc:
        log.warning("could not mark job=%s queued: %s", name, exc)


def job_queued_taken(*, name: str) -> None:
    """A worker started `name`: it is no longer waiting."""
    try:
        _redis().hdel(_queued_key(), name)
    except redis.RedisError as exc:
        log.warning("could not clear job=%s queued: %s", name, exc)


def jobs_queued() -> dict[str, datetime]:
    """Jobs an operator queued that no worker has taken yet, with when they were queued."""
    try:
        queued = _redis().hgetall(_queued_key())
    except redis.RedisError:
        return {}
    return {k.decode(): datetime.fromtimestamp(float(v), tz=UTC) for k, v in queued.items()}


# --- the jobs page ---


def schedule_words(*, minute="*", hour="*", day_of_month="*", month_of_year="*", day_of_week="*") -> str:
    """A crontab in words: "every minute", "every 5 minutes", "daily at 00:00 and 12:00"."""
    options = Options()
    options.use_24hour_time_format = True
    text = get_description(f"{minute} {hour} {day_of_month} {month_of_year} {day_of_week}", options)
    text = text[0].lower() + text[1:]
    every_day = (day_of_month, month_of_year, day_of_week) == ("*", "*", "*")
    if every_day and text.startswith("at ") and "past the hour" not in text:
        return "daily " + text
    return text


@dataclass
class JobRow:
    job: Job
    task: object | None  # django_celery_beat PeriodicTask
    last: JobRun | None
    last_ok: JobRun | None
    next_run: datetime | None
    missed: datetime | None = None  # the due time it has not run for (stale), if any
    queued_at: datetime | None = None  # "Run now" waiting for a worker since

    @property
    def failing(self) -> bool:
        return self.last is not None and self.last.status == JobRun.Status.FAILED

    @property
    def stale(self) -> bool:
        return self.missed is not None

    @property
    def schedule_text(self) -> str:
        """The schedule in force, in words (the operator may have edited the default)."""
        if self.task is None:
            return ""
        if self.task.crontab_id:
            c = self.task.crontab
            words = schedule_words(
                minute=c.minute,
                hour=c.hour,
                day_of_month=c.day_of_month,
                month_of_year=c.month_of_year,
                day_of_week=c.day_of_week,
            )
            return f"{words} ({c.timezone})"
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
    queued = jobs_queued()
    rows = []
    for job in JOBS.values():
        last = JobRun.objects.filter(job=job.name).first()
        last_ok = (
            last
            if last and last.status == JobRun.Status.OK
            else JobRun.objects.filter(job=job.name, status=JobRun.Status.OK).first()
        )
        task = tasks.get(job.task_name)
        rows.append(JobRow(job, task, last, last_ok, _next_run(task), _missed(task, last), queued.get(job.name)))
    return rows


def _schedule(task):
    schedule = task.schedule
    zone = getattr(task.crontab, "timezone", None) if task.crontab_id else None
    schedule.nowfun = lambda: timezone.localtime(clock.now(), zone) if zone else clock.now()  # the one clock
    return schedule


def _next_run(task) -> datetime | None:
    if task is None or not task.enabled:
        return None
    now = clock.now()
    last = task.last_run_at or now
    if timezone.is_naive(last):
        last = timezone.make_aware(last, UTC)
    moment = now + _schedule(task).remaining_estimate(last)
    # The estimate is computed against a second reading of the clock: round off the microseconds.
    return (moment + timedelta(microseconds=500_000)).replace(microsecond=0)


def _missed(task, last: JobRun | None) -> datetime | None:
    """The due time an enabled job has not run for, once it is STALE_GRACE late (None: on time).
    A job that never ran counts from when its schedule was last changed."""
    if task is None or not task.enabled:
        return None
    since = last.started_at if last else task.date_changed
    if since is None:
        return None
    now = clock.now()
    due = now + _schedule(task).remaining_estimate(since)
    return due if due < now - STALE_GRACE else None
