"""Broadcasts: composed in the admin, sent to every active user once, at the limiter's pace."""

import logging
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from botapp.services.health import heartbeat_forget, heartbeat_record
from botapp.services.outgoing import ALREADY_SENT
from inmemory_telegram.state import Media
from scheduler.jobs.broadcast_send import BroadcastSendSweep
from scheduler.jobs.registry import job_run
from scheduler.jobs.sweep import Sweep
from tests.concurrency import run_in_threads
from tests.conftest import WAKE_UP
from tests.factories import BroadcastFactory, meet, met_user, telegram_on_socket


def users(telegram, n, **kwargs):
    """Users who wrote to the bot (runbot stored their access hashes)."""
    return [met_user(telegram, **kwargs) for _ in range(n)]


def bold_text(msg):
    """A message's text and its entities: Telegram keeps "<b>50% off</b> today" as plain text
    plus a bold entity (kurigram parsed the HTML)."""
    return msg.text, [(type(e).__name__, e.offset, e.length) for e in msg.entities]


SALE = ("50% off today", [("MessageEntityBold", 0, 7)])  # "<b>50% off</b> today" as Telegram stores it


def draft(**kwargs):
    fields = {
        "title": "Sale",
        "text": "<b>50% off</b> today",
        "buttons": "Shop | https://shop.example\nA | https://a.example || B | https://b.example",
    }
    return BroadcastFactory(**{**fields, **kwargs})


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_broadcast_reaches_every_active_user_once(telegram, gateway):
    active = users(telegram, 5)
    stopped = users(telegram, 1, state="stopped")[0]
    blocked_before = users(telegram, 1, state="blocked")[0]
    telegram.block(active[4].telegram_id)  # blocks the bot now: we learn it when sending
    broadcast = draft(delete_after_minutes=60)

    assert broadcast_start(broadcast=broadcast) == 5
    outcome = job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (5, 0)
    for user in active[:4]:
        (msg,) = telegram.bot_messages(user.telegram_id)
        assert bold_text(msg) == SALE
        assert [[b.text for b in row] for row in msg.buttons] == [["Shop"], ["A", "B"]]
    assert telegram.bot_messages(stopped.telegram_id) == [] and telegram.bot_messages(blocked_before.telegram_id) == []
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.total, broadcast.sent, broadcast.blocked, broadcast.failed) == ("done", 5, 4, 1, 0)
    assert broadcast.finished_at is not None
    assert TelegramUser.objects.get(pk=active[4].pk).state == "blocked"
    sent = BroadcastDelivery.objects.filter(status="sent")
    assert sent.count() == 4 and all(abs(d.delete_at - d.sent_at - timedelta(minutes=60)) < timedelta(seconds=1) for d in sent)

    # Running again sends nothing more.
    assert job_run("send_broadcasts", trigger="test", gateway=gateway).processed == 0


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_media_broadcast_and_its_deletion_after_the_lifetime(telegram, gateway):
    user = users(telegram, 1)[0]
    photo = telegram.file_id("photo", "sale.jpg")  # a photo the operator got from Telegram
    broadcast = draft(media_kind="photo", media=photo, buttons="", protect_content=True, delete_after_minutes=30)
    broadcast_start(broadcast=broadcast)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    (msg,) = telegram.bot_messages(user.telegram_id)
    assert (msg.media, bold_text(msg), msg.protect) == (Media("photo", "sale.jpg"), SALE, True)

    clock.clock_advance(timedelta(minutes=31))
    assert job_run("delete_expired_broadcasts", trigger="test", gateway=gateway).processed == 1
    assert telegram.message(user.telegram_id, msg.id).deleted


@pytest.mark.django_db
def test_flood_wait_leaves_the_user_for_later_other_errors_are_final(telegram, gateway):
    first, second = users(telegram, 2)
    broadcast = draft()
    broadcast_start(broadcast=broadcast)
    telegram.fail_next("FLOOD_WAIT_5", methods={"messages.SendMessage"})
    telegram.deactivate(second.telegram_id)

    sweep = BroadcastSendSweep(gateway)
    Sweep(sweep, in_flight=1).run()

    statuses = dict(BroadcastDelivery.objects.values_list("user_id", "status"))
    assert statuses == {first.pk: "pending", second.pk: "blocked"}
    assert TelegramUser.objects.get(pk=second.pk).state == "deactivated"
    assert Broadcast.objects.get(pk=broadcast.pk).status == "sending"
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert len(telegram.bot_messages(first.telegram_id)) == 1
    assert Broadcast.objects.get(pk=broadcast.pk).status == "done"


@pytest.mark.django_db
def test_a_user_who_stopped_gets_nothing_and_stays_stopped(telegram, gateway):
    reached, stopped, gone = users(telegram, 3)
    broadcast = draft()
    broadcast_start(broadcast=broadcast)
    TelegramUser.objects.filter(pk=stopped.pk).update(state="stopped")  # /stop after the broadcast started
    telegram.block(stopped.telegram_id)
    telegram.deactivate(gone.telegram_id)

    job_run("send_broadcasts", trigger="test", gateway=gateway)

    rows = {d.user_id: (d.status, d.error) for d in BroadcastDelivery.objects.all()}
    assert rows == {
        reached.pk: ("sent", ""),
        stopped.pk: ("skipped", "user is stopped"),  # not even tried
        gone.pk: ("blocked", "account deactivated"),
    }
    assert dict(TelegramUser.objects.values_list("pk", "state")) == {
        reached.pk: "active",
        stopped.pk: "stopped",  # their /stop stands
        gone.pk: "deactivated",
    }
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.blocked, broadcast.failed, broadcast.skipped) == (1, 1, 0, 1)
    assert telegram.count("messages.SendMessage", chat_id=stopped.telegram_id) == 0


@pytest.mark.django_db
def test_only_drafts_start_and_cancel_stops_the_rest(telegram, gateway):
    users(telegram, 3)
    broadcast = draft()
    broadcast_start(broadcast=broadcast)
    with pytest.raises(ValidationError):
        broadcast_start(broadcast=broadcast)
    assert broadcast_cancel(broadcast=broadcast) == 3
    assert job_run("send_broadcasts", trigger="test", gateway=gateway).processed == 0
    assert Broadcast.objects.get(pk=broadcast.pk).status == "cancelled"


@pytest.mark.django_db
@pytest.mark.parametrize("delivered", [False, True], ids=["before the call", "after Telegram accepted"])
def test_a_crash_mid_send_is_sent_again_and_delivered_once(telegram, gateway, delivered):
    """A worker killed after claiming (and maybe after Telegram delivered, before it recorded it):
    the reaper puts the row back, the next run sends it with the same random_id, and the user has
    it once, recorded sent."""
    user = users(telegram, 1)[0]
    broadcast_start(broadcast=draft())
    sweep = BroadcastSendSweep(gateway)
    (row,) = sweep.claim(10)  # claimed and marked sending... then the worker dies
    if delivered:  # ...right after its send went out with the delivery's random_id
        gateway.send_many([sweep.messages[row.broadcast_id].item(row.chat_id, user_id=row.user_id, key=sweep._key(row))])
    clock.clock_advance(timedelta(minutes=6))
    job_run("reap_expired_claims", trigger="test")
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert BroadcastDelivery.objects.get().status == "sent"
    assert [m.text for m in telegram.bot_messages(user.telegram_id)] == ["50% off today"]
    broadcast = Broadcast.objects.get()
    assert broadcast.status == "done"
    assert (broadcast.sent, broadcast.interrupted, broadcast.total) == (1, 0, 1)


@pytest.mark.django_db
def test_a_crash_mid_send_past_the_random_id_window_is_interrupted_not_resent(telegram, gateway, settings):
    user = users(telegram, 1)[0]
    broadcast_start(broadcast=draft())
    BroadcastSendSweep(gateway).claim(10)  # claimed and marked sending... then the worker dies
    clock.clock_advance(timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW + 1))  # nobody reaped it in time
    job_run("reap_expired_claims", trigger="test")
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert BroadcastDelivery.objects.get().status == "interrupted"
    assert telegram.bot_messages(user.telegram_id) == []
    broadcast = Broadcast.objects.get()
    assert broadcast.status == "done"  # nothing left to send: it reached an end
    assert (broadcast.sent, broadcast.interrupted, broadcast.total) == (0, 1, 1)  # counted and shown


@pytest.mark.django_db
def test_the_run_of_a_killed_worker_ends_failed_on_the_jobs_page(settings):
    from scheduler.models import JobRun

    stuck = JobRun.objects.create(job="send_broadcasts", trigger="beat")  # the worker got kill -9
    fresh_clock = clock.now()
    clock.clock_advance(timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT - 30))
    job_run("reap_expired_claims", trigger="test")
    assert JobRun.objects.get(pk=stuck.pk).status == "running"  # it could still be running
    clock.clock_advance(timedelta(minutes=2))
    job_run("reap_expired_claims", trigger="test")
    stuck.refresh_from_db()
    assert stuck.status == "failed" and stuck.finished_at > fresh_clock
    assert "worker stopped" in stuck.error


@pytest.mark.django_db(transaction=True)
def test_two_senders_never_send_twice(telegram, gateway, sender_wakeups):
    TelegramUser.objects.bulk_create(
        [TelegramUser(telegram_id=700_000 + i, access_hash=meet(telegram, 700_000 + i)) for i in range(600)]
    )
    broadcast_start(broadcast=draft(buttons=""))
    assert sender_wakeups == [WAKE_UP]  # committed: the scheduler was asked to start sending now
    telegram.latency = 0.001  # answers take a moment: calls overlap like network calls

    def run():
        sweep = BroadcastSendSweep(gateway)
        return Sweep(sweep, batch_size=50, in_flight=4).run()

    results = run_in_threads(run)
    assert all(r[0] > 0 for r in results), results  # both took part

    sends = [e.chat_id for e in telegram.events if e.action == "send"]
    assert len(sends) == 600 and len(set(sends)) == 600
    assert Broadcast.objects.get().sent == 600


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


@pytest.mark.django_db
def test_admin_compose_validates_and_previews(operator):
    url = reverse("admin:botapp_broadcast_add")
    bad = operator.post(url, {"title": "x", "text": "hi", "media_kind": "photo", "media": "", "buttons": "broken line"})
    errors = bad.context["adminform"].form.errors
    assert "buttons" in errors and "__all__" in errors
    too_long = operator.post(url, {"title": "x", "text": "hi", "delete_after_minutes": 2881, "media_kind": "", "media": ""})
    assert "delete_after_minutes" in too_long.context["adminform"].form.errors

    ok = operator.post(
        url, {"title": "Hello", "text": "Hi <b>all</b>", "media_kind": "", "media": "", "buttons": "Go | https://go.example"}
    )
    assert ok.status_code == 302
    broadcast = Broadcast.objects.get()
    page = operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    assert "Hi &lt;b&gt;all&lt;/b&gt;" in page and 'href="https://go.example"' in page


@pytest.mark.django_db
def test_admin_start_action_queues_for_active_users(operator, telegram, sender_wakeups, django_capture_on_commit_callbacks):
    users(telegram, 2)
    broadcast = draft()
    changelist = reverse("admin:botapp_broadcast_changelist")
    start = reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk])
    confirmation = operator.get(start).content.decode()
    assert "It goes now to 2 active users." in confirmation and "Send to 2 users" in confirmation
    assert Broadcast.objects.get(pk=broadcast.pk).status == "draft"  # asking is not starting
    heartbeat_record(process="worker", name="celery@test")  # a worker is running
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = operator.post(start, follow=True)
    finally:
        heartbeat_forget(process="worker", name="celery@test")
    assert sender_wakeups == []  # not before the queue is committed
    for callback in callbacks:
        callback()
    assert sender_wakeups == [WAKE_UP]  # the sender is woken once the queue is committed
    assert "Sending to 2 users: progress below updates by itself." in response.content.decode()
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.total) == ("queued", 2)
    assert "0/2 (0%)" in operator.get(changelist).content.decode()
    page = operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page  # nothing left to save


@pytest.mark.django_db
def test_starting_with_no_worker_running_says_so(operator, telegram, sender_wakeups):
    users(telegram, 2)
    broadcast = draft()
    assert 'name="_save"' in operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    response = operator.post(reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk]), follow=True)
    assert "Queued for 2 users, but no worker is running: sending starts when one does" in response.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).status == "queued"


@pytest.mark.django_db(transaction=True)  # commits, so the wake-up is sent; the sender's pool threads read the users
def test_with_the_broker_down_starting_still_queues_and_beat_sends_it(telegram, gateway, settings, caplog):
    from config.celery import app

    users(telegram, 2)
    broadcast = draft(buttons="")
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens there
    app._pool = app.amqp._producer_pool = None  # so the next publish connects there
    try:
        with caplog.at_level(logging.WARNING, logger="scheduler.receivers"):
            assert broadcast_start(broadcast=broadcast) == 2
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app._pool = app.amqp._producer_pool = None  # and the pools built against the dead broker
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "scheduler.receivers"] == [
        ("WARNING", f"could not wake the broadcast sender for broadcast {broadcast.pk}; beat will start it")
    ]
    assert Broadcast.objects.get(pk=broadcast.pk).status == "queued"
    assert job_run("send_broadcasts", trigger="beat", gateway=gateway).processed == 2  # beat's next run sends it


@pytest.mark.django_db
def test_admin_test_action_queues_the_test_for_a_worker(operator, settings, monkeypatch):
    from scheduler.tasks import send_broadcast_test

    settings.ADMIN_IDS = "1000,1001"
    queued = []
    monkeypatch.setattr(send_broadcast_test, "apply_async", lambda *args, **kwargs: queued.append((args, kwargs)))
    broadcast = draft()
    heartbeat_record(process="worker", name="celery@test")  # a worker is running
    try:
        response = operator.post(reverse("admin:botapp_broadcast_send_test", args=[broadcast.pk]), follow=True)
    finally:
        heartbeat_forget(process="worker", name="celery@test")
    assert queued == [((), {"args": [broadcast.pk], "retry": False})]
    page = response.content.decode()
    assert "A test is on its way to 2 admin(s); their results appear below." in page
    assert "waiting for a worker to send it" in page and "No worker is running" not in page
    # With none running the operator is told the test waits, on the page as in the message.
    response = operator.post(reverse("admin:botapp_broadcast_send_test", args=[broadcast.pk]), follow=True)
    assert "The test to 2 admin(s) waits: No worker is running" in response.content.decode()
    assert 'id="test-no-worker"' in response.content.decode()
    broadcast.refresh_from_db()
    assert broadcast.status == "draft" and broadcast.test_requested_at is not None


@pytest.mark.django_db
def test_admin_test_action_with_the_broker_down_or_no_admins_says_so(operator, settings):
    from config.celery import app

    broadcast = draft()
    url = reverse("admin:botapp_broadcast_send_test", args=[broadcast.pk])
    settings.ADMIN_IDS = ""
    response = operator.post(url, follow=True)
    assert "Set ADMIN_IDS to receive tests." in response.content.decode()

    settings.ADMIN_IDS = "1000"
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens there
    app._pool = app.amqp._producer_pool = None  # so the next publish connects there
    try:
        assert "The task queue (the Celery broker) is unreachable" in operator.get(url).content.decode()  # said before asking
        response = operator.post(url, follow=True)
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app._pool = app.amqp._producer_pool = None  # and the pools built against the dead broker
    page = response.content.decode()
    assert "Not queued: the task queue (the Celery broker) is unreachable." in page
    assert "on its way" not in page and "waiting for a worker" not in page
    assert Broadcast.objects.get(pk=broadcast.pk).test_requested_at is None


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_scheduled_broadcast_goes_out_at_its_time_to_whoever_is_active_then(telegram, gateway):
    early = users(telegram, 1)[0]
    broadcast = draft(scheduled_at=clock.now() + timedelta(hours=2), buttons="")
    assert broadcast_start(broadcast=broadcast) == 0
    assert broadcast.status == "scheduled" and not BroadcastDelivery.objects.exists()

    late = users(telegram, 1)[0]  # joins after the broadcast was scheduled
    clock.clock_advance(timedelta(hours=1))
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert telegram.bot_messages(early.telegram_id) == []

    clock.clock_advance(timedelta(hours=1, minutes=1))
    outcome = job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert "1 scheduled broadcast(s) started" in outcome.detail
    assert len(telegram.bot_messages(early.telegram_id)) == 1 and len(telegram.bot_messages(late.telegram_id)) == 1
    assert Broadcast.objects.get(pk=broadcast.pk).status == "done"


@pytest.mark.django_db
def test_a_scheduled_broadcast_can_be_cancelled_before_its_time(telegram, gateway):
    users(telegram, 1)
    broadcast = draft(scheduled_at=clock.now() + timedelta(hours=1))
    broadcast_start(broadcast=broadcast)
    assert broadcast_cancel(broadcast=broadcast) == 0
    clock.clock_advance(timedelta(hours=2))
    assert job_run("send_broadcasts", trigger="test", gateway=gateway).processed == 0
    assert Broadcast.objects.get(pk=broadcast.pk).status == "cancelled"


@pytest.mark.django_db
def test_admin_refuses_a_schedule_in_the_past(operator):
    response = operator.post(
        reverse("admin:botapp_broadcast_add"),
        {"title": "x", "text": "hi", "media_kind": "", "media": "", "scheduled_at_0": "2020-01-01", "scheduled_at_1": "10:00:00"},
    )
    assert "scheduled_at" in response.context["adminform"].form.errors


@pytest.mark.django_db
def test_a_test_goes_to_the_admins_only(telegram, settings, monkeypatch, tmp_path):
    from scheduler import sender
    from scheduler.tasks import send_broadcast_test

    settings.TELEGRAM_SESSION_DIR = tmp_path
    settings.ADMIN_IDS = "1000,1001"
    monkeypatch.setattr(sender, "_gateway", None)
    monkeypatch.setattr(sender, "_slot_file", None)
    met_user(telegram, telegram_id=1000), met_user(telegram, telegram_id=1001)  # the admins talk to the bot too
    users(telegram, 2)
    broadcast = draft()

    with telegram_on_socket(telegram) as socket:  # the worker reaches the in-memory Telegram as `telegram_server`
        settings.TELEGRAM_OFFLINE = True
        settings.TELEGRAM_OFFLINE_SOCKET = socket
        try:
            outcome = send_broadcast_test.apply(args=[broadcast.pk]).get()
            assert outcome == f"test of broadcast {broadcast.pk} delivered to 2 of 2 admin(s)"
        finally:
            if sender._gateway is not None:
                sender._gateway.stop()
            if sender._slot_file is not None:
                sender._slot_file.close()

    assert [bold_text(m) for m in telegram.bot_messages(1000)] == [SALE]
    assert len(telegram.bot_messages(1001)) == 1
    assert [e.chat_id for e in telegram.events] == [1000, 1001]
    broadcast.refresh_from_db()
    assert broadcast.status == "draft"
    assert [(r["chat_id"], r["ok"]) for r in broadcast.test_results] == [(1000, True), (1001, True)]


@pytest.mark.django_db
def test_a_user_who_stops_after_the_broadcast_was_queued_gets_nothing(telegram, gateway):
    stays, leaves = users(telegram, 2)
    broadcast = draft()
    broadcast_start(broadcast=broadcast)
    TelegramUser.objects.filter(pk=leaves.pk).update(state=TelegramUser.State.STOPPED)  # /stop, a moment later

    job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert len(telegram.bot_messages(stays.telegram_id)) == 1
    assert telegram.bot_messages(leaves.telegram_id) == []
    statuses = dict(BroadcastDelivery.objects.values_list("user_id", "status"))
    assert statuses == {stays.pk: "sent", leaves.pk: "skipped"}
    assert Broadcast.objects.get(pk=broadcast.pk).status == "done"


@pytest.mark.django_db
def test_a_lost_answer_is_delivered_once_counted_sent_and_the_progress_reaches_the_end(telegram, gateway, monkeypatch):
    from pyrogram.session import Session

    from botapp.admin.broadcasts import BroadcastAdmin
    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    monkeypatch.setattr(Session, "RETRY_DELAY", 0.05)
    users(telegram, 3)
    broadcast = draft()
    broadcast_start(broadcast=broadcast)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"})

    job_run("send_broadcasts", trigger="test", gateway=gateway)

    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.interrupted, broadcast.status) == (3, 0, "done")
    assert sorted(BroadcastDelivery.objects.values_list("error", flat=True)) == ["", "", ALREADY_SENT]
    assert "3/3 (100%)" in BroadcastAdmin.progress(None, broadcast)


def test_a_paid_broadcast_goes_in_containers_and_its_queries_do_not_grow_with_the_batch(telegram, settings, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from botapp.models import BotSettings
    from botapp.services.users import user_access_hash
    from botapp.telegram.limiter import send_batch_size
    from offline.telegram.clients import offline_gateway
    from scheduler.jobs.broadcast_send import send_broadcasts

    settings.TELEGRAM_PAID_BROADCASTS = True  # 960/s: batches of 16 sends
    BotSettings.load()  # read once per run (send window, opt-out), cached as in a worker that has run before
    worker = offline_gateway(telegram, peers=user_access_hash)
    people, queries = [], []
    try:
        for more in (40, 200):  # one claim of all: 40 rows, then 240
            people += users(telegram, more)
            n = len(people)
            broadcast = BroadcastFactory(text="<b>50% off</b> today")
            broadcast_start(broadcast=broadcast)
            containers = telegram.containers
            with CaptureQueriesContext(connection) as ctx:
                outcome = send_broadcasts(gateway=worker, batch_size=n)
            queries.append(len(ctx))
            assert outcome.processed == n
            assert telegram.containers - containers == -(-n // send_batch_size()) and send_batch_size() == 16
            assert [bold_text(telegram.bot_messages(u.telegram_id)[-1]) for u in people] == [SALE] * n
            broadcast.refresh_from_db()
            assert (broadcast.sent, broadcast.status) == (n, Broadcast.Status.DONE)
    finally:
        worker.stop()
    assert queries[0] == queries[1]


@pytest.mark.django_db(transaction=True)  # the deleter's pool threads read the broadcast
def test_a_message_confirmed_only_as_a_repeat_is_found_again_and_deleted_after_the_lifetime(telegram, gateway, monkeypatch):
    """A lost answer: the send is asked again with its random_id and Telegram refuses the copy
    (RANDOM_ID_DUPLICATE), so its message id is never known. When the broadcast's lifetime is over
    the deleter reads the bot's box back from before the broadcast began, finds the message by
    what it shows, and deletes it with the others."""
    from pyrogram.session import Session

    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    monkeypatch.setattr(Session, "RETRY_DELAY", 0.05)
    who = users(telegram, 3)
    broadcast = draft(delete_after_minutes=60, buttons="")
    broadcast_start(broadcast=broadcast)
    other = met_user(telegram)  # joined after the start: not in the broadcast
    gateway.send_text(other.telegram_id, "<b>50% off</b> today")  # the same text, another chat: never taken for it
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"}, chat_id=who[1].telegram_id)

    job_run("send_broadcasts", trigger="test", gateway=gateway)
    repeat = BroadcastDelivery.objects.get(user=who[1])
    assert (repeat.status, repeat.message_id, repeat.error) == ("sent", None, ALREADY_SENT)
    assert repeat.delete_at is not None  # to be deleted all the same

    clock.clock_advance(timedelta(minutes=61))
    outcome = job_run("delete_expired_broadcasts", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (3, 0)
    assert [telegram.bot_messages(u.telegram_id) for u in who] == [[], [], []]
    assert len(telegram.bot_messages(other.telegram_id)) == 1  # not the broadcast's: left alone
    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {"deleted"}
