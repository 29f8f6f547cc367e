"""The reply lane's classes (the owner and admins, premium users, users, later messages of an
answer) and a reply's share, against real Redis: the waits each call is told, not taken."""

import time

import redis
from django.conf import settings

from botapp.telegram.limiter import (
    BULK,
    REPLY,
    REPLY_OWNER,
    REPLY_PREMIUM,
    REPLY_USER,
    RedisLimiter,
    reply_class,
    reply_class_raise,
    user_pace,
)

FREE = 28.8
INTERVAL = 1 / FREE


def replies(prefix, **kwargs) -> RedisLimiter:
    return RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=FREE, prefix=prefix, sleep=lambda s: None, **kwargs)


def slot_at(lim: RedisLimiter, chat_id: int) -> float:
    """When the reply's slot is (this machine's clock): the wait it is told, from the call."""
    before = time.monotonic()
    return before + lim.acquire(chat_id)


def test_an_admins_reply_and_a_premium_users_are_not_queued_behind_other_users_replies(prefix):
    lim = replies(prefix)
    users = [slot_at(lim, 10_000 + i) for i in range(60)]  # two seconds' worth of users' replies
    with reply_class(REPLY_OWNER):
        admin = slot_at(lim, 1000)
        assert admin < time.monotonic() + 0.01  # at once
    with reply_class(REPLY_USER):
        reply_class_raise(REPLY_PREMIUM)  # the router learns the user is premium
        assert slot_at(lim, 2000) <= admin + INTERVAL + 0.01  # behind the admin's only
    assert slot_at(lim, 3000) > users[-1] + 2 * INTERVAL - 0.01  # a user's: behind the users' and both


def test_each_users_first_message_goes_before_other_users_later_ones(prefix):
    lim = replies(prefix)
    with reply_class(REPLY_USER):  # the router's, for each update
        first = lim.acquire(500)
        later = lim.acquire(500)  # the same answer's second file
        other = lim.acquire(600)  # another user's first message
        assert first < 0.01 and later <= INTERVAL + 0.002
        assert other <= INTERVAL + 0.002  # not behind the first user's later message
        assert lim.acquire(500) > other  # and that chat's next one waits behind it


def test_an_admins_later_messages_stay_first(prefix):
    lim = replies(prefix)
    for i in range(10):
        lim.acquire(10_000 + i)
    with reply_class(REPLY_OWNER):
        waits = [lim.acquire(1000) for _ in range(3)]
    assert max(waits) <= 2 * INTERVAL + 0.002


def test_with_paid_broadcasts_replies_waiting_for_the_free_rate_leave_the_paid_queue_where_it_was(prefix):
    client = redis.Redis.from_url(settings.REDIS_URL)
    paid = {"rate": 960, "free_rate": FREE, "prefix": prefix, "sleep": lambda s: None}
    reply = RedisLimiter(client, lane=REPLY, **paid)
    bulk = RedisLimiter(client, lane=BULK, **paid)
    waits = [reply.acquire(20_000 + i) for i in range(60)]  # a burst of replies: two seconds of the free 30/s
    assert waits[-1] > 1.5
    seconds, micros = client.time()
    ahead = float(client.get(f"{prefix}:global")) - (seconds + micros / 1e6)
    assert ahead < 0.2  # the paid lane's next slot moved back by the replies' slots (60 of 1/960 s) only
    assert bulk.acquire_many(list(range(30_000, 30_016))) > 0  # a broadcast's batch...
    assert float(client.get(f"{prefix}:global")) - (seconds + micros / 1e6) < 0.3  # ...goes now, not in 2 s


def test_a_users_share_spaces_the_messages_to_them(prefix):
    lim = replies(prefix)
    with user_pace(3.0):  # a share of about 1% of the 30/s
        waits = [lim.acquire(700) for _ in range(4)]
    assert max(waits[:3]) <= 3 * INTERVAL  # a short burst still goes at once (the chat's burst)
    assert 2.9 < waits[3] <= 3.0 + 3 * INTERVAL  # then one per three seconds, not one per second
