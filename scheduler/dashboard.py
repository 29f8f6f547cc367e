"""What the console shows about background work: each job with its schedule (in words), last run,
next run, whether it missed a run (stale) and whether a "Run now" still waits for a worker; and
the home dashboard (dashboard_callback, django-unfold's DASHBOARD_CALLBACK)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import redis
from cron_descriptor import Options, get_description
from django.conf import settings
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from botapp import clock
from botapp.models import Broadcast, DailyStat, Referral, TelegramUser
from botapp.services.autodelete import deletions_expired_count
from botapp.services.growth_stats import growth_dashboard
from botapp.services.health import broker_problem, database_problem, processes_state, redis_problem
from botapp.services.outcomes import SequenceOutcome, sequences_outcome_since
from botapp.services.referrals import referrers_top
from botapp.services.stats import counters_flush
from botapp.services.stream_stats import stream_stats_24h
from botapp.services.users import user_counts
from scheduler.jobs.registry import JOBS, Job
from scheduler.models import JobRun

log = logging.getLogger(__name__)

# A job that missed its due time by this much is stale: for a job due every minute, one that has
# not run for three minutes.
STALE_GRACE = timedelta(minutes=2)


# --- "Run now" waits in the queue until a worker takes it: one Redis hash, a field per press ---
# The field is "<job name> <press>", the press being its task's id: each press is cleared by its
# own run, so a job pressed twice shows as queued until both runs start. A field of the job's name
# alone is a press an earlier release queued: any "Run now" run of the job clears it.


def _queued_key() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX') or 'courier'}:jobs-queued"


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None)


def job_queued_mark(*, name: str) -> str:
    """The operator queued `name` ("Run now"): shown as queued until a worker takes this press.
    Returns the press: the id its task is sent with (`job_queued_taken`)."""
    press = str(uuid.uuid4())
    try:
        _redis().hset(_queued_key(), f"{name} {press}", time.time())
    except redis.RedisError as exc:
        log.warning("could not mark job=%s queued: %s", name, exc)
    return press


def job_queued_taken(*, name: str, press: str) -> None:
    """A worker started the run of `press` (its task's id) of `name`: no longer waiting."""
    try:
        _redis().hdel(_queued_key(), f"{name} {press}", name)
    except redis.RedisError as exc:
        log.warning("could not clear job=%s queued: %s", name, exc)


def jobs_queued() -> dict[str, datetime]:
    """Jobs an operator queued that no worker has taken yet, with when the earliest press waiting
    was made."""
    try:
        queued = _redis().hgetall(_queued_key())
    except redis.RedisError:
        return {}
    since: dict[str, float] = {}
    for field, at in queued.items():
        name = field.decode().split(" ", 1)[0]
        since[name] = min(since.get(name, float("inf")), float(at))
    return {name: datetime.fromtimestamp(at, tz=UTC) for name, at in since.items()}


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
    due = (due + timedelta(microseconds=500_000)).replace(microsecond=0)  # two readings of the clock: 04:30:59.99 is 04:31
    return due if due < now - STALE_GRACE else None


# --- the home dashboard ---

CHART_DAYS = 30
# Chart.js options (unfold's defaults hide the value axis): axes with numbers, no animation.
CHART_OPTIONS = {
    "animation": False,
    "responsive": True,
    "maintainAspectRatio": False,
    "plugins": {"legend": {"display": False}},
    "scales": {"y": {"beginAtZero": True, "ticks": {"precision": 0}}, "x": {"grid": {"display": False}}},
}
# How long a finished broadcast (or scheduled message) stays on the dashboard with its result, and
# the window of the sequences' card (docs/operator-guide.md says so).
RECENT = timedelta(hours=24)
COLORS = {"new users": "#7c3aed", "deliveries": "#0ea5e9", "verifications": "#16a34a", "bypasses": "#f59e0b"}


def _series(days: list, values: dict, label: str) -> dict:
    return {
        "label": label,
        "data": [values.get(d, 0) for d in days],
        "borderColor": COLORS[label],
        "backgroundColor": COLORS[label],
        "tension": 0.3,
    }


def dashboard_charts() -> dict:
    """The last CHART_DAYS days (the operator's time zone), as Chart.js data for unfold's chart
    components: new users per day, and deliveries, verifications and bypasses per day."""
    today = clock.today()
    days = [today - timedelta(days=n) for n in range(CHART_DAYS - 1, -1, -1)]
    zone = timezone.get_current_timezone()
    joined = dict(
        TelegramUser.objects.filter(joined_at__gte=clock.today_start() - timedelta(days=CHART_DAYS - 1))
        .annotate(day=TruncDate("joined_at", tzinfo=zone))
        .values_list("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    stats = {s.date: s for s in DailyStat.objects.filter(date__gte=days[0])}
    labels = [d.strftime("%m-%d") for d in days]
    return {
        "users": {"labels": labels, "datasets": [_series(days, joined, "new users")]},
        "activity": {
            "labels": labels,
            "datasets": [
                _series(days, {d: s.deliveries for d, s in stats.items()}, "deliveries"),
                _series(days, {d: s.verifications for d, s in stats.items()}, "verifications"),
                _series(days, {d: s.bypasses for d, s in stats.items()}, "bypasses"),
            ],
        },
    }


def dashboard_health() -> list[dict]:
    """One line per thing that must run: the bot, workers, beat (heartbeats), Redis, the database
    and the task queue; each ok or not, with a sentence."""
    state = processes_state()
    lines = [
        {"name": "Bot (runbot)", "ok": state["bot"].ok, "text": state["bot"].summary},
        {"name": "Workers", "ok": state["worker"].ok, "text": state["worker"].summary},
        {"name": "Beat (schedules)", "ok": state["beat"].ok, "text": state["beat"].summary},
    ]
    for name, problem in (("Redis", redis_problem()), ("Database", database_problem()), ("Task queue", broker_problem())):
        lines.append({"name": name, "ok": not problem, "text": problem or "answering"})
    return lines


def _sequence_row(row: SequenceOutcome, since: datetime) -> dict:
    """A sequence's last RECENT for the dashboard: a bar by outcome, each count a link to those messages."""
    base = {"step__sequence__id__exact": row.sequence.pk}
    messages = reverse("admin:botapp_sequencemessage_changelist")
    segments = [
        ("sent", row.sent, "#16a34a", {"status__exact": "sent", "sent_at__gte": since.isoformat()}),
        ("failed", row.failed, "#dc2626", {"status__in": "failed,interrupted", "due_at__gte": since.isoformat()}),
        ("skipped", row.skipped, "#94a3b8", {"status__exact": "skipped", "due_at__gte": since.isoformat()}),
    ]
    return {
        "row": row,
        "page": reverse("admin:botapp_sequence_change", args=[row.sequence.pk]),
        "segments": [
            {
                "label": label,
                "n": n,
                "colour": colour,
                "width": f"{100 * n / row.total:.3f}",
                "url": f"{messages}?{urlencode({**base, **query})}",
            }
            for label, n, colour, query in segments
        ],
    }


def dashboard_callback(request, context: dict) -> dict:
    """The console's home page (django-unfold's DASHBOARD_CALLBACK): users, 30-day charts,
    broadcasts being sent, jobs that failed or missed their run, the health of every process, and
    deletions Telegram's 48 h window closed on (their messages are still in the chats)."""
    counters_flush()  # today's deliveries wait as counter entries until the next flush
    counts = user_counts()
    charts = dashboard_charts()
    sending = list(
        Broadcast.objects.filter(
            status__in=[Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.PAUSED]
        ).order_by("started_at")[:10]
    )
    since = clock.now() - RECENT
    finished = list(
        Broadcast.objects.filter(status__in=[Broadcast.Status.DONE, Broadcast.Status.CANCELLED], finished_at__gte=since).order_by(
            "-finished_at"
        )[:10]
    )
    rows = jobs_overview()
    context.update(
        {
            "users": counts,
            "chart_users": json.dumps(charts["users"]),
            "chart_activity": json.dumps(charts["activity"]),
            "chart_options": json.dumps(CHART_OPTIONS),
            "chart_options_legend": json.dumps(
                {**CHART_OPTIONS, "plugins": {"legend": {"display": True, "position": "top", "align": "end"}}}
            ),
            "sending": [
                {
                    "b": b,
                    "url": reverse("admin:botapp_broadcast_progress", args=[b.pk]),
                    "page": reverse("admin:botapp_broadcast_change", args=[b.pk]),
                }
                for b in sending
            ],
            "finished": [
                {
                    "b": b,
                    "url": reverse("admin:botapp_broadcast_progress", args=[b.pk]) + "?page=dashboard",
                    "page": reverse("admin:botapp_broadcast_change", args=[b.pk]),
                }
                for b in finished
            ],
            "recent_hours": int(RECENT.total_seconds() // 3600),
            "sequences": [_sequence_row(row, since) for row in sequences_outcome_since(since=since)],
            "job_problems": [r for r in rows if r.failing or r.stale],
            "jobs_never_run": [r.job.name for r in rows if r.last is None],
            "jobs_count": len(rows),
            "health": dashboard_health(),
            "expired": deletions_expired_count(),
            "streams": stream_stats_24h(),
            "growth": growth_dashboard(),
            "referrers": referrers_top(limit=5),
            "referrals_held": Referral.objects.filter(status=Referral.Status.HELD).count(),
        }
    )
    return context
