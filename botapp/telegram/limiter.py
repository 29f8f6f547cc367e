"""One send limiter for every process that talks to Telegram (runbot, each worker), kept in Redis.

Telegram's limits for bots: about 30 messages/s overall (1000/s with paid broadcasts), about one
per second in a private chat, 20 per minute in a group. A FloodWait tells us we went too fast;
then the senders of the scope Telegram limited must wait, not just the one that was told.

How: each call reserves a slot. The global slot is a "theoretical arrival time" (GCRA) in Redis,
advanced by 1/rate per reservation in a Lua script, so reservations from any number of processes
are spaced evenly; a sender sleeps until its slot. The rate is a little under Telegram's
(`TELEGRAM_RATE_HEADROOM`): a send that wakes a few milliseconds late must not make two arrive in
the same instant. A per-chat slot works the same way with that chat's interval, allowing a burst
of CHAT_BURST calls.

Two lanes. Replies to users (runbot) reserve their slot whatever the queue; bulk sends (broadcasts,
scheduled messages, sequence steps) take a slot only when one is free now, and otherwise wait and
ask again. So bulk traffic never builds a queue in front of a reply: a broadcast uses what replies
leave. A FloodWait pauses its scope: one chat when that chat was just sent to (the per-chat limit),
otherwise the lane it happened in (bulk), or everyone (a reply was refused). Every reservation
starts after the pauses that apply to it, and a sender re-checks them after sleeping.
"""

from __future__ import annotations

import time

import redis
from django.conf import settings

from botapp.telegram.limits import GROUP_CHAT_INTERVAL, PRIVATE_CHAT_BURST, PRIVATE_CHAT_INTERVAL

# KEYS: the slot key, then any pause keys. ARGV: interval, burst, max_ahead (-1: always reserve).
# Returns the delay until the reserved slot, or, when max_ahead is exceeded, "-" and the delay
# after which to ask again (nothing reserved).
RESERVE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_ahead = tonumber(ARGV[3])
local pause = 0
for i = 2, #KEYS do
  pause = math.max(pause, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now, pause)
local new_tat = tat + interval
local slot = math.max(new_tat - burst * interval, now, pause)
if max_ahead >= 0 and slot - now > max_ahead then
  return '-' .. string.format('%.6f', slot - now - max_ahead)
end
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
REPLY, BULK = "reply", "bulk"


def global_rate() -> float:
    rate = settings.TELEGRAM_PAID_RATE if settings.TELEGRAM_PAID_BROADCASTS else settings.TELEGRAM_RATE
    return float(rate) * settings.TELEGRAM_RATE_HEADROOM


def chat_interval(chat_id: int) -> float:
    return PRIVATE_CHAT_INTERVAL if chat_id > 0 else GROUP_CHAT_INTERVAL


class RedisLimiter:
    """`lane`: REPLY (runbot: never queued behind bulk) or BULK (workers: take what replies leave)."""

    def __init__(self, client: redis.Redis, *, rate: float, prefix: str = "courier:limit", lane: str = REPLY, sleep=time.sleep):
        self.redis = client
        self.rate = rate
        self.interval = 1.0 / rate
        self.prefix = prefix
        self.lane = lane
        self.sleep = sleep
        self._reserve = client.register_script(RESERVE)
        self._pause = client.register_script(PAUSE)
        self.pause_key = f"{prefix}:pause"  # everyone
        self.bulk_pause_key = f"{prefix}:pause:bulk"
        self.global_key = f"{prefix}:global"
        self._pauses = [self.pause_key, self.bulk_pause_key] if lane == BULK else [self.pause_key]

    @classmethod
    def from_settings(cls, *, lane: str = REPLY) -> RedisLimiter:
        return cls(redis.Redis.from_url(settings.REDIS_URL), rate=global_rate(), lane=lane)

    def acquire(self, chat_id: int | None = None) -> float:
        """Block until this process may make one call to Telegram (to `chat_id`). Returns seconds waited."""
        waited = 0.0
        if chat_id is not None:
            chat_key = self._chat_key(chat_id)
            waited += self._wait([chat_key, f"{chat_key}:pause"], chat_interval(chat_id), CHAT_BURST, -1)
        # Bulk takes a slot only if it is free within one interval: replies find the queue empty.
        max_ahead = self.interval if self.lane == BULK else -1
        while True:
            waited += self._wait([self.global_key, *self._pauses], self.interval, 1, max_ahead)
            paused_for = self.paused_for()
            if paused_for <= 0:
                return waited
            # A FloodWait arrived while we slept: take a new slot after the pause.

    def _chat_key(self, chat_id: int) -> str:
        return f"{self.prefix}:chat:{chat_id}"

    def _wait(self, keys: list[str], interval: float, burst: int, max_ahead: float) -> float:
        waited = 0.0
        while True:
            answer = self._reserve(keys=keys, args=[interval, burst, max_ahead])
            answer = answer.decode() if isinstance(answer, bytes) else str(answer)
            if not answer.startswith("-"):
                delay = float(answer)
                if delay > 0:
                    self.sleep(delay)
                return waited + max(delay, 0.0)
            retry = max(float(answer[1:]), interval / 2)  # not reserved: the queue is busy, ask again
            self.sleep(retry)
            waited += retry

    def pause(self, seconds: float, *, chat_id: int | None = None) -> float:
        """A FloodWait of `seconds`: pause its scope (see the module's doc). Returns the pause in force."""
        if chat_id is not None and self._chat_was_busy(chat_id):
            return float(self._pause(keys=[f"{self._chat_key(chat_id)}:pause"], args=[seconds]))
        key = self.bulk_pause_key if self.lane == BULK else self.pause_key
        return float(self._pause(keys=[key], args=[seconds]))

    def _chat_was_busy(self, chat_id: int) -> bool:
        """Inferred: Telegram does not say which limit a FLOOD_WAIT is for. If this chat's bucket
        holds more than the call just made (the chat was also sent to within its interval before
        it), the per-chat limit is the likely one."""
        tat = self.redis.get(self._chat_key(chat_id))
        if tat is None:
            return False
        seconds, micros = self.redis.time()
        return float(tat) - (seconds + micros / 1_000_000) > chat_interval(chat_id) + 0.001

    def paused_for(self) -> float:
        """Seconds until this lane may send again (0: not paused)."""
        values = [v for v in self.redis.mget(self._pauses) if v is not None]
        if not values:
            return 0.0
        seconds, micros = self.redis.time()
        return max(float(v) for v in values) - (seconds + micros / 1_000_000)
