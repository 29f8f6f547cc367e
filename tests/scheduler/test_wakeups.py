"""Due work on time: writing a due row arms one wake-up of its job at the row's due time (a
Celery task with a countdown, on the real Redis broker); the woken run sends it and arms for the
next; beat's minute run stays the safety net and, idle, costs no extra query."""

import base64
import json
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import SequenceMessage, TelegramUser
from botapp.services.autodelete import deletion_schedule
from botapp.services.broadcasts import broadcast_start
from botapp.services.messages import message_schedule
from botapp.services.premium import premium_grant
from botapp.services.sequences import sequences_enroll
from scheduler import wakeup
from scheduler.jobs.registry import JOBS, job_run
from scheduler.models import JobRun
from scheduler.tasks import TASKS
from tests.factories import BroadcastFactory, SequenceFactory, met_user

pytestmark = pytest.mark.django_db(transaction=True)  # rows committed: on_commit arms, pool threads read them


@pytest.fixture
def broker():
    """The Celery broker's default queue (the test Redis): what was published to it, oldest first,
    as (task name, kwargs, seconds from now to its ETA). Emptied before and after."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("celery")

    def queued():
        found = []
        for raw in reversed(client.lrange("celery", 0, -1)):  # kombu LPUSHes: the oldest is last
            message = json.loads(raw)
            _, kwargs, _ = json.loads(base64.b64decode(message["body"]))
            eta = clock.now().fromisoformat(message["headers"]["eta"]) if message["headers"].get("eta") else None
            # The ETA is on the real clock; the test's clock runs ahead of it by a fixed offset.
            ahead = None if eta is None else (eta - (clock.now() - clock._offset)).total_seconds()
            found.append((message["headers"]["task"], kwargs, ahead))
        return found

    yield queued
    client.delete("celery")


@pytest.fixture
def steps():
    sequence = SequenceFactory(name="Fast")
    sequence.steps.create(delay_seconds=2, text="Two seconds in")
    sequence.steps.create(delay_seconds=60, text="A minute in")
    return sequence


@pytest.fixture
def woken_here(monkeypatch, gateway):
    """A wake-up run in this process, on the test's gateway; its lingering waits move the clock."""
    monkeypatch.setattr("scheduler.sender.worker_gateway", lambda: gateway)
    monkeypatch.setattr(wakeup.time, "sleep", lambda seconds: clock.clock_advance(timedelta(seconds=seconds)))


def user(telegram_id=3001):
    return TelegramUser.objects.create(telegram_id=telegram_id, first_name="U", joined_at=clock.now(), access_hash=0)


def wake_ups(queued, job="send_sequence_messages"):
    return [(kwargs, ahead) for task, kwargs, ahead in queued() if task == f"scheduler.{job}"]


def test_a_step_due_in_2_s_arms_one_wake_up_at_that_time(broker, steps):
    sequences_enroll(user=user())

    [(kwargs, ahead)] = wake_ups(broker)  # the step a minute later is covered by it
    assert kwargs["trigger"] == "wakeup" and kwargs["wakeup"]
    assert 1.5 < ahead <= 2.0


def test_an_earlier_row_re_arms_and_a_later_one_does_not(broker, steps):
    sequences_enroll(user=user(3001))
    clock.clock_advance(timedelta(seconds=1))
    sequences_enroll(user=user(3002))  # due 1 s after the armed one
    assert len(wake_ups(broker)) == 1
    steps.steps.filter(delay_seconds=2).update(delay_seconds=0)
    from botapp.services.sequences import sequence_steps_forget

    sequence_steps_forget()
    sequences_enroll(user=user(3003))  # due now: earlier than the armed one
    armed = wake_ups(broker)
    assert len(armed) == 2 and armed[1][1] is None  # due now: no ETA, the next free worker runs it


@pytest.mark.parametrize(
    ("write", "job", "seconds"),
    [
        (
            lambda: deletion_schedule(chat_id=3001, message_ids=[5], share_id="", minutes=1, now=clock.now()),
            "delete_due_messages",
            60,
        ),
        (
            lambda: message_schedule(send_at=clock.now() + timedelta(seconds=30), text="Hi", user_ids=[3001]),
            "send_broadcasts",
            30,
        ),
        (
            lambda: broadcast_start(broadcast=BroadcastFactory(scheduled_at=clock.now() + timedelta(seconds=45))),
            "send_broadcasts",
            45,
        ),
        (
            lambda: premium_grant(user=TelegramUser.objects.get(telegram_id=3001), duration=timedelta(minutes=5)),
            "end_premium_plans",
            300,
        ),
    ],
    ids=["auto-deletion", "scheduled message", "scheduled broadcast", "premium end"],
)
def test_every_kind_of_due_row_arms_its_job(broker, write, job, seconds):
    user(3001)
    write()
    [(kwargs, ahead)] = wake_ups(broker, job)
    assert kwargs["trigger"] == "wakeup"
    assert seconds - 0.5 < ahead <= seconds


def test_a_row_beyond_the_horizon_is_armed_by_the_beat_run_that_sees_it_come_near(broker, woken_here):
    deletion_schedule(chat_id=3001, message_ids=[5], share_id="", minutes=60, now=clock.now())
    assert wake_ups(broker, "delete_due_messages") == []  # not an hour in a worker's memory

    clock.clock_advance(timedelta(minutes=40))
    TASKS["delete_due_messages"].apply(kwargs={"trigger": "beat"}).get()
    assert wake_ups(broker, "delete_due_messages") == []  # 20 minutes away: still beyond the horizon
    clock.clock_advance(timedelta(minutes=10))
    TASKS["delete_due_messages"].apply(kwargs={"trigger": "beat"}).get()
    [(_, ahead)] = wake_ups(broker, "delete_due_messages")
    assert 599 < ahead <= 600


def test_a_fired_wake_up_sends_the_due_row_and_re_arms_for_the_next(broker, steps, telegram, woken_here):
    sequences_enroll(user=met_user(telegram, telegram_id=3001, joined_at=clock.now()))
    [(kwargs, _)] = wake_ups(broker)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")  # a worker took it

    clock.clock_advance(timedelta(seconds=2))
    TASKS["send_sequence_messages"].apply(kwargs=kwargs).get()

    assert [m.text for m in telegram.bot_messages(3001)][-1] == "Two seconds in"
    assert JobRun.objects.get().trigger == "wakeup"
    [(again, ahead)] = wake_ups(broker)  # the step a minute in: 58 s on, beyond lingering
    assert again["wakeup"] != kwargs["wakeup"] and 57 < ahead <= 58


def test_a_woken_run_lingers_for_rows_a_moment_apart(broker, telegram, woken_here):
    sequence = SequenceFactory(name="Close")
    for n in range(3):
        sequence.steps.create(delay_seconds=1 + n, text=f"Step {n}")
    sequences_enroll(user=met_user(telegram, telegram_id=3001, joined_at=clock.now()))
    [(kwargs, _)] = wake_ups(broker)

    clock.clock_advance(timedelta(seconds=1))
    TASKS["send_sequence_messages"].apply(kwargs=kwargs).get()

    assert [m.text for m in telegram.bot_messages(3001)][-3:] == ["Step 0", "Step 1", "Step 2"]
    run = JobRun.objects.get()  # one run for the three
    assert (run.processed, run.detail.endswith("3 passes")) == (3, True)


def test_a_superseded_wake_up_does_nothing(broker, steps):
    sequences_enroll(user=user())
    [(kwargs, _)] = wake_ups(broker)
    assert TASKS["send_sequence_messages"].apply(kwargs={**kwargs, "wakeup": "stale"}).get() == (
        "superseded by an earlier wake-up"
    )
    assert not JobRun.objects.exists()


def test_with_the_armed_key_lost_the_minute_sweep_still_sends_it_and_arms_again(broker, steps, telegram, woken_here):
    sequences_enroll(user=met_user(telegram, telegram_id=3001, joined_at=clock.now()))
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(*client.keys(wakeup._key("send_sequence_messages", "*")))  # Redis lost it
    client.delete("celery")  # and the worker holding the wake-up died

    clock.clock_advance(timedelta(seconds=30))  # beat's next minute
    TASKS["send_sequence_messages"].apply(kwargs={"trigger": "beat"}).get()

    assert SequenceMessage.objects.filter(status="sent").count() == 1
    [(_, ahead)] = wake_ups(broker)  # on time again from the next step on
    assert 29 < ahead <= 30


def test_an_idle_beat_run_makes_no_more_queries_than_the_job_alone(woken_here):
    for name in ("send_sequence_messages", "delete_due_messages", "send_broadcasts", "end_premium_plans"):
        assert JOBS[name].due_next is not None
        job_run(name, trigger="beat")  # settings cached, as in a worker that has run before
        with CaptureQueriesContext(connection) as alone:
            job_run(name, trigger="beat")  # what the task ran before wake-ups
        with CaptureQueriesContext(connection) as now:
            TASKS[name].apply(kwargs={"trigger": "beat"}).get()
        assert len(now) == len(alone), name


def test_with_the_broker_down_a_write_still_commits_and_the_key_is_left_free(broker, steps, settings):
    from config.celery import app

    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens there
    app._pool = app.amqp._producer_pool = None
    try:
        assert sequences_enroll(user=user()) == 2  # the /start that wrote them is not failed
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app._pool = app.amqp._producer_pool = None
    assert SequenceMessage.objects.count() == 2
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert client.get(wakeup._key("send_sequence_messages", "armed")) is None  # the next write may arm


def send_window(start, end):
    from botapp.models import BotSettings

    conf = BotSettings.load()
    conf.send_window_start, conf.send_window_end = start, end
    conf.save()


def test_a_step_held_by_the_send_window_arms_the_wake_up_for_its_opening(broker, steps, telegram, woken_here):
    from datetime import time

    send_window(time(10, 10), time(22))  # opens in 10 minutes
    sequences_enroll(user=met_user(telegram, telegram_id=3001, joined_at=clock.now()))
    [(kwargs, _)] = wake_ups(broker)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")  # a worker took it

    clock.clock_advance(timedelta(seconds=2))
    TASKS["send_sequence_messages"].apply(kwargs=kwargs).get()

    assert JobRun.objects.get().detail.startswith("held: outside the send window")
    opening = clock.today_start() + timedelta(hours=10, minutes=10)
    [(again, ahead)] = wake_ups(broker)  # not at the held step's due time again: at 10:10
    assert abs(ahead - (opening - clock.now()).total_seconds()) < 1
    clock.clock_advance(opening - clock.now())
    TASKS["send_sequence_messages"].apply(kwargs=again).get()
    assert "Two seconds in" in [m.text for m in telegram.bot_messages(3001)]


def test_a_broadcast_held_by_the_send_window_arms_the_sender_for_its_opening(broker, telegram, gateway, sender_wakeups):
    from datetime import time

    from botapp.services.broadcasts import broadcast_start
    from tests.factories import BroadcastFactory

    send_window(time(10, 10), time(22))
    met_user(telegram, telegram_id=3001)
    assert broadcast_start(broadcast=BroadcastFactory(text="Soon")) == 1
    job_run("send_broadcasts", trigger="start", gateway=gateway)

    opening = clock.today_start() + timedelta(hours=10, minutes=10)
    [(kwargs, ahead)] = wake_ups(broker, "send_broadcasts")
    assert kwargs["trigger"] == "wakeup" and abs(ahead - (opening - clock.now()).total_seconds()) < 1
    assert JOBS["send_broadcasts"].due_next() == opening
