"""A row's failure is that row's result: nothing one row raises discards the rest of its batch."""

from datetime import timedelta

import pytest
import redis

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, PendingDeletion, TelegramUser
from botapp.services.broadcasts import broadcast_start
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import BotUnauthorized
from botapp.telegram.server.offline import offline_gateway
from scheduler.jobs.broadcast_send import send_broadcasts
from scheduler.jobs.deletions import delete_due_messages
from tests.factories import BroadcastFactory, PendingDeletionFactory, met_user

pytestmark = pytest.mark.django_db(transaction=True)  # the sweeps' pool threads read committed rows
Status = BroadcastDelivery.Status


@pytest.fixture(autouse=True)
def _no_wake_up(sender_wakeups):
    pass  # no Celery worker here: wake-ups are recorded, not published


class BlipLimiter:
    """The shared limiter, whose Redis drops the connection on the `nth` call."""

    def __init__(self, nth):
        self.calls, self.nth = 0, nth

    def acquire(self, chat_id=None):
        self.calls += 1
        if self.calls == self.nth:
            raise redis.ConnectionError("Connection reset by peer")
        return 0.0

    def pause(self, seconds, *, chat_id=None):
        return seconds


def started_broadcast(telegram, n):
    users = [met_user(telegram, telegram_id=50_000 + i) for i in range(n)]
    broadcast = BroadcastFactory(text="Hello")
    broadcast_start(broadcast=broadcast)
    return users, broadcast


def test_a_redis_blip_hands_one_broadcast_row_back_and_records_the_rest(telegram):
    users, broadcast = started_broadcast(telegram, 20)
    worker = offline_gateway(telegram, peers=user_access_hash, limiter=BlipLimiter(nth=7))
    try:
        outcome = send_broadcasts(gateway=worker, batch_size=50)
    finally:
        worker.stop()

    rows = dict(BroadcastDelivery.objects.values_list("user__telegram_id", "status"))
    assert sorted(rows.values()).count(Status.SENT) == 19
    (left,) = [uid for uid, status in rows.items() if status == Status.PENDING]  # untouched: goes next run
    assert telegram.bot_messages(left) == []
    assert sum(len(telegram.bot_messages(u.telegram_id)) for u in users) == 19
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.failed, broadcast.status) == (19, 0, Broadcast.Status.SENDING)
    assert outcome.processed == 19

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

    real = autodelete.deleted_notice_send

    def broken_for_one(*, gateway, chat_id, share_id, text):
        if chat_id == users[2].telegram_id:
            raise ValueError("a bug building the notice")
        return real(gateway=gateway, chat_id=chat_id, share_id=share_id, text=text)

    monkeypatch.setattr("botapp.services.autodelete.deleted_notice_send", broken_for_one)
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
