"""Stream slots in Redis (botapp/stream/slots.py): limits per user, per address and in all, over
every process; a slot given back is free at once, and one whose process died lapses with its lease."""

import asyncio
import time

import pytest
import redis
from django.conf import settings as django_settings

from botapp.services.stream_stats import stream_slots_key
from botapp.stream.slots import LEASE_SECONDS, Slots


@pytest.fixture
def limits(settings):
    settings.STREAM_MAX_PER_USER, settings.STREAM_MAX_PER_ADDRESS, settings.STREAM_MAX_TOTAL = 2, 3, 4


def run(scenario):
    async def main():
        slots = Slots()
        try:
            return await scenario(slots)
        finally:
            await slots.close()

    return asyncio.run(main())


def test_each_scope_refuses_past_its_limit_and_names_itself(limits):
    async def scenario(slots):
        got = [await slots.take(user_id=1, address="10.0.0.1") for _ in range(3)]
        assert [full for _, full in got] == ["", "", "user"]
        assert (await slots.take(user_id=2, address="10.0.0.1"))[1] == ""
        assert (await slots.take(user_id=3, address="10.0.0.1"))[1] == "address"
        assert (await slots.take(user_id=None, address="10.0.0.2"))[1] == ""
        assert (await slots.take(user_id=None, address="10.0.0.3"))[1] == "all"
        member = got[0][0]
        await slots.give_back(member)
        assert (await slots.take(user_id=None, address="10.0.0.3"))[1] == ""  # free at once

    run(scenario)


def test_a_refused_take_holds_nothing(limits):
    async def scenario(slots):
        for _ in range(2):
            await slots.take(user_id=1, address="10.0.0.1")
        assert (await slots.take(user_id=1, address="10.0.0.9"))[1] == "user"
        assert len(slots.held) == 2
        client = redis.Redis.from_url(_url())
        assert client.zcard(stream_slots_key(scope="addr:10.0.0.9")) == 0

    run(scenario)


def _url():
    return django_settings.REDIS_URL


def test_a_dead_processs_slot_lapses_with_its_lease_and_renewal_keeps_a_live_one(limits, settings):
    settings.STREAM_MAX_PER_USER = 1
    client = redis.Redis.from_url(_url())

    async def scenario(slots):
        dead, _ = await slots.take(user_id=5, address=None)
        slots.held.pop(dead)  # its process is gone: nobody renews it
        assert (await slots.take(user_id=5, address=None))[1] == "user"
        key = stream_slots_key(scope="user:5")
        client.zadd(key, {dead: time.time() - 1})  # its lease ran out
        live, full = await slots.take(user_id=5, address=None)
        assert full == ""
        before = client.zscore(key, live)
        await slots.renew()
        assert client.zscore(key, live) >= before
        assert client.zscore(key, live) <= time.time() + LEASE_SECONDS + 1
        assert client.ttl(key) > 0  # the set itself expires when nothing renews it

    run(scenario)
