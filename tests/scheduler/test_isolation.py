"""A row's failure is that row's result: nothing one row raises discards the rest of its batch."""

from datetime import timedelta

import pytest
import redis
from django.urls import reverse

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, PendingDeletion, SequenceMessage, TelegramUser
from botapp.services.broadcasts import broadcast_start
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import BotUnauthorized
from offline.telegram.clients import offline_gateway
from scheduler.jobs.broadcast_send import send_broadcasts
from scheduler.jobs.claims import reap_expired_claims
from scheduler.jobs.deletions import delete_due_messages
from scheduler.jobs.sequence_send import send_sequence_messages
from scheduler.jobs.sweep import RowsHandedBack
from tests.conftest import answers_unreadable_once
from tests.factories import BroadcastFactory, PendingDeletionFactory, SequenceMessageFactory, SequenceStepFactory, met_user

pytestmark = pytest.mark.django_db(transaction=True)  # the sweeps' pool threads read committed rows
Status = BroadcastDelivery.Status


@pytest.fixture(autouse=True)
def _no_wake_up(sender_wakeups):
    pass  # no Celery worker here: wake-ups are recorded, not published


class BlipLimiter:
    """The shared limiter, whose Redis drops the connection on the `nth` call."""

    def __init__(self, nth):
        self.calls, self.nth = 0, nth

    count_max = 100

    def acquire(self, chat_id=None, *, count=1, paid=False):
        self.calls += 1
        if self.calls == self.nth:
            raise redis.ConnectionError("Connection reset by peer")
        return 0.0

    def acquire_many(self, chat_ids):  # a batch's slots (free broadcasts go in pairs), one call
        self.acquire()
        return len(chat_ids)

    def pause(self, seconds, *, chat_id=None, paid=False):
        return seconds


def started_broadcast(telegram, n):
    users = [met_user(telegram, telegram_id=50_000 + i) for i in range(n)]
    broadcast = BroadcastFactory(text="Hello")
    broadcast_start(broadcast=broadcast)
    return users, broadcast


def test_a_redis_blip_hands_the_rows_of_one_call_back_and_records_the_rest(telegram):
    users, broadcast = started_broadcast(telegram, 20)  # sent in pairs (send_batch_size): a limiter call each
    worker = offline_gateway(telegram, peers=user_access_hash, limiter=BlipLimiter(nth=7))
    try:
        with pytest.raises(RowsHandedBack, match=r"2 row\(s\) handed back untouched .*\(18 recorded first\)"):
            send_broadcasts(gateway=worker, batch_size=50)  # the run fails loudly; what was sent is recorded
    finally:
        worker.stop()

    rows = dict(BroadcastDelivery.objects.values_list("user__telegram_id", "status"))
    assert sorted(rows.values()).count(Status.SENT) == 18
    left = [uid for uid, status in rows.items() if status == Status.PENDING]  # untouched: goes next run
    assert len(left) == 2 and all(telegram.bot_messages(uid) == [] for uid in left)
    assert sum(len(telegram.bot_messages(u.telegram_id)) for u in users) == 18
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.failed, broadcast.status) == (18, 0, Broadcast.Status.SENDING)

    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        send_broadcasts(gateway=worker)  # the next run
    finally:
        worker.stop()
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.status) == (20, Broadcast.Status.DONE)
    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * 20


def test_a_failure_building_one_notice_retries_that_deletion_only(telegram, gateway, monkeypatch):
    users = [met_user(telegram, telegram_id=60_000 + i) for i in range(5)]
    for user in users:
        sent = gateway.send_text(user.telegram_id, "file")
        PendingDeletionFactory(
            chat_id=user.telegram_id, message_ids=[sent.message_id], delete_at=clock.now() - timedelta(minutes=1)
        )
    from botapp.services import autodelete

    real = autodelete.deleted_notice_item

    def broken_for_one(*, chat_id, **kwargs):
        if chat_id == users[2].telegram_id:
            raise ValueError("a bug building the notice")
        return real(chat_id=chat_id, **kwargs)

    monkeypatch.setattr("scheduler.jobs.deletions.deleted_notice_item", broken_for_one)
    with pytest.raises(RowsHandedBack, match="a bug building the notice"):
        delete_due_messages(gateway=gateway)

    assert list(PendingDeletion.objects.values_list("chat_id", flat=True)) == [users[2].telegram_id]
    assert PendingDeletion.objects.get().status == "pending"
    noticed = [u for u in users if any(m.text == "Previous message was deleted." for m in telegram.bot_messages(u.telegram_id))]
    assert noticed == users[:2] + users[3:]


def test_a_revoked_token_mid_broadcast_stops_it_with_no_row_lost_and_no_user_blamed(telegram):
    users, broadcast = started_broadcast(telegram, 12)
    telegram.fail_next("AUTH_KEY_UNREGISTERED", methods={"messages.SendMessage"}, after=5, times=100)
    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        with pytest.raises(BotUnauthorized):
            send_broadcasts(gateway=worker, batch_size=50)
    finally:
        worker.stop()

    statuses = list(BroadcastDelivery.objects.values_list("status", flat=True))
    assert statuses.count(Status.SENT) == 5
    assert statuses.count(Status.PENDING) == 7  # not interrupted, not failed: they go when the token is fixed
    assert not TelegramUser.objects.exclude(state=TelegramUser.State.ACTIVE).exists()
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.failed, broadcast.blocked) == (5, 0, 0)


@pytest.fixture
def public_url(settings):
    settings.PUBLIC_URL = "https://courier.example"
    return settings


def run(job, telegram, **kwargs):
    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        return job(gateway=worker, **kwargs)
    finally:
        worker.stop()


def test_a_broadcast_whose_message_cannot_be_built_keeps_every_row_until_it_can(telegram, public_url):
    """PUBLIC_URL removed after a broadcast with a tracked button was composed: its rows used to be
    claimed and lost (left 'sending', then interrupted by the reaper) 200 a minute."""
    users = [met_user(telegram, telegram_id=70_000 + i) for i in range(6)]
    broadcast = BroadcastFactory(text="Join us", buttons="Join | https://t.me/+abc | joined")
    broadcast_start(broadcast=broadcast)
    public_url.PUBLIC_URL = ""

    with pytest.raises(RowsHandedBack, match="6 row.*PUBLIC_URL.*0 recorded first"):
        run(send_broadcasts, telegram)

    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {Status.PENDING}
    assert "PUBLIC_URL" in BroadcastDelivery.objects.first().error
    clock.clock_advance(timedelta(minutes=30))
    reap_expired_claims()  # nothing was left claimed, so nothing is interrupted
    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {Status.PENDING}
    assert all(telegram.bot_messages(u.telegram_id) == [] for u in users)

    public_url.PUBLIC_URL = "https://courier.example"
    run(send_broadcasts, telegram)

    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.failed, broadcast.interrupted) == (Broadcast.Status.DONE, 6, 0, 0)
    for user in users:
        (message,) = telegram.bot_messages(user.telegram_id)
        assert message.buttons[0][0].url.startswith("https://courier.example/go/")


def test_a_sequence_step_that_cannot_be_built_keeps_its_messages_until_it_can(telegram, public_url):
    users = [met_user(telegram, telegram_id=71_000 + i) for i in range(4)]
    step = SequenceStepFactory(text="Join us", buttons="Join | https://t.me/+abc | joined")
    fine = SequenceStepFactory(text="Plain")
    for user in users:
        SequenceMessageFactory(user=user, step=step)
        SequenceMessageFactory(user=user, step=fine)
    public_url.PUBLIC_URL = ""

    with pytest.raises(RowsHandedBack, match="PUBLIC_URL"):
        run(send_sequence_messages, telegram)
    clock.clock_advance(timedelta(minutes=30))
    reap_expired_claims()

    assert set(SequenceMessage.objects.filter(step=step).values_list("status", flat=True)) == {"pending"}
    # Each user's steps go in order: the step after waits for the one that cannot be built yet.
    assert set(SequenceMessage.objects.filter(step=fine).values_list("status", flat=True)) == {"pending"}
    assert not SequenceMessage.objects.filter(status="interrupted").exists()

    public_url.PUBLIC_URL = "https://courier.example"
    run(send_sequence_messages, telegram)
    run(send_sequence_messages, telegram)

    assert set(SequenceMessage.objects.values_list("status", flat=True)) == {"sent"}
    assert all([m.text for m in telegram.bot_messages(u.telegram_id)] == ["Join us", "Plain"] for u in users)


def test_a_broadcast_composed_under_a_looser_link_rule_still_ends(telegram):
    """A link the form now refuses, saved before: Telegram refuses each send (BUTTON_URL_INVALID),
    each row fails with that reason and the broadcast ends, instead of its rows going round."""
    users = [met_user(telegram, telegram_id=72_000 + i) for i in range(3)]
    broadcast = BroadcastFactory(text="Hi", buttons="Site | https://")
    broadcast_start(broadcast=broadcast)

    run(send_broadcasts, telegram)

    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.failed) == (Broadcast.Status.DONE, 0, 3)
    assert all("BUTTON_URL_INVALID" in error for error in BroadcastDelivery.objects.values_list("error", flat=True))
    assert all(telegram.bot_messages(u.telegram_id) == [] for u in users)


def test_a_broadcasts_rows_and_counters_are_recorded_in_one_transaction(telegram):
    """PostgreSQL refuses the counters' update (a trigger stands in for the connection dying at
    that moment): the rows' results go with it, so no row says 'sent' that the counters miss.
    Those sends' outcome is then unknown: the reaper puts them back, and sent again with the same
    random_ids they are refused as repeats: recorded sent, delivered once."""
    from django.db import DatabaseError, connection

    users, broadcast = started_broadcast(telegram, 5)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION courier_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'counters refused'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER courier_test_refuse BEFORE UPDATE OF sent ON botapp_broadcast "
            "FOR EACH ROW WHEN (NEW.sent <> OLD.sent) EXECUTE FUNCTION courier_test_refuse()"
        )
    try:
        with pytest.raises(DatabaseError, match="counters refused"):
            run(send_broadcasts, telegram)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER courier_test_refuse ON botapp_broadcast")
            cursor.execute("DROP FUNCTION courier_test_refuse()")

    broadcast.refresh_from_db()
    assert broadcast.sent == BroadcastDelivery.objects.filter(status=Status.SENT).count() == 0
    clock.clock_advance(timedelta(minutes=6))
    reap_expired_claims()
    run(send_broadcasts, telegram)
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.interrupted) == (Broadcast.Status.DONE, 5, 0)
    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * 5  # delivered once, never again


def test_rows_handed_back_for_a_bug_make_the_job_run_fail_loudly_and_record_nothing_failed(telegram, public_url):
    """An exception that is not Telegram's answer: the run is *failed* with its traceback (the jobs
    page and the dashboard show it red), every row is still pending, none is recorded failed."""
    from scheduler.jobs.registry import job_run
    from scheduler.models import JobRun

    [met_user(telegram, telegram_id=72_000 + i) for i in range(3)]
    broadcast = BroadcastFactory(text="Join us", buttons="Join | https://t.me/+abc | joined")
    broadcast_start(broadcast=broadcast)
    public_url.PUBLIC_URL = ""
    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        with pytest.raises(RowsHandedBack):
            job_run("send_broadcasts", trigger="test", gateway=worker)
    finally:
        worker.stop()

    run = JobRun.objects.get(job="send_broadcasts")
    assert run.status == JobRun.Status.FAILED
    assert "RowsHandedBack: 3 row(s) handed back untouched" in run.error and "Traceback" in run.error
    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {Status.PENDING}
    broadcast.refresh_from_db()
    assert broadcast.failed == 0


def test_the_same_bug_three_runs_in_a_row_pauses_the_broadcast_until_an_operator_resumes_it(
    telegram, public_url, admin_client, plain_http
):
    """Rows go back untouched every run; after PAUSE_AFTER runs meeting the same unexpected error
    the broadcast is paused (its page and the dashboard say so) and no worker claims it; resumed
    once fixed, everyone left gets it once."""
    from botapp.services.broadcasts import PAUSE_AFTER

    operator = admin_client
    users = [met_user(telegram, telegram_id=73_000 + i) for i in range(3)]
    broadcast = BroadcastFactory(title="Join", text="Join us", buttons="Join | https://t.me/+abc | joined")
    broadcast_start(broadcast=broadcast)
    public_url.PUBLIC_URL = ""
    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        for run_ in range(PAUSE_AFTER):
            broadcast.refresh_from_db()
            assert broadcast.status != Broadcast.Status.PAUSED, run_
            with pytest.raises(RowsHandedBack):
                send_broadcasts(gateway=worker, batch_size=50)
        broadcast.refresh_from_db()
        assert broadcast.status == Broadcast.Status.PAUSED and broadcast.error_streak == PAUSE_AFTER
        assert "PUBLIC_URL" in broadcast.paused_reason
        assert send_broadcasts(gateway=worker, batch_size=50).processed == 0  # nobody claims a paused one

        page = operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk]))
        assert "Paused after the same unexpected error in 3 runs in a row" in page.content.decode()
        assert "paused: resume it on its page" in operator.get(reverse("admin:index")).content.decode()

        public_url.PUBLIC_URL = "https://courier.example.com"  # the operator fixes the cause
        resume = reverse("admin:botapp_broadcast_resume_sending", args=[broadcast.pk])
        assert "3 users have not got it yet" in operator.get(resume).content.decode()
        operator.post(resume)
        send_broadcasts(gateway=worker, batch_size=50)
    finally:
        worker.stop()
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.failed, broadcast.error_streak) == (Broadcast.Status.DONE, 3, 0, 0)
    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * 3


def test_another_error_or_a_sent_row_starts_the_count_again(telegram):
    from botapp.services.broadcasts import broadcast_handback_note, broadcasts_progress_note

    _, broadcast = started_broadcast(telegram, 1)
    assert not broadcast_handback_note(broadcast_id=broadcast.pk, error="KeyError: 'a'")
    assert not broadcast_handback_note(broadcast_id=broadcast.pk, error="KeyError: 'a'")
    assert not broadcast_handback_note(broadcast_id=broadcast.pk, error="TypeError: b")  # another: 1 again
    broadcast.refresh_from_db()
    assert broadcast.error_streak == 1
    broadcasts_progress_note(broadcast_ids=[broadcast.pk])
    broadcast.refresh_from_db()
    assert (broadcast.error_streak, broadcast.error_last, broadcast.status) == (0, "", Broadcast.Status.QUEUED)


def test_an_exception_after_telegram_accepted_a_send_records_it_sent_once_and_fails_the_run(telegram, monkeypatch):
    """A bug that strikes after Telegram delivered a group (here: reading its answers, as a kurigram
    upgrade changing their shape could): the run fails loudly, nothing is recorded as Telegram's
    refusal, and the group goes again with its random_ids: refused as repeats, recorded sent. Each
    user has the message once."""

    users, broadcast = started_broadcast(telegram, 6)
    answers_unreadable_once(monkeypatch)
    with pytest.raises(Exception):  # noqa: B017, PT011 - the run fails loudly, whatever the sweep wraps it in
        run(send_broadcasts, telegram)
    assert BroadcastDelivery.objects.filter(status__in=["failed", "interrupted"]).count() == 0
    assert BroadcastDelivery.objects.filter(retry_from__isnull=False).exists()  # to be sent again, same random_id
    run(send_broadcasts, telegram)
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.failed, broadcast.interrupted) == (Broadcast.Status.DONE, 6, 0, 0)
    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * 6  # delivered once each


def test_an_exception_reading_the_answers_of_a_batch_fails_the_run_and_sends_it_once(telegram, monkeypatch, settings):
    """The same bug when the worker sends in batches (a rate where a limiter grant is several
    sends, `work_many`) and it strikes the batch's last group: the run fails loudly (the group's
    rows were once recorded as Telegram's lost answers and the run said *ok*: issue 21's chaos
    run), the rows go again with their random_ids, and each user has the message once."""
    from botapp.telegram.limiter import send_batch_size
    from scheduler.jobs.registry import job_run
    from scheduler.models import JobRun

    settings.TELEGRAM_RATE = 300
    settings.TELEGRAM_RATE_HEADROOM = 1.0
    users, broadcast = started_broadcast(telegram, send_batch_size())  # one group: the last
    answers_unreadable_once(monkeypatch)
    worker = offline_gateway(telegram, peers=user_access_hash)
    try:
        with pytest.raises(RowsHandedBack, match="KeyError"):
            job_run("send_broadcasts", trigger="test", gateway=worker)
        run_ = JobRun.objects.get(job="send_broadcasts")
        assert run_.status == JobRun.Status.FAILED and "Traceback" in run_.error
        assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {Status.PENDING}
        assert not BroadcastDelivery.objects.filter(retry_from__isnull=True).exists()  # delivered: to go again
        send_broadcasts(gateway=worker)
    finally:
        worker.stop()
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent, broadcast.failed, broadcast.interrupted) == (
        Broadcast.Status.DONE,
        len(users),
        0,
        0,
    )
    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * len(users)
