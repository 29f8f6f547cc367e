"""The global send limiter, against real Redis, across real processes."""

import multiprocessing
import time

import pytest
import redis
from django.conf import settings

from botapp.telegram.gateway import FloodWait, SendItem, Sent, TgUser, TransientError, UserBlocked
from botapp.telegram.limiter import BULK, REPLY, RedisLimiter
from offline.telegram.clients import offline_gateway


def limiter(prefix, rate):
    return RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix)


def _sender(redis_url, prefix, rate, count, chat_base, out):
    lim = RedisLimiter(redis.Redis.from_url(redis_url), rate=rate, prefix=prefix)
    stamps = []
    for i in range(count):
        lim.acquire(chat_base + i)  # a different private chat each time: only the global rate binds
        stamps.append(time.time())
    out.put(stamps)


def max_in_window(stamps, window):
    stamps = sorted(stamps)
    best, j = 0, 0
    for i, t in enumerate(stamps):
        while stamps[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


@pytest.mark.slow
def test_two_processes_together_never_exceed_the_rate(prefix):
    rate, per_process = 30, 45
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_sender, args=(settings.REDIS_URL, prefix, rate, per_process, 10_000 * (n + 1), out)) for n in range(2)
    ]
    started = time.time()
    for p in procs:
        p.start()
    stamps = out.get(timeout=30) + out.get(timeout=30)
    for p in procs:
        p.join(10)
    elapsed = max(stamps) - started

    # 90 sends at 30/s take at least 3 s. Slots are exactly 1/rate apart; a sender that wakes late
    # (a busy CI machine) can land next to a later slot, hence a small allowance. Without the shared
    # limiter all 90 would go in the first fraction of a second.
    assert elapsed >= (2 * per_process - 1) / rate - 0.05
    assert max_in_window(stamps, 1.0) <= rate * 1.1 + 1
    assert max_in_window(stamps, 2.0) <= 2 * rate * 1.05 + 1


def _late_sender(redis_url, prefix, count, chat_base, out):
    """Paced like a worker (28.8/s of 30 allowed), but waking up to 0.3 s late: bunches."""
    import random

    lim = RedisLimiter(
        redis.Redis.from_url(redis_url), rate=28.8, allowed=30, span=1.04, prefix=prefix,
        sleep=lambda s: time.sleep(s + random.uniform(0, 0.3)),
    )  # fmt: skip
    stamps = []
    for i in range(count):
        lim.acquire(chat_base + i)
        stamps.append(time.time())
    out.put(stamps)


@pytest.mark.slow
def test_late_senders_bunch_but_no_second_ever_holds_more_than_telegram_allows(prefix):
    """Telegram counts any second when requests arrive: what a late wake-up bunches, the window
    holds back (the stamps are taken after the call is admitted; 0.1 s is left for this machine)."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_late_sender, args=(settings.REDIS_URL, prefix, 45, 10_000 * (n + 1), out)) for n in range(2)]
    for p in procs:
        p.start()
    stamps = out.get(timeout=60) + out.get(timeout=60)
    for p in procs:
        p.join(10)
    assert max_in_window(stamps, 0.94) <= 30


def test_the_window_holds_a_call_until_the_span_has_room(prefix):
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=1000, allowed=5, span=0.3, prefix=prefix)
    start = time.monotonic()
    for i in range(5):
        lim.acquire(100 + i)
    assert time.monotonic() - start < 0.25
    lim.acquire(200)
    assert time.monotonic() - start >= 0.28  # the first five had to leave the span


def test_a_call_of_ten_messages_takes_ten_slots_and_goes_at_the_last(prefix):
    slept = []
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=100, prefix=prefix, sleep=slept.append)
    first = lim.acquire(count=10)
    second = lim.acquire()
    assert 0.08 < first <= 0.09 and 0.09 < second <= 0.1, (first, second)


def test_with_paid_broadcasts_calls_without_the_flag_keep_to_the_free_rate(prefix):
    slept = []
    lim = RedisLimiter(
        redis.Redis.from_url(settings.REDIS_URL), rate=960, free_rate=28.8, prefix=prefix, sleep=slept.append
    )  # fmt: skip
    paid = [lim.acquire(paid=True) for _ in range(10)]
    assert max(paid) < 0.02  # a thousandth of a second apart
    free = [lim.acquire() for _ in range(10)]
    assert free[-1] > 8 / 28.8  # a 28.8th of a second apart, however much paid room is left


def test_a_call_carries_at_most_half_a_window_of_the_tightest_budget(prefix):
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert RedisLimiter(client, rate=960, allowed=1000, free_rate=28.8, free_allowed=30, prefix=prefix).count_max == 15
    assert RedisLimiter(client, rate=960, allowed=1000, prefix=prefix).count_max == 500


def test_one_private_chat_gets_a_short_burst_then_one_call_per_second(prefix):
    slept = []  # the waits the limiter asks for, not taken: each call comes at once
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=1000, prefix=prefix, sleep=slept.append)
    waits = [lim.acquire(555) for _ in range(5)]
    assert max(waits[:3]) < 0.01  # a reply of three messages goes at once (1 ms apart: the global rate)
    # then one per second: the 4th call's slot is a second after the first, the 5th's two (less
    # whatever time went by between the calls)
    assert 0.5 < waits[3] <= 1.0 and 1.5 < waits[4] <= 2.0, waits


def test_a_flood_wait_seen_by_one_sender_pauses_every_sender(prefix):
    first, second = limiter(prefix, 1000), limiter(prefix, 1000)
    first.pause(1.5)
    start = time.monotonic()
    second.acquire()
    assert time.monotonic() - start >= 1.4
    assert second.paused_for() <= 0


def test_a_pause_never_shortens_a_longer_one(prefix):
    lim = limiter(prefix, 30)
    lim.pause(5)
    assert lim.pause(1) > 4


def lane(prefix, rate, name):
    return RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=rate, prefix=prefix, lane=name)


def test_a_reply_is_not_queued_behind_a_saturating_broadcast(prefix):
    """Bulk senders keep the rate busy; a reply still gets a slot within about one interval."""
    import threading

    rate = 20.0
    stop, saturated, taken = threading.Event(), threading.Event(), []

    def broadcast():
        bulk = lane(prefix, rate, BULK)
        while not stop.is_set():
            bulk.acquire(9_000_000 + threading.get_ident() % 1000)
            taken.append(1)
            if len(taken) >= rate:
                saturated.set()

    senders = [threading.Thread(target=broadcast) for _ in range(6)]  # far more demand than the rate
    for t in senders:
        t.start()
    try:
        assert saturated.wait(60), "the bulk senders never took a second's worth of slots"
        replies = lane(prefix, rate, REPLY)
        waits = []
        for i in range(5):
            waits.append(replies.acquire(1000 + i))  # how long the limiter made the reply wait for its slot
            time.sleep(0.2)  # replies at moments of their own, not queued behind each other
    finally:
        stop.set()
        for t in senders:
            t.join(5)
    assert not [t for t in senders if t.is_alive()]
    # A queue of six bulk senders would make every reply wait about 6/rate.
    assert sorted(waits)[len(waits) // 2] < 2 / rate, waits


def test_a_reply_is_paced_among_replies_not_behind_the_pair_a_broadcast_reserved(prefix):
    """At the free rate a worker takes its slots in pairs (two intervals reserved at once); a reply
    right after does not wait for them, and the broadcast's next pair moves back by its slot."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    bulk = RedisLimiter(client, rate=28.8, prefix=prefix, lane=BULK, sleep=lambda s: None)
    reply = RedisLimiter(client, rate=28.8, prefix=prefix, lane=REPLY, sleep=lambda s: None)
    interval = 1 / 28.8
    assert bulk.acquire_many([9001, 9002]) == 2  # slots now and one interval on, sent together
    reserved = float(client.get(f"{prefix}:global"))  # where the broadcast's next slot is
    assert reply.acquire(9101) < 0.01  # not two intervals behind the pair: at once
    assert reply.acquire(9102) <= interval + 0.001  # the next reply: one interval after the first
    # The shared queue moved on by the replies' two slots: the broadcast's next pair comes after them.
    assert float(client.get(f"{prefix}:global")) - reserved == pytest.approx(2 * interval, abs=1e-5)


def test_a_reply_waiting_for_the_windows_gets_the_first_place_that_frees(prefix):
    """A broadcast keeps the windows full. A reply told to wait for a place registers, and a bulk
    call asking meanwhile is left the place that frees first: it waits for the one after."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    figures = dict(rate=10, allowed=4, span=0.5, prefix=prefix, sleep=lambda s: None)
    bulk = RedisLimiter(client, lane=BULK, **figures)
    reply = RedisLimiter(client, lane=REPLY, **figures)
    log, waiting = f"{prefix}:window", f"{prefix}:window:waiting"

    def window(limiter, who):  # WINDOW as the limiter asks it, for one message
        keys, args = limiter._windows(1, False, who)  # noqa: SLF001
        return float(limiter._window(keys=keys, args=args))  # noqa: SLF001

    # The window full: four sends a tenth of a second apart, the last just now (written as WINDOW
    # logs them, by Redis' clock: no waiting for time to pass).
    seconds, micros = client.time()
    now = seconds + micros / 1e6
    client.rpush(log, *(f"{now - 0.3 + 0.1 * n:.6f} 1" for n in range(4)))
    client.set(f"{log}:sum", 4)

    def redis_now() -> float:
        seconds, micros = client.time()
        return seconds + micros / 1e6

    # Each wait counts from Redis' clock when its script ran, between the readings around the two
    # calls: the instants the places free are compared, not the waits (on a busy machine the
    # second call comes milliseconds after the first).
    t0 = redis_now()
    reply_wait = window(reply, "r1")  # the first place frees when the oldest send leaves the span
    assert 0.1 < reply_wait <= 0.2
    bulk_wait = window(bulk, "-")
    t2 = redis_now()
    # The second place, not the first: it frees a tenth of a second after the reply's.
    apart_least, apart_most = bulk_wait - reply_wait, (t2 + bulk_wait) - (t0 + reply_wait)
    assert apart_least - 0.001 <= 0.1 <= apart_most + 0.001, (apart_least, apart_most)
    (who, until), *others = client.zrange(waiting, 0, -1, withscores=True)
    seconds, micros = client.time()
    # Forgotten 50 ms after its wait if the reply never comes back (bulk calls get the place then).
    assert who == b"r1" and not others and until - (seconds + micros / 1e6) <= reply_wait + 0.05
    client.lpop(log)  # the oldest send leaves the span, as if its time had passed
    client.set(f"{log}:sum", 3)
    assert window(bulk, "-") > 0  # the freed place is the waiting reply's
    assert window(reply, "r1") == 0  # and it takes it, and no longer waits
    assert client.zcard(waiting) == 0


def test_a_broadcast_flood_wait_pauses_bulk_only_and_a_reply_flood_wait_pauses_everyone(prefix):
    bulk, reply = lane(prefix, 50, BULK), lane(prefix, 50, REPLY)
    bulk.pause(2)
    assert bulk.paused_for() > 1.5 and reply.paused_for() <= 0
    assert reply.acquire() == 0  # at once
    reply.pause(1)
    assert bulk.paused_for() > 1.5  # the longer bulk pause still holds
    assert reply.paused_for() > 0.5


def test_a_flood_wait_on_a_chat_paced_beyond_its_burst_pauses_that_chat_only(prefix):
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=100, prefix=prefix, sleep=lambda s: None)
    for _ in range(4):
        lim.acquire(4242)  # a burst of three, and a fourth paced a second on
    lim.pause(3, chat_id=4242)  # the chat is being paced: its own limit
    assert lim.paused_for() <= 0
    assert lim.acquire(5151) < 0.5  # another chat goes at once (after the sends' slots)
    for _ in range(3):
        lim.acquire(6161)  # a file answer: two copies and the notice, within the chat's burst
    lim.pause(2, chat_id=6161)  # refused: a budget's limit, not the chat's
    assert lim.paused_for() > 1.5


def paid_lanes(prefix, **options):
    """A worker's and runbot's limiters with paid broadcasts on (from_settings' figures)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    figures = dict(rate=960, allowed=1000, free_rate=28.8, free_allowed=30, span=1.04, prefix=prefix, **options)
    return RedisLimiter(client, lane=BULK, **figures), RedisLimiter(client, lane=REPLY, **figures)


def test_with_paid_broadcasts_a_refused_reply_pauses_the_free_budget_and_paid_sends_go_on(prefix):
    bulk, reply = paid_lanes(prefix)
    reply.pause(2)  # a reply (no paid flag) refused: the free 30/s were spent
    assert reply.paused_for() > 1.5 and bulk.paused_for() > 1.5  # every call without the flag waits
    assert bulk.paused_for(paid=True) <= 0
    assert bulk.acquire(7001, paid=True) < 0.1  # a worker's paid send goes on at once
    start = time.monotonic()
    assert bulk.acquire_many([7002, 7003]) == 2  # and its paid batches (a worker's sends carry the flag)
    assert time.monotonic() - start < 0.5


def test_with_paid_broadcasts_a_refused_paid_send_pauses_paid_sends_only(prefix):
    bulk, reply = paid_lanes(prefix)
    bulk.pause(1, paid=True)  # the paid budget (1000/s) was spent
    assert bulk.paused_for(paid=True) > 0.8
    assert reply.paused_for() <= 0 and bulk.paused_for() <= 0
    assert reply.acquire(7101) < 0.1  # a reply goes at once
    assert bulk.acquire(7102) < 0.1  # and so does a worker's call without the flag (a deletion)
    start = time.monotonic()
    assert bulk.acquire_many([7103]) == 1  # a paid batch waits the pause out
    assert time.monotonic() - start >= 0.8


def test_with_paid_broadcasts_a_workers_refused_free_call_pauses_its_free_calls_only(prefix):
    bulk, reply = paid_lanes(prefix)
    bulk.pause(2)  # a worker's deletion refused: the free budget, in the bulk lane (as without paid broadcasts)
    assert bulk.paused_for() > 1.5
    assert reply.paused_for() <= 0 and bulk.paused_for(paid=True) <= 0


class Recorder:
    def __init__(self):
        self.acquired, self.paused, self.paid = [], [], []

    count_max = 100

    def acquire(self, chat_id=None, *, count=1, paid=False):
        self.acquired.append(chat_id)
        return 0.0

    def pause(self, seconds, *, chat_id=None, paid=False):
        self.paused.append(seconds)
        self.paid.append(paid)
        return seconds


USER = TgUser(id=7, first_name="Gus")


@pytest.fixture
def limited(telegram):
    """limited(limiter, **options): a worker's PyrogramGateway on the in-memory Telegram, pacing its
    calls with `limiter`. User 7 has written to the bot; `peers` hands out the access hash runbot
    would have stored for them."""
    telegram.user_sends(USER, "/start")
    made = []

    def make(limiter, **options):
        gateway = offline_gateway(telegram, limiter=limiter, peers=lambda user_id: telegram.users[user_id].access_hash, **options)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.stop()


def scripted(gateway, name, *failures):
    """The gateway's request path `name` (its `_invoke`: one request on the wire) raises `failures`
    (kurigram's own exceptions) one per call, then does its real work. Returns the list of calls."""
    real, pending, calls = getattr(gateway, name), list(failures), []

    async def method(*args, **kwargs):
        calls.append(args)
        if pending:
            raise pending.pop(0)
        return await real(*args, **kwargs)

    setattr(gateway, name, method)
    return calls


def test_gateway_pauses_everyone_and_retries_a_short_flood_wait(telegram, limited):
    lim, sleeps = Recorder(), []
    gateway = limited(lim, max_flood_wait=60, sleep=sleeps.append)
    telegram.fail_next("FLOOD_WAIT_3", methods={"messages.SendMessage"})
    assert gateway.send_text(7, "hi") == Sent(7, telegram.bot_messages(7)[0].id)
    assert [m.text for m in telegram.bot_messages(7)] == ["hi"]
    assert lim.paused == [3] and lim.acquired == [7, 7]


def test_gateway_reports_a_long_flood_wait(telegram, limited):
    lim = Recorder()
    gateway = limited(lim, max_flood_wait=60)
    telegram.fail_next("FLOOD_WAIT_600", methods={"messages.SendMessage"})
    with pytest.raises(FloodWait):
        gateway.send_text(7, "hi")
    assert lim.paused == [600]


def test_a_free_flood_wait_through_the_gateway_leaves_paid_sends_unpaused(telegram, limited, prefix):
    """runbot's gateway (no paid flag) tells the limiter its refused call was free."""
    bulk, reply = paid_lanes(prefix)
    gateway = limited(reply, max_flood_wait=1)
    telegram.fail_next("FLOOD_WAIT_5", methods={"messages.SendMessage"})
    with pytest.raises(FloodWait):
        gateway.send_text(7, "hi")
    assert reply.paused_for() > 4 and bulk.paused_for() > 4
    assert bulk.paused_for(paid=True) <= 0


@pytest.mark.parametrize("batch", [True, False], ids=["send_many", "send_text"])
def test_a_paid_flood_wait_through_the_gateway_leaves_free_sends_unpaused(telegram, limited, prefix, batch):
    """A worker's gateway (paid broadcasts: every send carries the flag) tells the limiter its
    refused send was paid, in a batch (`send_many`) or alone (`_call`)."""
    bulk, reply = paid_lanes(prefix)
    gateway = limited(bulk, max_flood_wait=1, paid=True)
    telegram.fail_next("FLOOD_WAIT_5", methods={"messages.SendMessage"})
    if batch:
        (result,) = gateway.send_many([SendItem(7, "hi")])
        assert isinstance(result, FloodWait)
    else:
        with pytest.raises(FloodWait):
            gateway.send_text(7, "hi")
    assert bulk.paused_for(paid=True) > 4
    assert reply.paused_for() <= 0 and bulk.paused_for() <= 0


def test_transient_errors_back_off_exponentially_three_attempts_at_most(telegram, limited):
    # Transient: the request never reached Telegram (the connection was down), so sending again is safe.
    sleeps = []
    gateway = limited(Recorder(), sleep=sleeps.append)
    calls = scripted(gateway, "_invoke", ConnectionError("lost"), ConnectionError("lost"), ConnectionError("lost"))
    with pytest.raises(TransientError):
        gateway.send_text(7, "hi")
    assert len(calls) == 3 and sleeps == [0.5, 1.0]
    assert telegram.bot_messages(7) == []

    gateway = limited(Recorder(), sleep=sleeps.append)
    scripted(gateway, "_invoke", ConnectionError("lost"))
    assert gateway.send_text(7, "hi") == Sent(7, telegram.bot_messages(7)[0].id)
    assert [m.text for m in telegram.bot_messages(7)] == ["hi"]


def test_blocked_users_are_never_retried(telegram, limited):
    gateway = limited(Recorder())
    telegram.block(7)
    with pytest.raises(UserBlocked):
        gateway.send_text(7, "hi")
    assert telegram.count("messages.SendMessage", chat_id=7) == 1


def test_gateway_deletes_in_chunks_one_limiter_slot_per_call(telegram, limited):
    lim = Recorder()
    gateway = limited(lim)
    ids = [gateway.send_text(7, str(i)).message_id for i in range(250)]
    lim.acquired.clear()
    calls = len(telegram.calls)
    assert gateway.delete_messages(7, ids) == 250
    assert lim.acquired == [None, None, None]  # one slot per Telegram call
    assert telegram.methods_called(since=calls) == ["messages.DeleteMessages"] * 3


def dead_redis():
    """A Redis nobody listens on: connections are refused at once."""
    return redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, socket_timeout=0.5, retry=None)


class StoppedClock:
    """The limiter's own clock, moved only by the waits it asks for: its pacing seen without waiting."""

    def __init__(self):
        self.now, self.slept = 1000.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_with_redis_down_replies_go_on_paced_by_the_process_and_bulk_sends_stop():
    clock = StoppedClock()
    replies = RedisLimiter(dead_redis(), rate=30, lane=REPLY, sleep=clock.sleep, clock=clock)
    for i in range(6):
        replies.acquire(7000 + i)
    assert clock.slept == pytest.approx([0.2] * 5)  # the fallback's 5/s, not Telegram's 30/s
    replies.pause(1)  # a FloodWait still pauses this process
    replies.acquire(7006)
    assert clock.slept[-1] == pytest.approx(1.0)
    with pytest.raises(redis.ConnectionError):
        RedisLimiter(dead_redis(), rate=30, lane=BULK).acquire(7100)


@pytest.mark.django_db
def test_runbot_answers_users_while_redis_is_down(telegram, shortener):
    from botapp.bot.router import SORRY, Router
    from botapp.services.users import user_access_hash
    from offline.telegram.clients import OfflineBot

    bot = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset(), shortener=shortener),
        peers=user_access_hash,
        limiter=RedisLimiter(dead_redis(), rate=30, lane=REPLY),
    )
    try:
        telegram.user_sends(USER, "/help")
        bot.pump.process()
    finally:
        bot.stop()
    (reply,) = telegram.bot_messages(USER.id)
    assert reply.text != SORRY and reply.text.startswith("Open a file link")


@pytest.fixture
def hanging_redis():
    """A Redis that accepts connections and never answers: a port that listens and never reads."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)  # the kernel completes every handshake; nobody ever reads or replies
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    server.close()


@pytest.mark.slow
@pytest.mark.django_db
def test_runbot_answers_within_seconds_while_redis_accepts_connections_and_never_replies(
    telegram, shortener, settings, hanging_redis, stored
):
    """Every Redis user of a reply (the settings cache, the delivery counters, the limiter) gives
    up after the configured timeout: before, the cache had none and a /start waited forever."""
    from botapp.bot.router import Router
    from botapp.services.users import user_access_hash
    from offline.telegram.clients import OfflineBot

    settings.REDIS_URL = hanging_redis
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": hanging_redis}}
    bot = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset(), shortener=shortener),
        peers=user_access_hash,
        limiter=RedisLimiter.from_settings(lane=REPLY),
    )
    try:
        began = time.monotonic()
        telegram.user_sends(USER, f"/start {stored.share_id}")
        bot.pump.process()
        first = time.monotonic() - began
        began = time.monotonic()
        telegram.user_sends(USER, "/help")
        bot.pump.process()
        second = time.monotonic() - began
    finally:
        bot.stop()
    texts = [m.text for m in telegram.bot_messages(USER.id)]
    assert texts[:2] == ["Report", "Read me"] and len(texts) == 4  # the files, the deletion notice, /help
    # Each Redis call gives up after 1.5 s (the cache's took 5 s: 22.7 s for the first message,
    # 8.8 s now on a loaded machine): settings read and cached, the limiter (once: it asks again
    # only after 10 s), the counters. Bounds well under what 5 s calls would take (20 s and 10 s).
    assert first < 15
    assert second < 7  # the settings cache's read and write


# --- the bulk lane's own connection (limiter_scripts.GatedConnection) --------------------------------


def bulk(prefix):
    return RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=1000, prefix=prefix, lane=BULK)


def client_id(connection) -> int:
    connection.send_command("CLIENT", "ID")
    return connection.read_response()


def test_a_bulk_sender_goes_on_after_redis_drops_its_connection(prefix):
    lim = bulk(prefix)
    assert lim.acquire_many([8001, 8002]) == 2
    dropped = client_id(lim._asking.connection)
    redis.Redis.from_url(settings.REDIS_URL).execute_command("CLIENT", "KILL", "ID", dropped)
    assert lim.acquire_many([8003, 8004]) == 2  # the dropped connection is opened again, the call made once more
    assert client_id(lim._asking.connection) != dropped


def test_a_bulk_sender_goes_on_after_redis_lost_its_scripts(prefix):
    lim = bulk(prefix)
    assert lim.acquire_many([8011]) == 1
    redis.Redis.from_url(settings.REDIS_URL).script_flush()  # as after a restart of Redis
    assert lim.acquire_many([8012]) == 1


def test_a_forked_child_asks_on_a_connection_of_its_own(prefix, monkeypatch):
    lim = bulk(prefix)
    lim.acquire_many([8021])
    parents = lim._asking.connection
    monkeypatch.setattr("botapp.telegram.limiter.os.getpid", lambda: -1)
    lim.acquire_many([8022])
    assert lim._asking.connection is not parents


def test_a_bulk_sender_with_redis_hanging_gives_up_after_its_timeout(hanging_redis, prefix):
    lim = RedisLimiter(redis.Redis.from_url(hanging_redis, socket_timeout=0.2), rate=30, prefix=prefix, lane=BULK)
    began = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        lim.acquire_many([8031])
    assert time.monotonic() - began < 5  # one timeout of 0.2 s, not a retry after it
