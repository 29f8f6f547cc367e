"""How many streams may be open at once: per user a link was given to, per client address, and in
all (STREAM_MAX_PER_USER, STREAM_MAX_PER_ADDRESS, STREAM_MAX_TOTAL), over every streaming process.

Each open stream holds a slot: a member of a Redis sorted set per scope whose score is when its
lease runs out. A slot is taken for all its scopes at once, or none (one Lua script); its process
renews the leases of all its open streams every LEASE_RENEW seconds, and gives the slot back when
the stream ends. A process killed with its streams open renews nothing: their slots lapse within
LEASE_SECONDS, and no slot is ever lost for good.

Also here: the counts the console's dashboard shows (services/stream_stats.py), added as streams
open, send and end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time

import redis.asyncio as aioredis
from django.conf import settings

from botapp import clock
from botapp.services.stream_stats import HOUR_KEEP_SECONDS, stream_hour_key, stream_slots_key

log = logging.getLogger(__name__)

LEASE_SECONDS = 60  # a slot lapses this long after its process last renewed it
LEASE_RENEW = 20  # seconds between renewals: a lease survives two missed renewals

# KEYS: the scopes' sorted sets. ARGV: now, lease end, member, then each scope's limit.
# Returns 0 when the slot is taken, else the (1-based) number of the first scope that is full.
TAKE = """
local now, lease_end, member = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[3 + i]) then return i end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, lease_end, member)
  redis.call('EXPIRE', key, math.ceil(lease_end - now) + 1)
end
return 0
"""
# KEYS: the scopes' sorted sets of one slot. ARGV: lease end, member, the sets' time to live.
# XX: a slot already taken back (given back, or swept after it lapsed) is not taken again.
RENEW = """
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', ARGV[1], ARGV[2])
  redis.call('EXPIRE', key, tonumber(ARGV[3]))
end
return 0
"""


class Slots:
    """This process's slots (one per loop: the streaming process runs one)."""

    def __init__(self):
        self.client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        self.take_script = self.client.register_script(TAKE)
        self.renew_script = self.client.register_script(RENEW)
        self.held: dict[str, list[str]] = {}  # member -> its keys
        self.renewer: asyncio.Task | None = None

    async def take(self, *, user_id: int | None, address: str | None) -> tuple[str | None, str]:
        """A slot for a new stream: (its member, "") when taken, else (None, the scope that is
        full: "user", "address" or "all")."""
        scopes = [("all", settings.STREAM_MAX_TOTAL)]
        if address:
            scopes.append((f"addr:{address}", settings.STREAM_MAX_PER_ADDRESS))
        if user_id is not None:
            scopes.append((f"user:{user_id}", settings.STREAM_MAX_PER_USER))
        keys = [stream_slots_key(scope=scope) for scope, _ in scopes]
        member = secrets.token_hex(8)
        now = time.time()
        full = await self.take_script(keys=keys, args=[now, now + LEASE_SECONDS, member, *[limit for _, limit in scopes]])
        if full:
            return None, scopes[int(full) - 1][0].split(":", 1)[0].replace("addr", "address")
        self.held[member] = keys
        if self.renewer is None or self.renewer.done():
            self.renewer = asyncio.get_running_loop().create_task(self._renew_forever())
        return member, ""

    async def give_back(self, member: str) -> None:
        """The stream ended: its slot is free for the next."""
        keys = self.held.pop(member, [])
        if keys:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.zrem(key, member)
                await pipe.execute()

    async def renew(self) -> None:
        """Push the leases of every slot this process holds LEASE_SECONDS on."""
        until = time.time() + LEASE_SECONDS
        for member, keys in list(self.held.items()):
            await self.renew_script(keys=keys, args=[until, member, LEASE_SECONDS + 1])

    async def _renew_forever(self) -> None:
        while self.held:
            await asyncio.sleep(LEASE_RENEW)
            try:
                await self.renew()
            except aioredis.RedisError as exc:  # the next round tries again; the leases hold a minute
                log.warning("stream slots not renewed: %s", exc)

    async def count(self, *, streams: int = 0, sent: int = 0) -> None:
        """Add to this hour's counts on the dashboard."""
        key = stream_hour_key(at=clock.now())
        async with self.client.pipeline(transaction=False) as pipe:
            if streams:
                pipe.hincrby(key, "streams", streams)
            if sent:
                pipe.hincrby(key, "bytes", sent)
            pipe.expire(key, HOUR_KEEP_SECONDS)
            await pipe.execute()

    async def close(self) -> None:
        if self.renewer is not None:
            self.renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.renewer
        for member in list(self.held):
            await self.give_back(member)
        await self.client.aclose()
