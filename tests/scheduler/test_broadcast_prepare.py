"""A broadcast to a large audience starts at once: the first rows are made when it starts, the rest
by the worker's `prepare_broadcasts`, chunk by chunk, while it is being sent."""

import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
from botapp.services import broadcasts
from botapp.services.broadcast_bot import broadcast_report_text
from botapp.services.broadcasts import broadcast_cancel, broadcast_progress_text, broadcast_start, broadcasts_prepare
from botapp.signals import broadcast_queued
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, met_user


@pytest.fixture
def small_chunks(monkeypatch):
    """3 rows made when a broadcast starts, 4 per chunk after that (the defaults are 10,000 and 50,000)."""
    monkeypatch.setattr(broadcasts, "START_ROWS", 3)
    monkeypatch.setattr(broadcasts, "PREPARE_CHUNK", 4)
    return 4


@pytest.fixture
def queued():
    """The broadcast_queued signals sent: (broadcast_id, send, preparing)."""
    seen = []

    def receiver(sender, *, broadcast_id, send=True, preparing=False, **kwargs):
        seen.append((broadcast_id, send, preparing))

    broadcast_queued.connect(receiver, dispatch_uid="test_prepare_queued")
    yield seen
    broadcast_queued.disconnect(dispatch_uid="test_prepare_queued")


def rows(broadcast):
    return sorted(BroadcastDelivery.objects.filter(broadcast=broadcast).values_list("chat_id", flat=True))


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_large_audience_is_queued_in_chunks_while_it_is_sent(telegram, gateway, small_chunks, queued):
    people = [met_user(telegram) for _ in range(10)]
    met_user(telegram, state="stopped")
    broadcast = BroadcastFactory(title="Big", text="Hello all")

    assert broadcast_start(broadcast=broadcast) == 3  # the first rows, made in the request
    assert (broadcast.status, broadcast.total, broadcast.prepare_after is not None) == ("queued", 3, True)
    assert rows(broadcast) == sorted(u.telegram_id for u in people[:3])
    assert queued == [(broadcast.pk, True, True)]  # the sender and the preparer are woken
    assert broadcast_progress_text(broadcast=broadcast) == "preparing 3 users"

    # Sending starts with them, and the broadcast is not done while rows are left to make.
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent) == ("sending", 3)

    # One chunk: the audience is counted once, for the progress.
    made = broadcasts_prepare(chunk=small_chunks, time_budget=0.0)  # a budget spent: nothing, more to do
    assert (made.rows, made.more) == (0, True)
    step = broadcasts._prepare_chunk(broadcast.pk, chunk=small_chunks)
    broadcast.refresh_from_db()
    assert step == (4, False)
    assert (broadcast.total, broadcast.audience_size) == (7, 10)
    assert broadcast_progress_text(broadcast=broadcast) == "preparing 7 of 10 users"
    assert "7 users so far, preparing 7 of 10 users" in broadcast_report_text(broadcast=broadcast)[0]

    outcome = job_run("prepare_broadcasts", trigger="test")
    broadcast.refresh_from_db()
    assert outcome.processed == 3 and "1 broadcast(s) complete" in outcome.detail
    assert (broadcast.total, broadcast.prepare_after, broadcast.audience_size) == (10, None, None)
    assert rows(broadcast) == sorted(u.telegram_id for u in people)
    assert broadcast.status == "sending"  # 7 rows still to send

    job_run("send_broadcasts", trigger="test", gateway=gateway)
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.total) == ("done", 10, 10)
    assert all(len(telegram.bot_messages(u.telegram_id)) == 1 for u in people)


@pytest.mark.django_db(transaction=True)
def test_the_preparer_finishes_a_broadcast_whose_sends_ran_out_first(telegram, gateway, small_chunks):
    """Exactly 3 + 4 users: the sender sends all 7 before the last (empty) chunk says there are no
    more; no send is left to mark it done, so the preparer does."""
    for _ in range(7):
        met_user(telegram)
    broadcast = BroadcastFactory(title="Exact", text="Hi")
    broadcast_start(broadcast=broadcast)
    assert broadcasts._prepare_chunk(broadcast.pk, chunk=small_chunks) == (4, False)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent) == ("sending", 7)

    made = broadcasts_prepare(chunk=small_chunks)
    broadcast.refresh_from_db()
    assert (made.rows, made.broadcasts) == (0, 1)
    assert (broadcast.status, broadcast.total, broadcast.finished_at is not None) == ("done", 7, True)


@pytest.mark.django_db
def test_listed_users_are_made_in_chunks_each_once(telegram, small_chunks):
    known = [met_user(telegram) for _ in range(4)]
    stranger = 987_654_321
    ids = [
        known[0].telegram_id,
        known[1].telegram_id,
        known[0].telegram_id,
        stranger,
        known[2].telegram_id,
        known[1].telegram_id,
        known[3].telegram_id,
    ]
    broadcast = BroadcastFactory(title="Listed", text="Hi", audience=Broadcast.Audience.USERS, recipient_ids=ids)

    broadcast_start(broadcast=broadcast)  # ids[0:3]: two users, one of them twice
    assert (broadcast.total, broadcast.not_users, broadcast.prepare_after) == (2, 0, 3)
    broadcasts_prepare(chunk=small_chunks)
    broadcast.refresh_from_db()
    assert rows(broadcast) == sorted(u.telegram_id for u in known)
    # 5 distinct ids: 4 users and one stranger, whatever the repeats and the chunks' edges.
    assert (broadcast.total, broadcast.not_users, broadcast.prepare_after) == (5, 1, None)


@pytest.mark.django_db
def test_a_cancelled_broadcast_gets_no_more_rows(telegram, small_chunks):
    for _ in range(9):
        met_user(telegram)
    broadcast = BroadcastFactory(title="Stop", text="Hi")
    broadcast_start(broadcast=broadcast)
    assert broadcast_cancel(broadcast=broadcast) == 3

    assert broadcasts_prepare(chunk=small_chunks).rows == 0
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.total) == ("cancelled", 3)
    assert BroadcastDelivery.objects.filter(broadcast=broadcast).count() == 3


@pytest.mark.django_db(transaction=True)  # another connection holds the broadcast's lock
def test_one_worker_prepares_a_broadcast_at_a_time(telegram, small_chunks):
    for _ in range(9):
        met_user(telegram)
    broadcast = BroadcastFactory(title="Twice", text="Hi")
    broadcast_start(broadcast=broadcast)
    held, release = threading.Event(), threading.Event()

    def other_worker():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [broadcasts.PREPARE_LOCK, broadcast.pk])
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_worker)
    thread.start()
    try:
        assert held.wait(30)
        assert broadcasts_prepare(chunk=small_chunks).rows == 0  # left to the worker that has it
    finally:
        release.set()
        thread.join(30)
    assert broadcasts_prepare(chunk=small_chunks).rows == 6


@pytest.mark.django_db
def test_a_small_audience_is_queued_whole_when_it_starts(telegram, queued, django_capture_on_commit_callbacks):
    for _ in range(3):
        met_user(telegram)
    broadcast = BroadcastFactory(title="Small", text="Hi")
    with django_capture_on_commit_callbacks(execute=True):
        assert broadcast_start(broadcast=broadcast) == 3
    assert (broadcast.status, broadcast.prepare_after, broadcast.total) == ("queued", None, 3)
    assert queued == [(broadcast.pk, True, False)]
    assert TelegramUser.objects.count() == 3


@pytest.mark.django_db
def test_claims_walk_on_from_the_last_row_and_go_back_for_rows_handed_back(telegram, gateway):
    """The claim's index walk starts past the rows this run leased (not past every sent row's
    dead entry again); a row pending again below that mark is found once the rest run out."""
    from scheduler.jobs.broadcast_send import BroadcastSendSweep

    for _ in range(5):
        met_user(telegram)
    broadcast = BroadcastFactory(title="Walk", text="Hi")
    broadcast_start(broadcast=broadcast)
    ids = sorted(BroadcastDelivery.objects.filter(broadcast=broadcast).values_list("id", flat=True))
    sweep = BroadcastSendSweep(gateway)

    first = sweep.claim(2)
    assert [r.id for r in first] == ids[:2]
    # The first row goes back untouched (a bug struck before its send), the second is sent.
    sweep.record([sweep.handback(first[0], RuntimeError("a bug")), sweep.work(first[1])])
    assert BroadcastDelivery.objects.get(id=ids[0]).status == "pending"
    with CaptureQueriesContext(connection) as walk:
        assert [r.id for r in sweep.claim(2)] == ids[2:4]
    # courier_broadcast_claim(broadcast, n, after, ...): one walk, from the mark.
    walks = [q["sql"] for q in walk.captured_queries if "courier_broadcast_claim(" in q["sql"]]
    assert [f"courier_broadcast_claim({broadcast.pk}, 2, {ids[1]}, " in sql for sql in walks] == [True], walks
    assert sorted(r.id for r in sweep.claim(2)) == [ids[0], ids[4]]  # the last one, then the one handed back
    assert sweep.claim(2) == [] and broadcast.pk in sweep.progress.drained


@pytest.mark.django_db
def test_deliveries_are_vacuumed_after_a_percent_of_them_changed():
    """Migration 0018: the claim's index walk past sent rows' dead entries stays short."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [BroadcastDelivery._meta.db_table])
        (options,) = cursor.fetchone()
    assert {"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_threshold=10000"} <= set(options)


@pytest.mark.django_db
def test_a_job_whose_budget_ran_out_with_work_left_runs_again_at_once(monkeypatch):
    """A long broadcast runs end to end: the task queues itself again (trigger "more") rather than
    wait for beat's next minute; a run that finished its work does not."""
    import dataclasses

    from scheduler.jobs.registry import JOBS, Outcome
    from scheduler.tasks import TASKS

    queued = []
    task = TASKS["send_broadcasts"]
    monkeypatch.setattr(task, "apply_async", lambda **kwargs: queued.append(kwargs))
    for more in (True, False):
        job = dataclasses.replace(
            JOBS["send_broadcasts"], func=lambda more=more, **kwargs: Outcome(5, more=more), needs_gateway=False
        )
        monkeypatch.setitem(JOBS, "send_broadcasts", job)
        task(trigger="test")
    assert queued == [{"kwargs": {"trigger": "more"}, "retry": False}]


@pytest.mark.django_db(transaction=True)
def test_the_sender_says_when_its_budget_ran_out_with_rows_left(telegram, gateway):
    from scheduler.jobs.broadcast_send import BroadcastSendSweep
    from scheduler.jobs.sweep import sends_outcome

    for _ in range(3):
        met_user(telegram)
    broadcast_start(broadcast=BroadcastFactory(title="Slices", text="Hi"))
    assert sends_outcome(BroadcastSendSweep(gateway), batch_size=2, time_budget=0.0).more is True
    outcome = sends_outcome(BroadcastSendSweep(gateway), batch_size=2, time_budget=60.0)
    assert (outcome.processed, outcome.more) == (3, False)


@pytest.mark.django_db(transaction=True)  # the chunk's own transaction rolls back for real
def test_a_worker_that_dies_mid_chunk_leaves_none_of_it(telegram, small_chunks, monkeypatch):
    people = [met_user(telegram) for _ in range(9)]
    broadcast = BroadcastFactory(title="Crash", text="Hi")
    broadcast_start(broadcast=broadcast)
    real = broadcasts._rows_make

    def rows_then_die(*args, **kwargs):
        real(*args, **kwargs)  # the chunk's rows are written, then the worker is gone
        raise SystemExit("killed")

    monkeypatch.setattr(broadcasts, "_rows_make", rows_then_die)
    with pytest.raises(SystemExit):
        broadcasts_prepare(chunk=small_chunks)
    broadcast.refresh_from_db()
    assert (broadcast.total, BroadcastDelivery.objects.filter(broadcast=broadcast).count()) == (3, 3)

    monkeypatch.setattr(broadcasts, "_rows_make", real)
    broadcasts_prepare(chunk=small_chunks)  # the next run, from the same place
    broadcast.refresh_from_db()
    assert rows(broadcast) == sorted(u.telegram_id for u in people)
    assert (broadcast.total, broadcast.prepare_after) == (9, None)
