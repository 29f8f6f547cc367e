"""Each job's effect, its command, its Celery task, the default schedule and the dashboard."""

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import OperationalError, connection
from django.urls import reverse
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from botapp import clock
from botapp.models import BroadcastDelivery, ClaimStatus, DailyTokenCount, VerificationToken
from scheduler.jobs.registry import JOBS, job_run, jobs_due_between
from scheduler.models import JobRun
from scheduler.schedules import schedules_install
from tests.factories import (
    BroadcastDeliveryFactory,
    BroadcastFactory,
    DailyTokenCountFactory,
    JobRunFactory,
    PendingDeletionFactory,
    TelegramUserFactory,
    VerificationTokenFactory,
    met_user,
)

pytestmark = pytest.mark.django_db


def token(user, status, expired_for):
    return VerificationTokenFactory(user=user, status=status, expires_at=clock.now() - expired_for)


def test_cleanup_tokens_keeps_unused_ones_for_the_retention(settings):
    settings.TOKEN_RETENTION_DAYS = 7
    user = TelegramUserFactory()
    used_expired = [token(user, "verified", timedelta(minutes=1)), token(user, "bypassed", timedelta(days=1))]
    used_valid = token(user, "verified", timedelta(minutes=-30))
    unused_recent = token(user, "pending", timedelta(days=6))
    unused_old = token(user, "pending", timedelta(days=8))

    outcome = job_run("cleanup_tokens", trigger="test")

    assert outcome.processed == 3
    left = set(VerificationToken.objects.values_list("id", flat=True))
    assert left == {used_valid.id, unused_recent.id}
    assert not {t.id for t in used_expired} & left and unused_old.id not in left


def test_reset_token_counts_deletes_earlier_days_only():
    user = TelegramUserFactory()
    today = clock.today()
    DailyTokenCountFactory(user=user, date=today, count=3)
    DailyTokenCountFactory(user=user, date=today - timedelta(days=1), count=5)

    assert job_run("reset_token_counts", trigger="test").processed == 1
    assert list(DailyTokenCount.objects.values_list("date", "count")) == [(today, 3)]


def test_reaper_requeues_deletions_and_sends_within_the_random_id_window(settings):
    now = clock.now()
    stale = PendingDeletionFactory(status=ClaimStatus.CLAIMED, lease_until=now - timedelta(seconds=1))
    live = PendingDeletionFactory(status=ClaimStatus.CLAIMED, lease_until=now + timedelta(minutes=1))
    sending = BroadcastDeliveryFactory(status="sending", lease_until=now - timedelta(seconds=1))
    window = timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
    # claimed (lease_until - 5 min) more than the window ago: Telegram may have forgotten its random_id
    forgotten = BroadcastDeliveryFactory(status="sending", lease_until=now - window + timedelta(minutes=5) - timedelta(seconds=1))

    assert job_run("reap_expired_claims", trigger="test").processed == 3
    for row in (stale, live, sending, forgotten):
        row.refresh_from_db()
    assert (stale.status, live.status, sending.status, forgotten.status) == ("pending", "claimed", "pending", "interrupted")
    assert sending.retry_from == now - timedelta(seconds=1) - timedelta(minutes=5)  # when it was claimed


def test_broadcast_deleter(telegram, gateway):
    broadcast = BroadcastFactory(delete_after_minutes=60)
    rows = []
    for minutes in [-5, 30]:
        user = met_user(telegram)
        sent = gateway.send_text(user.telegram_id, "hi")
        rows.append(
            BroadcastDeliveryFactory(
                broadcast=broadcast,
                user=user,
                status="sent",
                message_id=sent.message_id,
                sent_at=clock.now() + timedelta(minutes=minutes - 60),  # the broadcast's lifetime is 60 minutes
                delete_at=clock.now() + timedelta(minutes=minutes),
            )
        )

    assert job_run("delete_expired_broadcasts", trigger="test", gateway=gateway).processed == 1
    due, later = (BroadcastDelivery.objects.get(pk=r.pk) for r in rows)
    assert due.status == "deleted" and telegram.message(due.chat_id, due.message_id).deleted
    assert later.status == "sent" and not telegram.message(later.chat_id, later.message_id).deleted


# --- commands ---------------------------------------------------------------------------------------


def test_commands_say_what_they_did():
    out = StringIO()
    call_command("reset_token_counts", stdout=out)
    assert out.getvalue().strip() == "reset_token_counts: 0 processed, 0 failed (deleted 0 counters of earlier days)"
    assert JobRun.objects.get().trigger == "command"


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_job_has_a_command_with_a_dry_run(name):
    out = StringIO()
    call_command(name, "--dry-run", stdout=out)
    assert out.getvalue().startswith(f"{name}: dry run: ")


def test_command_dry_run_changes_nothing():
    DailyTokenCountFactory(date=clock.today() - timedelta(days=2))
    out = StringIO()
    call_command("reset_token_counts", "--dry-run", stdout=out)
    assert "dry run: 1 processed" in out.getvalue()
    assert DailyTokenCount.objects.count() == 1


def test_a_failing_command_exits_non_zero_with_one_line(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setitem(
        JOBS, "cleanup_tokens", JOBS["cleanup_tokens"].__class__(**{**JOBS["cleanup_tokens"].__dict__, "func": broken})
    )
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("cleanup_tokens", stderr=err)
    assert exited.value.code == 1
    assert err.getvalue().strip() == "cleanup_tokens: failed: RuntimeError: disk full"
    run = JobRun.objects.get()
    assert run.status == "failed" and run.error.startswith("RuntimeError: disk full")


@pytest.mark.django_db(transaction=True)  # the job ends its own database connection
def test_a_job_that_loses_the_database_is_logged_as_failed_and_raises_its_own_error(monkeypatch, caplog):
    def lose_database(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # as an outage or a failover would

    monkeypatch.setitem(
        JOBS, "cleanup_tokens", JOBS["cleanup_tokens"].__class__(**{**JOBS["cleanup_tokens"].__dict__, "func": lose_database})
    )
    try:
        with caplog.at_level(logging.ERROR, logger="scheduler.jobs.registry"), pytest.raises(OperationalError):
            job_run("cleanup_tokens", trigger="test")
    finally:
        connection.close()  # the next query connects afresh
    messages = [r.getMessage() for r in caplog.records if r.name == "scheduler.jobs.registry"]
    assert messages[0].startswith("job failed job=cleanup_tokens run=") and "OperationalError" in messages[0]
    assert messages[1].startswith("job run not recorded job=cleanup_tokens")
    assert JobRun.objects.get().status == "running"  # for the reaper to settle


def test_telegram_jobs_without_credentials_exit_2_naming_them(settings):
    settings.BOT_TOKEN = ""
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("delete_due_messages", stderr=err)
    assert exited.value.code == 2
    assert "BOT_TOKEN is not set" in err.getvalue()
    assert JobRun.objects.get().status == "failed"


# --- schedules ------------------------------------------------------------------------------------


def test_migrate_installed_the_default_schedule_once():
    tasks = {t.task: t for t in PeriodicTask.objects.all()}
    assert set(tasks) == {f"scheduler.{name}" for name in JOBS}
    c = tasks["scheduler.cleanup_tokens"].crontab
    assert (c.minute, c.hour) == ("0", "0,12")
    assert (
        tasks["scheduler.delete_due_messages"].crontab.minute,
        tasks["scheduler.delete_expired_broadcasts"].crontab.minute,
    ) == ("*", "0")

    assert schedules_install() == []  # idempotent
    assert PeriodicTask.objects.count() == len(JOBS)


def test_operator_edits_survive_migrate():
    task = PeriodicTask.objects.get(task="scheduler.cleanup_tokens")
    task.crontab = CrontabSchedule.objects.create(minute="30", hour="3")
    task.enabled = False
    task.save()

    call_command("migrate", verbosity=0)

    task.refresh_from_db()
    assert (task.crontab.minute, task.crontab.hour, task.enabled) == ("30", "3", False)
    assert PeriodicTask.objects.filter(task="scheduler.cleanup_tokens").count() == 1


def test_crontabs_fire_in_the_operator_time_zone(settings):
    settings.TIME_ZONE = "Asia/Kolkata"  # UTC+05:30
    from django.utils import timezone

    timezone.activate("Asia/Kolkata")
    try:
        from datetime import datetime

        utc = datetime(
            2026, 1, 1, 18, 29, tzinfo=timezone.UTC if hasattr(timezone, "UTC") else __import__("datetime").timezone.utc
        )
        due = {j.name for j in jobs_due_between(utc, utc + timedelta(minutes=2))}  # 23:59 -> 00:01 in Kolkata
    finally:
        timezone.deactivate()
    assert {"reset_token_counts", "cleanup_tokens"} <= due


# --- tasks and the dashboard --------------------------------------------------------------------------


def test_celery_tasks_run_the_jobs():
    from scheduler.tasks import TASKS

    assert set(TASKS) == set(JOBS)
    assert TASKS["reset_token_counts"].name == "scheduler.reset_token_counts"
    assert TASKS["reset_token_counts"].apply(kwargs={"trigger": "beat"}).get().startswith("0 processed")
    assert JobRun.objects.get().trigger == "beat"


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def test_dashboard_lists_jobs_with_last_and_next_run_and_flags_failures(operator):
    JobRunFactory(job="cleanup_tokens", processed=4)
    JobRunFactory(job="delete_due_messages", status="failed", error="ConfigError: BOT_TOKEN is not set\n\ntrace")

    response = operator.get(reverse("admin:scheduler_backgroundjob_changelist"))

    assert response.status_code == 200
    html = response.content.decode()
    for name in JOBS:
        assert name in html
    assert "1 job failed on the last run." in html
    assert 'class="failing"' in html and "ConfigError: BOT_TOKEN is not set" in html
    assert "4 processed" in html
    rows = {r.job.name: r for r in response.context["rows"]}
    assert rows["delete_due_messages"].failing and not rows["cleanup_tokens"].failing
    assert rows["delete_due_messages"].next_run - clock.now() <= timedelta(minutes=1)
    assert rows["cleanup_tokens"].schedule_text.startswith("daily at 00:00 and 12:00")
    assert rows["delete_expired_broadcasts"].next_run.minute == 0  # on the hour, not 59:59.9


def test_run_now_queues_the_task(operator, monkeypatch):
    from scheduler.tasks import TASKS

    queued = []
    monkeypatch.setattr(TASKS["cleanup_tokens"], "apply_async", lambda **kw: queued.append(kw))
    url = reverse("admin:scheduler_backgroundjob_changelist")
    response = operator.post(url, {"job": "cleanup_tokens"})
    assert response.status_code == 302
    assert queued == [{"kwargs": {"trigger": "admin"}, "task_id": queued[0]["task_id"], "retry": False}]
    assert len(queued[0]["task_id"]) == 36  # a task id of its own: the press its run clears
    page = operator.get(url).content.decode()
    assert "Queued cleanup_tokens, but no worker is running: it runs when one starts." in page
    assert "since" in page and "waiting for a worker" in page


def test_run_now_with_the_broker_down_says_so(operator, settings):
    from config.celery import app

    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens there
    app._pool = app.amqp._producer_pool = None  # so the next publish connects there
    try:
        url = reverse("admin:scheduler_backgroundjob_changelist")
        operator.post(url, {"job": "cleanup_tokens"})
        page = operator.get(url).content.decode()
        assert "cleanup_tokens was not queued: the task queue (the Celery broker) is unreachable." in page
        assert "waiting for a worker" not in page
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app._pool = app.amqp._producer_pool = None  # and the pools built against the dead broker


def test_old_job_runs_are_pruned_but_each_jobs_latest_stays(settings):
    settings.JOB_RUN_RETENTION_DAYS = 30
    old = clock.now() - timedelta(days=40)
    JobRunFactory(job="cleanup_tokens", started_at=old - timedelta(days=1))
    kept_latest = JobRunFactory(job="cleanup_tokens", started_at=old)  # its latest, however old
    pruned = JobRunFactory.create_batch(3, job="delete_due_messages", started_at=old)
    recent = JobRunFactory(job="delete_due_messages", started_at=clock.now() - timedelta(days=1))

    assert job_run("prune_job_runs", trigger="test").processed == 4
    left = set(JobRun.objects.exclude(job="prune_job_runs").values_list("pk", flat=True))
    assert left == {kept_latest.pk, recent.pk}
    assert not {p.pk for p in pruned} & left


def test_every_sweep_budget_ends_before_celery_would_kill_the_task(settings):
    import inspect

    for job in JOBS.values():
        budget = inspect.signature(job.func).parameters.get("time_budget")
        if budget is not None:
            # a batch may still be running when the budget runs out: leave a minute for it
            assert budget.default + 60 <= settings.CELERY_TASK_SOFT_TIME_LIMIT, job.name


def test_job_names_never_change_whatever_their_modules_are_called():
    # Periodic tasks in the database (and operators' crontabs) name these jobs; the registry order
    # is the jobs page's.
    assert [(name, job.func.__module__) for name, job in JOBS.items()] == [
        ("send_broadcasts", "scheduler.jobs.broadcast_send"),
        ("prepare_broadcasts", "scheduler.jobs.broadcast_send"),
        ("delete_expired_broadcasts", "scheduler.jobs.broadcast_delete"),
        ("reap_expired_claims", "scheduler.jobs.claims"),
        ("flush_counters", "scheduler.jobs.counters"),
        ("delete_due_messages", "scheduler.jobs.deletions"),
        ("prune_job_runs", "scheduler.jobs.housekeeping"),
        ("prune_handled_updates", "scheduler.jobs.housekeeping"),
        ("end_premium_plans", "scheduler.jobs.premium_expiry"),
        ("prune_deliveries", "scheduler.jobs.retention"),
        ("send_sequence_messages", "scheduler.jobs.sequence_send"),
        ("cleanup_tokens", "scheduler.jobs.tokens"),
        ("reset_token_counts", "scheduler.jobs.tokens"),
        ("backfill_backups", "scheduler.jobs.backups"),
        ("send_notices", "scheduler.jobs.notices"),
    ]
