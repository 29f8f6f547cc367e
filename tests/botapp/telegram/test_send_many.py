"""A worker's batched sends (`PyrogramGateway.send_many`): many messages in one MTProto container,
one limiter round trip for the batch, each item's own result. kurigram's real client against the
in-memory Telegram, which answers a container with one container."""

import collections
import threading
import time

import pytest
import redis
from django.conf import settings

from botapp.services.users import user_access_hash
from botapp.telegram.gateway import FloodWait, Media, PeerUnknown, SendItem, Sent, TgUser, UserBlocked
from botapp.telegram.limiter import BATCH_WINDOW, BULK, RedisLimiter, send_batch_size
from offline.telegram.clients import offline_gateway
from tests.conftest import answers_unreadable_once

pytestmark = pytest.mark.django_db


class BatchLimiter:
    """Grants `per_grant` slots at a time and records each grant and pause."""

    def __init__(self, per_grant=100):
        self.per_grant = per_grant
        self.grants = []
        self.pauses = []

    count_max = 100

    def acquire(self, chat_id=None, *, count=1, paid=False):
        self.grants.append([chat_id])
        return 0.0

    def acquire_many(self, chat_ids):
        granted = list(chat_ids[: self.per_grant])
        self.grants.append(granted)
        return len(granted)

    def pause(self, seconds, *, chat_id=None):
        self.pauses.append((seconds, chat_id))
        return seconds


@pytest.fixture
def users(chat):
    """Thirty users who wrote to the bot (runbot stored their access hashes)."""
    found = [TgUser(id=7100 + i, first_name=f"U{i}") for i in range(30)]
    for user in found:
        chat(user, "/help")
    return found


@pytest.fixture
def worker(telegram, users):
    limiter = BatchLimiter()
    gw = offline_gateway(telegram, peers=user_access_hash, limiter=limiter, sleep=lambda s: None)
    gw.counting = limiter
    yield gw
    gw.stop()


def test_thirty_texts_go_in_one_container_and_each_user_gets_theirs(telegram, users, worker):
    since, containers = len(telegram.calls), telegram.containers
    results = worker.send_many([SendItem(u.id, f"<b>Hello</b> {u.first_name}") for u in users])

    assert telegram.containers == containers + 1
    assert telegram.methods_called(since) == ["messages.SendMessage"] * 30  # no users.getUsers
    assert worker.counting.grants == [[u.id for u in users]]  # one limiter round trip
    for user, result in zip(users, results, strict=True):
        (message,) = telegram.bot_messages(user.id)[-1:]
        assert result == Sent(user.id, message.id)
        assert message.text == f"Hello {user.first_name}"


def test_each_item_gets_its_own_answer(telegram, users, worker):
    telegram.block(users[3].id)
    telegram.fail_next("FLOOD_WAIT_2", methods=["messages.SendMessage"], chat_id=users[5].id)
    items = [SendItem(u.id, "hi") for u in users[:8]] + [SendItem(999_999, "never met")]

    results = worker.send_many(items)

    assert isinstance(results[3], UserBlocked)
    assert isinstance(results[8], PeerUnknown)  # nothing sent: no access hash
    assert worker.counting.pauses == [(2, users[5].id)]  # the limiter's scope paused, the item asked again
    assert isinstance(results[5], Sent)
    assert [isinstance(r, Sent) for r in results] == [True, True, True, False, True, True, True, True, False]
    assert [len(telegram.bot_messages(u.id)) - 1 for u in users[:8]] == [1, 1, 1, 0, 1, 1, 1, 1]  # each once


def test_a_flood_wait_longer_than_the_worker_waits_is_that_items_result(telegram, users, worker):
    telegram.fail_next("FLOOD_WAIT_600", methods=["messages.SendMessage"], chat_id=users[0].id)
    results = worker.send_many([SendItem(u.id, "hi") for u in users[:3]])
    assert isinstance(results[0], FloodWait) and results[0].seconds == 600
    assert all(isinstance(r, Sent) for r in results[1:])


def test_media_buttons_and_protection_in_a_batch(telegram, users, worker):
    photo = telegram.file_id("photo", "cat.jpg")
    from botapp.telegram.gateway import Button

    items = [
        SendItem(users[0].id, "A <i>cat</i>", media=Media("photo", photo), buttons=[[Button("Open", url="https://example.com")]]),
        SendItem(users[1].id, "plain", protect=True),
    ]
    results = worker.send_many(items)

    assert all(isinstance(r, Sent) for r in results)
    cat = telegram.bot_messages(users[0].id)[-1]
    assert cat.media is not None and cat.media.kind == "photo" and cat.text == "A cat"
    assert [[b.text for b in row] for row in cat.buttons] == [["Open"]]
    assert telegram.bot_messages(users[1].id)[-1].protect


def test_a_grant_smaller_than_the_batch_sends_the_rest_in_further_containers(telegram, users):
    limiter = BatchLimiter(per_grant=7)
    gw = offline_gateway(telegram, peers=user_access_hash, limiter=limiter, sleep=lambda s: None)
    try:
        containers = telegram.containers
        results = gw.send_many([SendItem(u.id, "hi") for u in users])
    finally:
        gw.stop()
    assert all(isinstance(r, Sent) for r in results)
    assert [len(g) for g in limiter.grants] == [7, 7, 7, 7, 2]
    assert telegram.containers == containers + 5


def test_runbot_sends_a_batch_one_by_one(telegram, users):
    """runbot parses what it sends (kurigram keeps the messages): no container for it."""
    gw = offline_gateway(telegram, peers=user_access_hash, no_updates=False)
    try:
        containers = telegram.containers
        results = gw.send_many([SendItem(u.id, "hi") for u in users[:3]])
    finally:
        gw.stop()
    assert all(isinstance(r, Sent) for r in results)
    assert telegram.containers == containers


# --- the limiter's batch -------------------------------------------------------------------------


def test_the_bulk_lane_grants_the_slots_of_one_window_evenly_over_time(prefix):
    rate = 200.0  # 10 slots per 50 ms window
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        time.sleep(seconds)

    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix, lane=BULK, sleep=sleep)
    chats = list(range(1, 1001))
    granted, start = 0, time.monotonic()
    while granted < 200:
        n = lim.acquire_many(chats[granted : granted + 50])
        assert 1 <= n <= int(rate * BATCH_WINDOW) + 1
        granted += n
    # The rate holds over time: 200 slots take their time, however fast the caller asks...
    assert time.monotonic() - start >= 200 / rate - 2 * BATCH_WINDOW
    # ...and no more: the waits the limiter asked for add up to the rate's (a caller slowed down
    # by a busy machine is asked to wait less, never more).
    assert sum(slept) <= 200 / rate


def test_a_batch_is_reserved_a_window_before_it_is_due(prefix):
    """A sender asking while the next free slot is still a window ahead gets the whole batch
    reserved then, and sleeps until it: a late wake-up on a busy machine costs no slot (granting
    only the slots within a window of now gave one slot here, and a sender that slept until the
    slot was due lost its lateness on every batch: paid broadcasts reached 0.93 of the rate)."""
    rate = 1000.0  # a window of 20 ms: 20 slots
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        time.sleep(seconds)

    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix, lane=BULK, sleep=sleep)
    chats = list(range(1, 41))
    assert lim.acquire_many(chats[:20]) == 20
    assert lim.acquire_many(chats[20:]) == 20  # the next window's 20, right away
    assert 0 < slept[-1] <= BATCH_WINDOW  # and it waited for the first of them


def test_a_workers_threads_ask_for_slots_one_at_a_time(prefix):
    """The sending threads of one process wait for each other, not in a loop of Redis calls each:
    about two calls per batch (one "not yet", one grant), whatever the number of threads."""
    rate = 1000.0
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix, lane=BULK)
    calls, grants = [], []
    script = lim._acquire_many

    def counted(**kwargs):
        calls.append(1)
        return script(**kwargs)

    lim._acquire_many = counted
    todo = collections.deque(range(1, 401))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                batch = [todo.popleft() for _ in range(min(20, len(todo)))]
            if not batch:
                return
            n = lim.acquire_many(batch)
            with lock:
                grants.append(n)
                todo.extendleft(reversed(batch[n:]))  # not granted: asked again, as send_many does

    threads = [threading.Thread(target=loop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(grants) == 400
    assert len(grants) <= 400 / 20 + 8  # whole batches (a thread may get a part at the start)
    assert len(calls) <= 3 * 400 / 20  # 8 threads asking each in a loop: ~8 calls per batch


def test_a_chat_gets_its_burst_in_a_batch_and_no_more(prefix):
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=1000, prefix=prefix, lane=BULK)
    assert lim.acquire_many([42] * 6) == 3  # the private chat's burst; the 4th is a second away


def test_a_pause_holds_the_batch(prefix):
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=1000, prefix=prefix, lane=BULK)
    lim.pause(0.3)
    start = time.monotonic()
    assert lim.acquire_many([1, 2, 3]) == 3
    assert time.monotonic() - start >= 0.25


def test_batch_sizes_follow_the_rate():
    assert send_batch_size(28.8) == 1  # free broadcasts: one send at a time, as before
    assert send_batch_size(960) == 19  # paid: 1000/s x TELEGRAM_PAID_RATE_HEADROOM, 20 ms of it
    assert send_batch_size(100_000) == 50


def test_a_lost_answer_in_a_container_is_that_items_already_sent_and_sent_once(telegram, users, worker, monkeypatch):
    from pyrogram.session import Session

    from botapp.telegram.gateway import AlreadySent
    from offline.telegram.server import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    monkeypatch.setattr(Session, "RETRY_DELAY", 0.05)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"}, chat_id=users[2].id)

    results = worker.send_many([SendItem(u.id, "once") for u in users[:5]])

    assert isinstance(results[2], AlreadySent)  # asked again with the same random_id: Telegram refused the copy
    assert all(isinstance(r, Sent) for n, r in enumerate(results) if n != 2)
    assert [[m.text for m in telegram.bot_messages(u.id)[1:]] for u in users[:5]] == [["once"]] * 5


def test_redis_lost_midway_keeps_what_was_sent_and_gives_the_rest_the_error(telegram, users):
    """A batch that cannot go on must not lose what it sent: the caller hands back only the rest
    (handing back a sent item would send it twice)."""

    class DiesOnThirdGrant(BatchLimiter):
        def acquire_many(self, chat_ids):
            if len(self.grants) == 2:
                raise redis.ConnectionError("Connection reset by peer")
            return super().acquire_many(chat_ids)

    gw = offline_gateway(telegram, peers=user_access_hash, limiter=DiesOnThirdGrant(per_grant=7), sleep=lambda s: None)
    try:
        results = gw.send_many([SendItem(u.id, "hi") for u in users])
    finally:
        gw.stop()
    assert all(isinstance(r, Sent) for r in results[:14])
    assert all(isinstance(r, redis.ConnectionError) for r in results[14:])
    assert [len(telegram.bot_messages(u.id)) - 1 for u in users] == [1] * 14 + [0] * 16


def test_a_revoked_token_midway_keeps_what_was_sent(telegram, users):
    from botapp.telegram.gateway import BotUnauthorized

    class RevokesAfterTwoGrants(BatchLimiter):
        def acquire_many(self, chat_ids):
            if len(self.grants) == 2:
                telegram.revoke_token()
            return super().acquire_many(chat_ids)

    gw = offline_gateway(telegram, peers=user_access_hash, limiter=RevokesAfterTwoGrants(per_grant=7), sleep=lambda s: None)
    try:
        results = gw.send_many([SendItem(u.id, "hi") for u in users])
    finally:
        telegram.restore_token()
        gw.stop()
    assert all(isinstance(r, Sent) for r in results[:14])
    assert all(isinstance(r, BotUnauthorized) for r in results[14:])


def test_a_bug_reading_the_answers_of_the_last_group_is_no_answer_of_telegrams(telegram, users, worker, monkeypatch):
    """A bug after Telegram delivered the batch's last group (here reading its answers, as a
    kurigram upgrade could): keyed items get the bug, marked maybe delivered (the sweep sends them
    again with their random_ids and fails the run), never a TelegramError the sweep would record as
    Telegram's lost answer; an item without a key cannot go again: OutcomeUnknown, at most once."""
    from botapp.telegram.gateway import OutcomeUnknown, TelegramError

    struck = answers_unreadable_once(monkeypatch)
    results = worker.send_many([SendItem(u.id, "keyed", key=f"k{u.id}") for u in users[:4]])
    assert [(type(r).__name__, getattr(r, "maybe_delivered", False)) for r in results] == [("InFlightError", True)] * 4
    assert not any(isinstance(r, TelegramError) for r in results)
    assert isinstance(results[0].__cause__, KeyError)

    struck.clear()
    results = worker.send_many([SendItem(u.id, "no key") for u in users[4:6]])
    assert [type(r) for r in results] == [OutcomeUnknown] * 2 and not any(r.repeatable for r in results)
