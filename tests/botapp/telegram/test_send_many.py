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
from botapp.telegram.retry import ADMISSIONS_LAPSED_MAX, ADMITTED_FOR
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

    def pause(self, seconds, *, chat_id=None, paid=False):
        self.pauses.append((seconds, chat_id, paid))
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
    assert isinstance(results[8], PeerUnknown)  # addressed by id alone, Telegram said PEER_ID_INVALID
    assert worker.counting.pauses == [(2, users[5].id, False)]  # the limiter's scope paused, the item asked again
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


class StallingLimiter(BatchLimiter):
    """Grants as BatchLimiter; the first `stalls` groups it admits are written only after their
    admission ran out (the thread or the loop stalled in between: a negative bound)."""

    def __init__(self, gateway_of, stalls):
        super().__init__()
        self.gateway_of, self.stalls = gateway_of, stalls

    def acquire_many(self, chat_ids):
        stalled = len(self.grants) < self.stalls
        self.gateway_of().admitted_for = -1.0 if stalled else ADMITTED_FOR
        return super().acquire_many(chat_ids)


def _stalling_gateway(telegram, stalls):
    holder = {}
    limiter = StallingLimiter(lambda: holder["gw"], stalls)
    holder["gw"] = gw = offline_gateway(telegram, peers=user_access_hash, limiter=limiter, sleep=lambda s: None)
    return gw, limiter


def test_a_group_not_written_in_time_after_its_admission_is_admitted_again(telegram, users):
    """Telegram counts a send when it arrives, the limiter's windows when they admit it: a group
    that would be written after its admission ran out never leaves, and goes at its next
    admission, each message once, no attempt spent."""
    from botapp.metrics import ADMISSIONS_LAPSED

    gw, limiter = _stalling_gateway(telegram, stalls=2)
    try:
        since, lapsed = len(telegram.calls), ADMISSIONS_LAPSED.labels("bulk")._value.get()
        results = gw.send_many([SendItem(u.id, "hi") for u in users[:5]])
        assert all(isinstance(r, Sent) for r in results)
        assert len(limiter.grants) == 3  # two admissions lapsed, the third wrote
        assert telegram.methods_called(since) == ["messages.SendMessage"] * 5  # nothing left before
        assert [len(telegram.bot_messages(u.id)) - 1 for u in users[:5]] == [1] * 5
        assert ADMISSIONS_LAPSED.labels("bulk")._value.get() == lapsed + 2
    finally:
        gw.stop()


def test_a_machine_too_slow_for_the_bound_still_sends(telegram, users):
    """Admission after admission lapses: after ADMISSIONS_LAPSED_MAX the batch goes unbounded."""
    gw, limiter = _stalling_gateway(telegram, stalls=10**6)
    try:
        results = gw.send_many([SendItem(u.id, "hi") for u in users[:3]])
        assert all(isinstance(r, Sent) for r in results)
        assert len(limiter.grants) == ADMISSIONS_LAPSED_MAX + 1
        assert [len(telegram.bot_messages(u.id)) - 1 for u in users[:3]] == [1] * 3
    finally:
        gw.stop()


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


def test_a_sender_that_wakes_late_loses_no_slot(prefix):
    """A bulk sender sleeps until its slot is due and asks for it then; one that wakes late (a
    busy machine: here every sleep overruns by 10 ms) still has it, and the rate holds. Taking
    the slot from the time it asked (GCRA's max(slot, now)) lost the lateness on every send:
    40 sends at 28.8/s took 1.79 s instead of 1.35 s (and paid broadcasts reached 0.93 of the rate)."""
    rate, sends = 28.8, 40
    lim = RedisLimiter(
        redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix, lane=BULK,
        sleep=lambda seconds: time.sleep(seconds + 0.01),
    )  # fmt: skip
    start = time.monotonic()
    for chat_id in range(1, sends + 1):
        assert lim.acquire_many([chat_id]) == 1
    assert time.monotonic() - start < (sends - 1) / rate + 0.2


class CountingRedis(redis.Redis):
    """The real Redis client, counting the commands it sends: every round trip a limiter makes
    (its scripts, and any GET or TIME besides)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = 0
        self._count_lock = threading.Lock()

    def execute_command(self, *args, **options):
        with self._count_lock:
            self.commands += 1
        return super().execute_command(*args, **options)


def worker_sends(lim, sends, *, batch, threads=8, one_by_one=False):
    """`sends` private chats sent to as a worker's sending threads do: `batch` at a time through
    `acquire_many` (send_many), or one `acquire` each (a job without batches: `_call`), what is
    not granted asked for again. Returns how many grants it took."""
    todo = collections.deque(range(1, sends + 1))
    lock, grants = threading.Lock(), []

    def loop():
        while True:
            with lock:
                chunk = [todo.popleft() for _ in range(min(batch, len(todo)))]
            if not chunk:
                return
            if one_by_one:
                lim.acquire(chunk[0])
                n = 1
            else:
                n = lim.acquire_many(chunk)
            with lock:
                grants.append(n)
                todo.extendleft(reversed(chunk[n:]))  # not granted: asked again, as send_many does

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert sum(grants) == sends
    return len(grants)


@pytest.mark.parametrize("one_by_one", [False, True], ids=["acquire_many", "acquire"])
def test_at_the_free_rate_a_send_costs_one_redis_call(prefix, one_by_one):
    """A worker's threads ask for a slot when it is due (the time the last grant named), and the
    slot due now is admitted by the windows in the same trip: one Redis call per send. Asking
    again in a loop until a slot came within reach, then the windows, cost 3.0 calls per send
    here (and about 8 in a deployment, with replies competing)."""
    client = CountingRedis.from_url(settings.REDIS_URL)
    lim = RedisLimiter(client, rate=28.8, allowed=30, span=1.04, prefix=prefix, lane=BULK)  # as from_settings
    sends = 100
    worker_sends(lim, sends, batch=1, one_by_one=one_by_one)
    assert client.commands / sends <= 1.25, client.commands


def test_at_the_paid_rate_a_batch_costs_one_redis_call(prefix):
    """The threads of one worker ask one at a time, each when the next batch is due: one call per
    batch of a window's slots (1000/s: 17), whatever the number of threads. A "not yet" and then
    the grant cost two; eight threads asking each in a loop, eight."""
    client = CountingRedis.from_url(settings.REDIS_URL)
    lim = RedisLimiter(client, rate=1000, prefix=prefix, lane=BULK)
    batch = send_batch_size(1000)
    assert batch == 17
    grants = worker_sends(lim, 400, batch=batch)
    assert grants <= 400 / batch + 8  # whole batches (a thread may get a part at the start)
    assert client.commands <= 1.25 * 400 / batch, client.commands


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
    assert send_batch_size(28.8) == 2  # free broadcasts: pairs (BATCH_MIN)
    assert send_batch_size(960) == 16  # paid: 1000/s x TELEGRAM_PAID_RATE_HEADROOM, 17 ms of it
    assert send_batch_size(100_000) == 50


def test_a_lost_answer_in_a_container_is_that_items_already_sent_and_sent_once(telegram, users, worker, monkeypatch):
    from pyrogram.session import Session

    from botapp.telegram.gateway import AlreadySent
    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    monkeypatch.setattr(Session, "RETRY_DELAY", 0.05)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"}, chat_id=users[2].id)

    results = worker.send_many([SendItem(u.id, "once") for u in users[:5]])

    assert isinstance(results[2], AlreadySent)  # asked again with the same random_id: Telegram refused the copy
    assert all(isinstance(r, Sent) for n, r in enumerate(results) if n != 2)
    assert [[m.text for m in telegram.bot_messages(u.id)[1:]] for u in users[:5]] == [["once"]] * 5


def test_a_lost_answer_is_asked_again_only_once_the_limiter_admits_it(telegram, users, worker, monkeypatch):
    """A message Telegram left unanswered goes again with the same bytes (the same random_id, so
    Telegram refuses the copy), after the limiter admitted it again: kurigram's own retries went
    out past the windows."""
    from pyrogram.session import Session

    from botapp.telegram.gateway import AlreadySent
    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"}, chat_id=users[2].id)

    results = worker.send_many([SendItem(u.id, "once", key=f"k{u.id}") for u in users[:5]])

    assert isinstance(results[2], AlreadySent)
    assert worker.counting.grants == [[u.id for u in users[:5]], [users[2].id]]
    assert [[m.text for m in telegram.bot_messages(u.id)[1:]] for u in users[:5]] == [["once"]] * 5


@pytest.mark.parametrize("error", ["INTERNAL", "Timeout"])
def test_telegrams_own_trouble_is_asked_again_through_the_limiter(telegram, users, worker, error):
    """500 INTERNAL, -503 Timeout: Telegram may or may not have done it. Asked again as kurigram
    would (its RETRY_DELAY, the same random_id), each time admitted by the limiter; after
    kurigram's MAX_RETRIES in all, the outcome is unknown (repeatable: the item has a key)."""
    from pyrogram.session import Session

    from botapp.telegram.gateway import OutcomeUnknown
    from botapp.telegram.retry import ASK_AGAIN_MAX

    code = -503 if error == "Timeout" else 500
    waits = []
    worker.sleep = waits.append
    telegram.fail_next(error, methods={"messages.SendMessage"}, chat_id=users[1].id, times=2, code=code)
    telegram.fail_next(error, methods={"messages.SendMessage"}, chat_id=users[3].id, times=1000, code=code)

    results = worker.send_many([SendItem(u.id, "hi", key=f"k{u.id}") for u in users[:5]])

    assert [type(r) for r in results] == [Sent, Sent, Sent, OutcomeUnknown, Sent]
    assert results[3].repeatable
    grants = worker.counting.grants
    assert grants[0] == [u.id for u in users[:5]]
    assert sorted(grants[1]) == [users[1].id, users[3].id] and sorted(grants[2]) == [users[1].id, users[3].id]
    assert grants[3:] == [[users[3].id]] * (ASK_AGAIN_MAX - 3)  # every ask admitted
    assert waits == [Session.RETRY_DELAY] * (ASK_AGAIN_MAX - 1)
    assert [len(telegram.bot_messages(u.id)) - 1 for u in users[:5]] == [1, 1, 1, 0, 1]


def test_a_send_whose_write_failed_is_sent_again_only_once_the_limiter_admits_it(telegram, users, worker):
    """The connection refused the write (a group of one): nothing left, and it goes again through
    the limiter like any transient failure, not through kurigram's own unadmitted retries."""
    connection = worker.client.session.connection
    write = connection.send

    async def refused_once(data, *args, **kwargs):
        connection.send = write
        raise BrokenPipeError("the connection is gone")

    connection.send = refused_once
    results = worker.send_many([SendItem(users[0].id, "again", key="k-write")])

    assert isinstance(results[0], Sent)
    assert worker.counting.grants == [[users[0].id], [users[0].id]]
    assert [m.text for m in telegram.bot_messages(users[0].id)[1:]] == ["again"]


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
