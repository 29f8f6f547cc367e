"""The message deleter: what it deletes, what it leaves, and that concurrent sweepers never double up."""

import collections
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import PendingDeletion, TelegramUser
from scheduler.jobs.deletions import DeletionSweep
from scheduler.jobs.registry import job_run
from scheduler.jobs.sweep import LEASE, Sweep
from scheduler.models import JobRun
from tests.concurrency import run_in_threads
from tests.factories import PendingDeletionFactory, meet, met_user


def schedule(gateway, chat_id, *, minutes, n=2, share_id="abc"):
    """Messages the bot sent to a user (who wrote to it first), due for deletion in `minutes`."""
    ids = [gateway.send_text(chat_id, f"file {i}").message_id for i in range(n)]
    return PendingDeletionFactory(
        chat_id=chat_id, message_ids=ids, delete_at=clock.now() + timedelta(minutes=minutes), share_id=share_id
    )


def sweep(gateway, **kwargs):
    job = DeletionSweep(gateway)
    return Sweep(job, **kwargs).run()


@pytest.mark.django_db
def test_due_rows_are_deleted_with_a_notice_and_future_rows_stay(telegram, gateway, conf):
    met_user(telegram, telegram_id=1), met_user(telegram, telegram_id=2)
    due = schedule(gateway, 1, minutes=-1)
    later = schedule(gateway, 2, minutes=10)

    outcome = job_run("delete_due_messages", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 0)
    assert all(telegram.message(1, i).deleted for i in due.message_ids)
    assert not any(telegram.message(2, i).deleted for i in later.message_ids)
    notice = telegram.bot_messages(1)[-1]
    assert notice.text == "Previous message was deleted."
    assert notice.buttons[0][0].url == "https://t.me/CourierBot?start=abc"
    assert list(PendingDeletion.objects.values_list("id", flat=True)) == [later.id]
    run = JobRun.objects.get()
    assert (run.job, run.status, run.processed, run.trigger) == ("delete_due_messages", "ok", 1, "test")


@pytest.mark.django_db
def test_messages_past_telegrams_window_are_kept_as_expired_not_retried(telegram, gateway, conf):
    met_user(telegram, telegram_id=1)
    old = schedule(gateway, 1, minutes=0)
    clock.clock_advance(timedelta(hours=49))  # the bot's 48-hour window is over

    assert sweep(gateway) == (0, 1, 1)  # counted as failed (the dashboard shows it)
    assert PendingDeletion.objects.get().status == "expired"  # kept: the messages are still there
    assert telegram.count("messages.DeleteMessages") == 0  # Telegram is not asked
    assert not telegram.message(1, old.message_ids[0]).deleted
    assert telegram.bot_messages(1)[-1].text == "file 1"  # no "Previous message was deleted."
    clock.clock_advance(timedelta(hours=1))
    assert sweep(gateway) == (0, 0, 0)  # and never claimed again


@pytest.mark.django_db
def test_a_user_who_blocked_the_bot_is_marked_and_the_row_removed(telegram, gateway, conf):
    met_user(telegram, telegram_id=1)
    schedule(gateway, 1, minutes=-1)
    telegram.block(1)

    assert sweep(gateway) == (1, 0, 1)
    assert TelegramUser.objects.get(telegram_id=1).state == "blocked"
    assert not PendingDeletion.objects.exists()


@pytest.mark.django_db
def test_a_user_who_stopped_stays_stopped_when_the_notice_finds_them_gone(telegram, gateway, conf):
    met_user(telegram, telegram_id=1, state="stopped"), met_user(telegram, telegram_id=2)
    schedule(gateway, 1, minutes=-1), schedule(gateway, 2, minutes=-1)
    telegram.block(1)
    telegram.deactivate(2)

    assert sweep(gateway) == (2, 0, 1)
    assert dict(TelegramUser.objects.values_list("telegram_id", "state")) == {1: "stopped", 2: "deactivated"}
    assert not PendingDeletion.objects.exists()


@pytest.mark.django_db
def test_flood_wait_hands_the_row_back_for_later(telegram, gateway, conf):
    met_user(telegram, telegram_id=1)
    row = schedule(gateway, 1, minutes=-1)
    telegram.fail_next("FLOOD_WAIT_30", methods={"messages.DeleteMessages"})

    assert sweep(gateway) == (0, 1, 1)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.lease_until) == ("pending", 1, None)
    assert row.delete_at > clock.now()
    clock.clock_advance(timedelta(minutes=2))
    assert sweep(gateway) == (1, 0, 1)


def notices_in(telegram, chat_id: int) -> int:
    """How many "deleted" notices the chat received."""
    return sum(m.text == "Previous message was deleted." for m in telegram.bot_messages(chat_id))


@pytest.mark.django_db
@pytest.mark.parametrize("noticed", [False, True], ids=["before the notice", "after the notice arrived"])
def test_a_deletion_whose_worker_died_is_done_again_and_its_user_told_once(telegram, gateway, conf, noticed):
    """A worker killed holding the row (before its notice left, or after Telegram delivered it):
    the reaper keeps the notice due, the next run sends it with the same random_id, and the chat
    has it once."""
    met_user(telegram, telegram_id=1)
    row = schedule(gateway, 1, minutes=-1)
    job = DeletionSweep(gateway)
    (due,) = job.claim(10)
    if noticed:
        job.work(due)  # files deleted, notice sent; then the worker is killed before it records the row
    clock.clock_advance(LEASE + timedelta(seconds=1))

    job_run("reap_expired_claims", trigger="test")
    assert PendingDeletion.objects.get().notice_due  # within TELEGRAM_RANDOM_ID_WINDOW: still to be told
    assert job_run("delete_due_messages", trigger="test", gateway=gateway).processed == 1

    assert not PendingDeletion.objects.exists()
    assert all(telegram.message(1, i).deleted for i in row.message_ids)
    assert notices_in(telegram, 1) == 1  # told, and never twice
    assert telegram.count("messages.SendMessage") == 2 + 1 + noticed  # the files, the notice (and its refused repeat)


@pytest.mark.django_db
def test_a_deletion_whose_worker_died_past_the_random_id_window_is_done_without_a_notice(
    telegram, gateway, conf, settings, caplog
):
    met_user(telegram, telegram_id=1)
    row = schedule(gateway, 1, minutes=-1)
    DeletionSweep(gateway).claim(10)  # claimed... then the worker is killed, maybe as its notice left
    clock.clock_advance(timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW + 1))  # nobody reaped it in time

    job_run("reap_expired_claims", trigger="test")
    assert not PendingDeletion.objects.get().notice_due  # Telegram may have forgotten the random_id: given up
    assert "notices are not sent again" in caplog.text
    assert job_run("delete_due_messages", trigger="test", gateway=gateway).processed == 1

    assert not PendingDeletion.objects.exists()
    assert all(telegram.message(1, i).deleted for i in row.message_ids)
    assert notices_in(telegram, 1) == 0  # at most once: never a second notice


@pytest.mark.django_db(transaction=True)  # the sweep's threads read the user's access hash
@pytest.mark.parametrize("fault", ["lost answer", "INTERNAL"])
def test_a_notice_of_unknown_outcome_is_sent_again_with_its_random_id_and_arrives_once(
    telegram, gateway, conf, monkeypatch, fault
):
    from botapp.telegram import retry
    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(retry, "CALL_TIMEOUT", 0.5)  # how long the gateway waits for an answer
    met_user(telegram, telegram_id=1)
    row = schedule(gateway, 1, minutes=-1)
    telegram.fail_next(LOSE_ANSWER if fault == "lost answer" else fault, methods={"messages.SendMessage"}, times=20)

    assert sweep(gateway) == (0, 1, 1)
    pending = PendingDeletion.objects.get()
    assert (pending.status, pending.message_ids, pending.notice_due) == ("pending", [], True)  # the files are gone
    assert pending.notice_from is not None  # its window of repeats started
    telegram.faults.clear()
    clock.clock_advance(timedelta(minutes=2))
    assert sweep(gateway) == (1, 0, 1)

    assert not PendingDeletion.objects.exists()
    assert all(telegram.message(1, i).deleted for i in row.message_ids)
    assert notices_in(telegram, 1) == 1  # a lost answer's notice had arrived: its repeat was refused
    assert telegram.count("messages.DeleteMessages") == 1


@pytest.mark.django_db(transaction=True)
def test_a_notice_of_unknown_outcome_past_the_random_id_window_is_given_up(telegram, gateway, conf, monkeypatch, caplog):
    met_user(telegram, telegram_id=1)
    schedule(gateway, 1, minutes=-1)
    telegram.fail_next("INTERNAL", methods={"messages.SendMessage"}, times=1000)  # every try of it

    runs = 0
    while PendingDeletion.objects.exists():
        sweep(gateway)
        clock.clock_advance(timedelta(minutes=15))  # past each back-off
        runs += 1
        assert runs < 5
    assert runs == 2  # tried once more with its random_id, then past TELEGRAM_RANDOM_ID_WINDOW: given up
    assert "past TELEGRAM_RANDOM_ID_WINDOW" in caplog.text
    assert notices_in(telegram, 1) == 0


@pytest.mark.django_db
def test_a_notice_refused_with_a_flood_wait_is_sent_by_a_later_run(telegram, gateway, conf):
    met_user(telegram, telegram_id=1)
    row = schedule(gateway, 1, minutes=-1)
    telegram.fail_next("FLOOD_WAIT_120", methods={"messages.SendMessage"})  # longer than any sender waits

    assert sweep(gateway) == (0, 1, 1)
    assert all(telegram.message(1, i).deleted for i in row.message_ids)
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("pending", 1)  # handed back: Telegram did not send the notice
    assert row.message_ids == []  # the files are gone: the next run only tells the user
    clock.clock_advance(timedelta(minutes=2))
    assert sweep(gateway) == (1, 0, 1)
    assert telegram.count("messages.DeleteMessages") == 1

    notices = [e for e in telegram.events if e.action == "send" and e.text == "Previous message was deleted."]
    assert len(notices) == 1
    assert not PendingDeletion.objects.exists()


@pytest.mark.django_db
def test_dry_run_counts_without_deleting(telegram, gateway, conf):
    met_user(telegram, telegram_id=1)
    schedule(gateway, 1, minutes=-1)
    assert job_run("delete_due_messages", trigger="test", gateway=gateway, dry_run=True).processed == 1
    assert PendingDeletion.objects.count() == 1
    assert not JobRun.objects.exists()


@pytest.mark.django_db
def test_batch_queries_do_not_grow_with_batch_size(telegram, gateway, conf):
    def queries_for(n):
        PendingDeletion.objects.all().delete()
        chats = [10_000 + n * 1000 + i for i in range(n)]
        TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=meet(telegram, c)) for c in chats])
        for chat in chats:
            schedule(gateway, chat, minutes=-1, n=1)
        job = DeletionSweep(gateway)
        with CaptureQueriesContext(connection) as ctx:
            assert Sweep(job, batch_size=n, in_flight=1).run() == (n, 0, 1)
        return len(ctx.captured_queries)

    assert queries_for(10) == queries_for(500)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_concurrent_sweepers_process_each_row_exactly_once(telegram, gateway, conf):
    chats = [100_000 + i for i in range(2000)]
    TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=meet(telegram, c)) for c in chats])
    rows = []
    for chat in chats:
        rows.append(
            PendingDeletion(
                chat_id=chat,
                message_ids=[gateway.send_text(chat, "f").message_id],
                delete_at=clock.now() - timedelta(seconds=1),
                share_id="s",
            )
        )
    PendingDeletion.objects.bulk_create(rows)
    telegram.events.clear()
    telegram.latency = 0.0005  # answers take a moment: calls overlap like network calls

    results = run_in_threads(lambda: sweep(gateway, batch_size=100, in_flight=4))

    assert sum(r[0] for r in results) == 2000
    assert all(r[0] > 0 for r in results), results  # both really took part
    deletes = collections.Counter(e.chat_id for e in telegram.events if e.action == "delete")
    notices = collections.Counter(e.chat_id for e in telegram.events if e.action == "send")
    assert len(deletes) == 2000 and set(deletes.values()) == {1}
    assert len(notices) == 2000 and set(notices.values()) == {1}
    assert not PendingDeletion.objects.exists()


@pytest.mark.django_db
def test_the_job_deletes_in_many_chats_with_one_call_per_hundred_messages(telegram, gateway, conf):
    """The bot's private-chat messages share one numbering: one messages.deleteMessages takes 100
    of them whatever their chats, and the 150 notices go in MTProto containers."""
    chats = [300_000 + i for i in range(150)]
    TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=meet(telegram, c)) for c in chats])
    rows = [schedule(gateway, chat, minutes=-1, n=1) for chat in chats]
    since, containers = len(telegram.calls), telegram.containers

    outcome = job_run("delete_due_messages", trigger="test", gateway=gateway)

    assert outcome.processed == 150 and not PendingDeletion.objects.exists()
    calls = collections.Counter(telegram.methods_called(since))
    assert calls == {"messages.DeleteMessages": 2, "messages.SendMessage": 150}
    assert telegram.containers - containers == 2  # the notices of each 100 rows (no limiter here to split them)
    for chat, row in zip(chats, rows, strict=True):
        (notice,) = telegram.bot_messages(chat)  # the file is gone
        assert notice.id != row.message_ids[0]
        assert [b.text for b in notice.buttons[0]] == ["♻️ Get files again", "❌ Close"]


@pytest.mark.django_db
def test_past_the_48_hour_window_no_notice_claims_a_deletion(telegram, bot, gateway, conf, stored):
    """Verification off, a delivery, then no worker for 49 h (the clock moved without a wake-up or a
    sweep), then a `wait`: the sweep comes too late for Telegram to delete, so the user is not told
    "Previous message was deleted." while the files are there."""
    from tests.transcripts import said, sandbox

    box = sandbox(telegram, bot, gateway)
    delivered = said(box, f"1001: /start {stored.share_id}")
    copies = [r["message_ids"][0] for r in delivered.to(1001, "copy")]
    clock.clock_advance(timedelta(hours=49))
    out = said(box, "wait 1m")
    assert "delete_due_messages wakes" in out
    assert out.texts(1001) == [] and out.to(1001, "delete") == []
    assert not any(telegram.message(1001, i).deleted for i in copies)
    assert PendingDeletion.objects.get().status == "expired"
