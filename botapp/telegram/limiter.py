"""One send limiter for every process that talks to Telegram (runbot, each worker), kept in Redis.

Telegram's limits for bots: about 30 messages/s overall (1000/s with paid broadcasts), about one
per second in a private chat, 20 per minute in a group. A FloodWait tells us we went too fast;
then every sender must wait, not just the one that was told.

How: each send reserves a slot. The global slot is a "theoretical arrival time" (GCRA) in Redis,
advanced by 1/rate per reservation in a Lua script, so reservations from any number of processes
are spaced exactly 1/rate apart; a sender sleeps until its slot. A per-chat slot works the same
way with that chat's interval, allowing a burst of CHAT_BURST calls. A FloodWait sets a pause-until time that every reservation starts
after, and a sender re-checks it after sleeping, so nobody sends into a pause.
"""

from __future__ import annotations

import time

import redis
from django.conf import settings

from botapp.telegram.limits import GROUP_CHAT_INTERVAL, PRIVATE_CHAT_BURST, PRIVATE_CHAT_INTERVAL

RESERVE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local pause = tonumber(redis.call('GET', KEYS[2]) or '0')
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now, pause)
local new_tat = tat + interval
local slot = math.max(new_tat - burst * interval, now, pause)
redis.call('SET', KEYS[1], string.format('%.6f', new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1000)
return string.format('%.6f', slot - now)
"""

PAUSE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > current then
  redis.call('SET', KEYS[1], string.format('%.6f', until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return string.format('%.6f', math.max(until_, current) - now)
"""

# A reply of a few messages (files, then "deleted in 30 min") may go at once (PRIVATE_CHAT_BURST);
# the per-chat rate holds over time. The global rate has no burst: sends are spaced evenly.
CHAT_BURST = PRIVATE_CHAT_BURST


def global_rate() -> float:
    return float(settings.TELEGRAM_PAID_RATE if settings.TELEGRAM_PAID_BROADCASTS else settings.TELEGRAM_RATE)


def chat_interval(chat_id: int) -> float:
    return PRIVATE_CHAT_INTERVAL if chat_id > 0 else GROUP_CHAT_INTERVAL


class RedisLimiter:
    def __init__(self, client: redis.Redis, *, rate: float, prefix: str = "courier:limit", sleep=time.sleep):
        self.redis = client
        self.interval = 1.0 / rate
        self.prefix = prefix
        self.sleep = sleep
        self._reserve = client.register_script(RESERVE)
        self._pause = client.register_script(PAUSE)
        self.pause_key = f"{prefix}:pause"
        self.global_key = f"{prefix}:global"

    @classmethod
    def from_settings(cls) -> RedisLimiter:
        return cls(redis.Redis.from_url(settings.REDIS_URL), rate=global_rate())

    def acquire(self, chat_id: int | None = None) -> float:
        """Block until this process may make one call to Telegram (to `chat_id`). Returns seconds waited."""
        waited = 0.0
        if chat_id is not None:
            waited += self._wait(f"{self.prefix}:chat:{chat_id}", chat_interval(chat_id), CHAT_BURST)
        while True:
            waited += self._wait(self.global_key, self.interval, 1)
            paused_for = self.paused_for()
            if paused_for <= 0:
                return waited
            # A FloodWait arrived while we slept: take a new slot after the pause.

    def _wait(self, key: str, interval: float, burst: int) -> float:
        delay = float(self._reserve(keys=[key, self.pause_key], args=[interval, burst]))
        if delay > 0:
            self.sleep(delay)
        return max(delay, 0.0)

    def pause(self, seconds: float) -> float:
        """Every sender waits `seconds` from now (Telegram's FloodWait). Returns the pause in force."""
        return float(self._pause(keys=[self.pause_key], args=[seconds]))

    def paused_for(self) -> float:
        until = self.redis.get(self.pause_key)
        if until is None:
            return 0.0
        seconds, micros = self.redis.time()
        return float(until) - (seconds + micros / 1_000_000)
