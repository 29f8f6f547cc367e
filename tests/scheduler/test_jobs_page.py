"""The jobs page as an operator reads it: which processes are running (heartbeats), which jobs
missed their run, "Run now" queued until a worker takes it and only for those allowed to, the
schedule in words, and run history without the empty runs."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from botapp import clock
from botapp.services.health import heartbeat_forget, heartbeat_record, processes_state
from scheduler import receivers
from scheduler.dashboard import schedule_words
from tests.factories import JobRunFactory

pytestmark = pytest.mark.django_db
JOBS_URL = "admin:scheduler_backgroundjob_changelist"


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def test_schedules_read_as_words():
    assert schedule_words(minute="*") == "every minute"
    assert schedule_words(minute="*/5") == "every 5 minutes"
    assert schedule_words(minute="0", hour="0,12") == "daily at 00:00 and 12:00"
    assert schedule_words(minute="0", hour="4", day_of_week="1") == "at 04:00, only on Monday"


def test_a_worker_shows_running_while_it_beats_and_not_running_once_it_stops(operator, settings):
    settings.HEARTBEAT_SECONDS = 1
    url = reverse(JOBS_URL)
    assert "No worker is running" in operator.get(url).content.decode()

    heartbeat_record(process="worker", name="celery@a")
    page = operator.get(url).content.decode()
    assert "No worker is running" not in page and "1 running" in page

    heartbeat_forget(process="worker", name="celery@a")  # a clean shutdown
    assert "No worker is running" in operator.get(url).content.decode()


def test_a_killed_worker_goes_stale_after_three_heartbeats(settings):
    settings.HEARTBEAT_SECONDS = 0.2
    heartbeat_record(process="worker", name="celery@b")
    assert processes_state()["worker"].ok
    time.sleep(0.7)  # no beat for more than three intervals: as after kill -9
    state = processes_state()["worker"]
    assert not state.ok and state.summary.startswith("not running: last heartbeat")


def test_celery_signals_start_and_stop_the_worker_heartbeat(settings):
    settings.HEARTBEAT_SECONDS = 0.1

    class Consumer:
        hostname = "celery@signals"

    receivers.worker_heartbeat_start(sender=Consumer())
    deadline = time.monotonic() + 5
    while not processes_state()["worker"].ok and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_state()["worker"].alive[0][0] == "celery@signals"
    receivers.worker_heartbeat_stop()
    assert processes_state()["worker"].alive == []


def test_a_job_due_every_minute_is_stale_after_three_minutes_without_a_run(operator):
    last = clock.now().replace(second=10, microsecond=0) - timedelta(minutes=2)
    JobRunFactory(job="flush_counters", started_at=last, finished_at=last + timedelta(seconds=1))
    rows = {r.job.name: r for r in operator.get(reverse(JOBS_URL)).context["rows"]}
    assert not rows["flush_counters"].stale

    clock.clock_advance(timedelta(minutes=2))  # now 4 minutes since it last ran
    response = operator.get(reverse(JOBS_URL))
    rows = {r.job.name: r for r in response.context["rows"]}
    assert rows["flush_counters"].stale
    assert rows["flush_counters"].missed == last.replace(second=0) + timedelta(minutes=1)  # the minute after its last run
    assert "missed its run due" in response.content.decode()


def test_run_now_shows_queued_until_a_worker_takes_it(operator, monkeypatch):
    from scheduler.tasks import TASKS

    sent = []
    monkeypatch.setattr(TASKS["reset_token_counts"], "apply_async", lambda **kw: sent.append(kw))  # no broker
    url = reverse(JOBS_URL)
    operator.post(url, {"job": "reset_token_counts"})
    rows = {r.job.name: r for r in operator.get(url).context["rows"]}
    assert rows["reset_token_counts"].queued_at is not None

    TASKS["reset_token_counts"].apply(kwargs=sent[0]["kwargs"], task_id=sent[0]["task_id"])  # as a worker takes it
    rows = {r.job.name: r for r in operator.get(url).context["rows"]}
    assert rows["reset_token_counts"].queued_at is None and rows["reset_token_counts"].last.trigger == "admin"


def test_run_now_pressed_twice_shows_queued_until_both_are_taken(operator, monkeypatch):
    from scheduler.tasks import TASKS

    sent = []
    monkeypatch.setattr(TASKS["reset_token_counts"], "apply_async", lambda **kw: sent.append(kw))  # no broker
    url = reverse(JOBS_URL)
    operator.post(url, {"job": "reset_token_counts"})
    first = operator.get(url).context["rows"]
    operator.post(url, {"job": "reset_token_counts"})
    TASKS["reset_token_counts"].apply(kwargs=sent[0]["kwargs"], task_id=sent[0]["task_id"])  # the first taken
    response = operator.get(url)
    rows = {r.job.name: r for r in response.context["rows"]}
    assert rows["reset_token_counts"].queued_at is not None and response.context["waiting"]
    assert rows["reset_token_counts"].queued_at >= {r.job.name: r for r in first}["reset_token_counts"].queued_at
    TASKS["reset_token_counts"].apply(kwargs=sent[1]["kwargs"], task_id=sent[1]["task_id"])
    rows = {r.job.name: r for r in operator.get(url).context["rows"]}
    assert rows["reset_token_counts"].queued_at is None


def test_a_press_queued_before_presses_had_their_own_is_cleared_by_its_run(operator):
    from scheduler.dashboard import _queued_key, _redis
    from scheduler.tasks import TASKS

    _redis().hset(_queued_key(), "reset_token_counts", 1_800_000_000)  # as an earlier release marked it
    assert {r.job.name: r for r in operator.get(reverse(JOBS_URL)).context["rows"]}["reset_token_counts"].queued_at
    TASKS["reset_token_counts"].apply(kwargs={"trigger": "admin"})  # its message, sent by that release
    assert not {r.job.name: r for r in operator.get(reverse(JOBS_URL)).context["rows"]}["reset_token_counts"].queued_at


def test_run_now_taken_by_a_worker_before_the_page_answers_is_not_left_queued(operator, monkeypatch):
    """A worker can take the task before apply_async returns (a busy web process, an idle worker):
    the page then shows its run, not "queued" for good, and stops asking for updates."""
    from scheduler.tasks import TASKS

    task = TASKS["reset_token_counts"]
    monkeypatch.setattr(
        task, "apply_async", lambda kwargs, task_id, **_: task.apply(kwargs=kwargs, task_id=task_id)
    )  # taken at once
    url = reverse(JOBS_URL)
    operator.post(url, {"job": "reset_token_counts"})
    response = operator.get(url)
    rows = {r.job.name: r for r in response.context["rows"]}
    assert rows["reset_token_counts"].queued_at is None and rows["reset_token_counts"].last.trigger == "admin"
    assert response.context["waiting"] is False


def test_run_now_needs_the_run_permission(client, django_user_model, plain_http):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_jobrun"))
    client.force_login(viewer)
    url = reverse(JOBS_URL)
    page = client.get(url).content.decode()
    assert "cleanup_tokens" in page and "Run now" not in page
    refused = client.post(url, {"job": "cleanup_tokens"})
    assert refused.status_code == 403
    body = refused.content.decode()  # the console's frame, why, and who can change it
    assert "Your account may not do this" in body
    assert "Running a job needs the permission “Can run a background job now”." in body
    assert "an owner (a superuser) gives them on the Operators page" in body and reverse("admin:index") in body

    viewer.user_permissions.add(Permission.objects.get(codename="run_backgroundjob"))
    client.force_login(django_user_model.objects.get(pk=viewer.pk))
    assert "Run now" in client.get(url).content.decode()


def test_job_runs_hide_empty_runs_unless_asked(operator):
    JobRunFactory(job="flush_counters", processed=0, detail="nothing-done")
    JobRunFactory(job="cleanup_tokens", processed=3, detail="some-work")
    JobRunFactory(job="delete_due_messages", status="failed", processed=0, detail="broke-down")
    url = reverse("admin:scheduler_jobrun_changelist")
    page = operator.get(url).content.decode()
    assert "some-work" in page and "broke-down" in page and "nothing-done" not in page
    assert "nothing-done" in operator.get(url, {"runs": "all"}).content.decode()


def test_a_schedule_naming_no_courier_task_is_refused(operator):
    from django_celery_beat.models import PeriodicTask

    from scheduler.schedules import schedules_install

    schedules_install()
    task = PeriodicTask.objects.get(task="scheduler.send_broadcasts")
    url = reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])
    form = operator.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, (list, dict))}
    data |= {"regtask": "", "task": "scheduler.nope", "crontab": task.crontab_id, "enabled": "on", "args": "[]", "kwargs": "{}"}
    response = operator.post(url, data)
    assert response.status_code == 200
    error = response.context["adminform"].form.errors["task"][0]
    assert error.startswith("scheduler.nope is not a Courier job's task; the tasks are: ")
    assert PeriodicTask.objects.get(pk=task.pk).task == "scheduler.send_broadcasts"
    saved = operator.post(url, data | {"task": "scheduler.send_broadcasts", "description": "edited"})
    assert saved.status_code == 302 and PeriodicTask.objects.get(pk=task.pk).description == "edited"
