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

Two lanes. Replies to users (runbot) are paced among replies alone: their slot is not behind the
slots bulk senders reserved (it is taken from the shared queue all the same, which moves bulk's
next batch back), and in the windows a waiting reply has the first place that frees. Bulk sends
(broadcasts, scheduled messages, sequence steps) reserve a batch only when its first slot is due within one
window (BATCH_WINDOW, or BATCH_MIN intervals if longer: `batch_window`) of now. A bulk sender does not poll for it: it
sleeps until the next free slot is due (the time the last grant named, or Redis' exact "not yet")
and asks then, and a slot due now is admitted by the windows (WINDOW) in the same trip: one
Redis call per batch while nobody else took its slot (one thread of a process asks at a time; the
others wait for it). A sender that wakes up to a window late still has its slot: lateness costs
no rate. So bulk traffic never queues more than a window or two in front of a reply: a broadcast
uses what replies leave.

A FloodWait pauses its scope: one chat when that chat was just sent to (the per-chat limit),
otherwise the lane it happened in (bulk), or everyone (a reply was refused). With paid broadcasts
on there are two budgets, the overall one that paid sends use and the free one of every call
without the paid flag, and a FloodWait pauses only the refused call's budget, in that scope: a
refused free call (a reply, a worker's deletion) never stops paid sends, and a refused paid send
never stops replies. Every reservation starts after the pauses that apply to it, and a sender
re-checks them after sleeping (a sleep for a slot ends in a new reservation, which reads them).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence

import redis
from django.conf import settings

from botapp.metrics import FLOOD_WAIT_SECONDS, FLOOD_WAITS, LIMITER_WAIT
from botapp.telegram.limits import GROUP_CHAT_INTERVAL, PRIVATE_CHAT_BURST, PRIVATE_CHAT_INTERVAL

# One round trip per call: the chat's slot (KEYS[1], its pause KEYS[2]), then G rate slots (KEYS[3
# .. 2+G]: the overall one, and the free one for a call without the paid flag when paid broadcasts
# are on), then, for a reply, the replies' own G slots, then the pauses. ARGV: chat interval, chat
# burst, max_ahead (-1: always reserve), late, has_chat (0/1), count (messages in the call), G,
# each rate slot's interval, then own (1: a reply; its slot is found in its own queues, and the
# shared ones move on by the slots it took, wherever they were). A call of
# `count` messages takes `count` consecutive slots and goes at the last of them (so no span of a
# second ever holds more than the rate). `late`: how far in the past a rate slot may still be
# taken (a bulk sender told to come at its slot that woke a little late: its slot was not lost,
# and it goes at once; a rate slot older than that was idle and is not taken back). Returns
# "<delay until the reserved slot> <delay until the next free rate slot after it>", or "-" and
# the delay until the next free slot is due (when it is more than max_ahead away): a sender that
# sleeps that long and asks again is granted it (with no delay: ACQUIRE_ADMIT admits it then).
ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local chat_interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_ahead = tonumber(ARGV[3])
local late = tonumber(ARGV[4])
local has_chat = ARGV[5] == '1'
local count = tonumber(ARGV[6])
local g = tonumber(ARGV[7])
local start = now - late
local chat_tat = nil
if has_chat then
  local chat_pause = tonumber(redis.call('GET', KEYS[2]) or '0')
  local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now, chat_pause)
  chat_tat = tat + chat_interval
  start = math.max(chat_tat - burst * chat_interval, start, chat_pause)
end
local own = ARGV[8 + g] == '1'
local first_pause = own and 3 + 2 * g or 3 + g
local pause = 0
for i = first_pause, #KEYS do
  pause = math.max(pause, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
local slot = math.max(start, pause)
for i = 1, g do
  local interval = tonumber(ARGV[7 + i])
  local tat = tonumber(redis.call('GET', KEYS[own and 2 + g + i or 2 + i]) or '0')
  if tat < now - late then
    tat = now
  end
  tat = math.max(tat, start, pause)
  slot = math.max(slot, tat + (count - 1) * interval)
end
if max_ahead >= 0 and slot - now > max_ahead then
  return '-' .. string.format('%.6f', slot - now)
end
if has_chat then
  redis.call('SET', KEYS[1], string.format('%.6f', chat_tat), 'PX', math.ceil((chat_tat - now) * 1000) + 1000)
end
local function advance(key, new_tat)
  redis.call('SET', key, string.format('%.6f', new_tat), 'PX', math.max(1, math.ceil((new_tat - now) * 1000) + 1000))
end
local next_ = 0
for i = 1, g do
  local interval = tonumber(ARGV[7 + i])
  local new_tat = slot + interval
  if own then
    -- the call's own queue moves on from its slot; the shared one by the slots it took
    advance(KEYS[2 + g + i], new_tat)
    new_tat = math.max(tonumber(redis.call('GET', KEYS[2 + i]) or '0'), slot - (count - 1) * interval) + count * interval
  end
  advance(KEYS[2 + i], new_tat)
  next_ = math.max(next_, new_tat - now)
end
return string.format('%.6f %.6f', math.max(slot - now, 0), next_)
"""

# A bulk sender's batch (workers only): the next free slot, when it is due within ARGV[2] seconds
# (the window), and the consecutive slots after it that fall within one window of it, each also
# within its chat's own limit, in one round trip. KEYS: the global slot, the P = ARGV[5] pause
# keys, then each chat's slot and pause. ARGV: global interval, window, late (as ACQUIRE's), chat
# burst, P, then each chat's interval. Returns "<delay until the first slot> <delay until the
# next free slot after the batch> <granted>", or "-" and the delay until the next free slot is
# due: a sender that sleeps that long and asks again is granted the batch due then (and admitted
# in the same trip: ACQUIRE_MANY_ADMIT). A sender that asks early is granted the batch up to a
# window before it is due; one that wakes late (a busy machine's scheduling) loses no slot either
# way: the slot is reserved, or still its own (`late`).
ACQUIRE_MANY = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local late = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local p = tonumber(ARGV[5])
local pause = 0
for i = 2, 1 + p do
  pause = math.max(pause, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now - late then
  tat = now
end
tat = math.max(tat, pause)
local granted = 0
local first = nil
local wait = nil
local n = (#KEYS - 1 - p) / 2
for i = 1, n do
  local chat_key = KEYS[2 + p + 2 * (i - 1)]
  local chat_pause = tonumber(redis.call('GET', KEYS[3 + p + 2 * (i - 1)]) or '0')
  local chat_interval = tonumber(ARGV[5 + i])
  local chat_tat = math.max(tonumber(redis.call('GET', chat_key) or '0'), now, chat_pause) + chat_interval
  local slot = math.max(tat, chat_tat - burst * chat_interval, chat_pause)
  if (first == nil and slot - now > window) or (first and slot - first >= window) then
    wait = slot - now
    break
  end
  redis.call('SET', chat_key, string.format('%.6f', chat_tat), 'PX', math.ceil((chat_tat - now) * 1000) + 1000)
  tat = slot + interval
  granted = granted + 1
  first = first or slot
end
if granted == 0 then
  return '-' .. string.format('%.6f', wait)
end
redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX', math.max(1, math.ceil((tat - now) * 1000) + 1000))
return string.format('%.6f %.6f ', math.max(first - now, 0), tat - now) .. granted
"""

PAUSED = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local until_ = 0
for i = 1, #KEYS do
  until_ = math.max(until_, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
return string.format('%.6f', until_ - now)
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

# Telegram counts its rates over any span of a second when each request ARRIVES (offline/telegram/
# rates.py models it so); the slots above are evenly spaced when reserved, but a sender that wakes
# late, a slow hop to the loop or the network's jitter can bunch them on the way. So right before a
# call leaves, it is admitted against a log of what actually left: at most ARGV[2+i] messages in
# any ARGV[1] seconds (a little over one second: TELEGRAM_RATE_SPAN), per window (KEYS[2i-1]: the
# log, "time count" entries; KEYS[2i]: their sum). ARGV[2]... the windows' caps; then who asks
# (a reply's own id, or "-" for a bulk call); the last ARGV is the call's count. The last KEYS:
# the replies waiting for a place (a sorted set, each id scored with when its wait ends). A
# broadcast fills the windows to their caps; a reply told to wait registers there, and bulk calls
# leave it a place while it waits, and WAITING_GRACE after (their cap is lower by the replies waiting;
# a reply that never comes back is forgotten then): the place that
# frees first is the reply's, not the next bulk batch's (which, asking at the same instant, took
# it two times in three: replies waited up to four expiries, p95 211 ms in pairs). Returns 0
# (admitted and logged) or the seconds until it would be.
WAITING_GRACE = 0.05  # seconds a waiting reply keeps its place after its wait (WINDOW)
WINDOW = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local span = tonumber(ARGV[1])
local count = tonumber(ARGV[#ARGV])
local who = ARGV[#ARGV - 1]
local waiting_key = KEYS[#KEYS]
local yield = 0
redis.call('ZREMRANGEBYSCORE', waiting_key, '-inf', now)
if who == '-' then
  yield = redis.call('ZCARD', waiting_key)
end
local wait = 0
local sums = {}
local windows = (#KEYS - 1) / 2
for w = 1, windows do
  local log, sum_key = KEYS[2 * w - 1], KEYS[2 * w]
  local cap = tonumber(ARGV[1 + w]) - yield
  local sum = tonumber(redis.call('GET', sum_key) or '0')
  while true do
    local head = redis.call('LINDEX', log, 0)
    if not head then
      sum = 0
      break
    end
    local at, n = string.match(head, '(%S+) (%S+)')
    if tonumber(at) > now - span then break end
    redis.call('LPOP', log)
    sum = sum - tonumber(n)
  end
  sums[w] = sum
  local excess = sum + count - cap
  if excess > 0 then
    local until_ = span
    for _, entry in ipairs(redis.call('LRANGE', log, 0, -1)) do
      local at, n = string.match(entry, '(%S+) (%S+)')
      excess = excess - tonumber(n)
      if excess <= 0 then
        until_ = tonumber(at) + span - now
        break
      end
    end
    wait = math.max(wait, until_)
  end
end
for w = 1, windows do
  local ttl = math.ceil(span * 1000) + 1000
  if wait > 0 then
    redis.call('SET', KEYS[2 * w], sums[w], 'PX', ttl)
    redis.call('PEXPIRE', KEYS[2 * w - 1], ttl)
  else
    redis.call('RPUSH', KEYS[2 * w - 1], string.format('%.6f', now) .. ' ' .. count)
    redis.call('PEXPIRE', KEYS[2 * w - 1], ttl)
    redis.call('SET', KEYS[2 * w], sums[w] + count, 'PX', ttl)
  end
end
if who ~= '-' then
  if wait > 0 then  -- waiting: bulk calls leave this reply a place until a little after its wait
    redis.call('ZADD', waiting_key, now + wait + WAITING_GRACE, who)
    redis.call('PEXPIRE', waiting_key, math.ceil((wait + WAITING_GRACE) * 1000) + 1000)
  else
    redis.call('ZREM', waiting_key, who)
  end
end
return string.format('%.6f', wait)
""".replace("WAITING_GRACE", repr(WAITING_GRACE))


def _admitting(acquire: str, *, count_granted: bool) -> str:
    """`acquire` (ACQUIRE or ACQUIRE_MANY), then, when the slot it reserved is now (no delay),
    WINDOW at once in the same round trip: the call leaves right after either way, so admitting it
    here is what asking WINDOW next would do, without the second trip. KEYS: `acquire`'s, then
    WINDOW's; ARGV: how many of each are `acquire`'s, then its ARGV, then WINDOW's (without the
    count when `count_granted`: the batch's count is what was granted, its answer's last field).
    Returns what `acquire` returns when the slot is later (or "-"), else that and WINDOW's answer."""
    count = "wargs[#wargs + 1] = string.match(answer, '(%S+)$')\n" if count_granted else ""
    return (
        "local function acquire(KEYS, ARGV)\n" + acquire + "end\n"
        "local function window(KEYS, ARGV)\n" + WINDOW + "end\n"
        """
local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
local akeys, aargs, wkeys, wargs = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= nk then akeys[#akeys + 1] = KEYS[i] else wkeys[#wkeys + 1] = KEYS[i] end
end
for i = 3, #ARGV do
  if i <= 2 + na then aargs[#aargs + 1] = ARGV[i] else wargs[#wargs + 1] = ARGV[i] end
end
local answer = acquire(akeys, aargs)
if string.sub(answer, 1, 1) == '-' or tonumber(string.match(answer, '^(%S+)')) > 0 then
  return answer
end
""" + count + "return answer .. ' ' .. window(wkeys, wargs)\n"
    )


ACQUIRE_ADMIT = _admitting(ACQUIRE, count_granted=False)
ACQUIRE_MANY_ADMIT = _admitting(ACQUIRE_MANY, count_granted=True)

# A reply of a few messages (files, then "deleted in 30 min") may go at once (PRIVATE_CHAT_BURST);
# the per-chat rate holds over time. The global rate has no burst: sends are spaced evenly.
CHAT_BURST = PRIVATE_CHAT_BURST
REPLY, BULK = "reply", "bulk"


def global_rate() -> float:
    """The overall rate the limiter paces at: Telegram's (the paid one with paid broadcasts) times
    the headroom."""
    if settings.TELEGRAM_PAID_BROADCASTS:
        return float(settings.TELEGRAM_PAID_RATE) * settings.TELEGRAM_PAID_RATE_HEADROOM
    return float(settings.TELEGRAM_RATE) * settings.TELEGRAM_RATE_HEADROOM


# How far a worker's sends may bunch: a batch of the slots due within this window goes to Telegram
# at once (one MTProto container) and is admitted against the windows as one. Each batch is a burst
# of rate x BATCH_WINDOW sends that the rate windows (TELEGRAM_RATE_SPAN) must hold: 16 at 960/s.
# The windows take whole batches, so a span holds only as many as fit under the cap: what is left
# over is lost to the broadcast (replies may use it). 1000 holds 52 batches of 19 (988, 12 left:
# the broadcast and 4 replies/s together at most 0.954 of 1000/s) but 62 of 16 (992, 8 left, 0.958).
# Side by side (bench/broadcast.py --mode paid, one run each, alternating, 2026-11-28): 19 gave
# 0.952, 0.952, 0.952 of allowed; 16 gave 0.954, 0.955, 0.954; 12 gave 0.955 three times. Sends
# per CPU-second at real pacing (bench/sender.py --paced paid): 16 and 19 within each other's noise
# (6,669-8,167 against 6,662-7,944), 12 lower (5,615-6,400). 40 ms batches cost a worker less CPU
# (5,125 against 4,750, side by side) but a paid broadcast end to end fell from 0.950 to
# 0.893-0.939 of the allowed rate, with 157 FLOOD_WAITs in one run of three: bigger bunches fill
# the windows in bigger steps.
BATCH_WINDOW = 0.017
BATCH_MAX = 50  # sends per batch at most, whatever the rate
# Sends per batch at least, whatever the rate: at the free rate (28.8/s) a pair, two slots 35 ms
# apart sent at once. Each batch costs a worker the same thread hops, Redis call, container and
# answer whatever its size: one send at a time cost 1.9 ms of CPU a send, most of it those (530
# sends per CPU-second at 28.8/s, against 1,066 in pairs and 1,255 in threes, side by side). No more
# than a pair: a reply waits for a place in the windows, and a pair's places free two at a time
# (one every 69 ms). End to end (bench/broadcast.py --mode free), replies during a free broadcast
# take p95 89 ms in pairs (200 ms before replies had their own queue and the first place in the
# windows; 65 ms one at a time), and the runs met no FLOOD_WAIT (one at a time: 3-4 a run).
BATCH_MIN = 2


def send_batch_size(rate: float | None = None) -> int:
    """Sends a worker hands the limiter at once: the slots of one window, BATCH_MIN at least (a
    pair at the free rate, 16 at 960/s)."""
    rate = global_rate() if rate is None else rate
    return max(BATCH_MIN, min(BATCH_MAX, int(rate * BATCH_WINDOW)))


def batch_window(interval: float) -> float:
    """How far apart the slots of one batch may be: BATCH_WINDOW, or BATCH_MIN intervals of the
    pace when that is longer (the free rate)."""
    return max(BATCH_WINDOW, BATCH_MIN * interval)


def chat_interval(chat_id: int) -> float:
    return PRIVATE_CHAT_INTERVAL if chat_id > 0 else GROUP_CHAT_INTERVAL


log = logging.getLogger(__name__)

# With Redis unreachable, runbot still answers, each process at this many calls/s: a few replies
# never reach Telegram's limit even with several processes, and nobody waits for Redis.
FALLBACK_RATE = 5.0
REDIS_TIMEOUT = 1.5  # seconds: a Redis that accepts connections but never answers costs this, once
REDIS_RETRY_AFTER = 10.0  # seconds of fallback before Redis is asked again


class LocalLimiter:
    """The fallback: evenly spaced calls in this process alone, one per second per chat."""

    def __init__(self, rate: float = FALLBACK_RATE, sleep=time.sleep, clock=time.monotonic):
        self.interval = 1.0 / rate
        self.sleep = sleep
        self.clock = clock  # with `sleep`, what tests replace to see the waits without waiting
        self.lock = threading.Lock()
        self.next_slot = 0.0
        self.chats: dict[int, float] = {}

    count_max = int(FALLBACK_RATE)

    def acquire_many(self, chat_ids) -> int:
        self.acquire(chat_ids[0])
        return 1

    def acquire(self, chat_id: int | None = None, *, count: int = 1, paid: bool = False) -> float:
        with self.lock:
            now = self.clock()
            slot = max(self.next_slot, now, self.chats.get(chat_id, 0.0) if chat_id is not None else 0.0)
            slot += (count - 1) * self.interval
            self.next_slot = slot + self.interval
            if chat_id is not None:
                self.chats[chat_id] = slot + chat_interval(chat_id)
                if len(self.chats) > 10_000:
                    self.chats.clear()
        if slot > now:
            self.sleep(slot - now)
        return max(0.0, slot - now)


class RedisLimiter:
    """`lane`: REPLY (runbot: never queued behind bulk) or BULK (workers: take what replies leave).
    `rate`: the overall pace; `free_rate`: the pace of calls without the paid flag when it is lower
    (paid broadcasts on). `allowed` / `free_allowed`: Telegram's own figures, which the windows
    admit calls against (None: no window, only the paced slots); `span`: the windows' length."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        rate: float,
        free_rate: float | None = None,
        allowed: float | None = None,
        free_allowed: float | None = None,
        span: float = 1.0,
        prefix: str = "courier:limit",
        lane: str = REPLY,
        sleep=time.sleep,
        clock=time.monotonic,  # this process's own time: the fallback's slots, when to ask Redis again
    ):
        self.redis = client
        self.rate = rate
        self.interval = 1.0 / rate
        self.free_interval = 1.0 / free_rate if free_rate else None
        self.allowed = allowed
        self.free_allowed = free_allowed if free_rate else None
        self.span = span
        self.prefix = prefix
        self.lane = lane
        self.sleep = sleep
        self.clock = clock
        self._fallback = LocalLimiter(sleep=sleep, clock=clock)
        self._warned_at = -1e9
        self._down_until = 0.0
        self._acquire = client.register_script(ACQUIRE)
        self._acquire_admit = client.register_script(ACQUIRE_ADMIT)
        self._acquire_many = client.register_script(ACQUIRE_MANY)
        self._acquire_many_admit = client.register_script(ACQUIRE_MANY_ADMIT)
        self._pause = client.register_script(PAUSE)
        self._paused = client.register_script(PAUSED)
        self._window = client.register_script(WINDOW)
        self.free_key = f"{prefix}:free"
        self.pause_key = f"{prefix}:pause"  # everyone (of a budget: see _pause_key)
        self.bulk_pause_key = f"{prefix}:pause:bulk"
        self.global_key = f"{prefix}:global"
        # A bulk sender's threads ask Redis for slots one at a time: the others wait here, not in
        # a loop of Redis calls each (a worker runs a dozen sending threads; one asks, the rest
        # would all wake at the same instant to be told "not yet").
        self._gate = threading.Lock()
        self._asking = _GatedConnection(client)  # the gate's own connection: one ask at a time
        # When the next free slot is due (this process's clock), as the last grant said, for calls
        # without and with the paid flag: the next thread asks then, not before (asking before it
        # would be a "not yet" round trip), and is granted and admitted in one.
        self._due = {False: 0.0, True: 0.0}
        self._process = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._replies = itertools.count()  # thread-safe: next() on a count holds the GIL

    @classmethod
    def from_settings(cls, *, lane: str = REPLY) -> RedisLimiter:
        client = redis.Redis.from_url(
            settings.REDIS_URL,
            socket_timeout=REDIS_TIMEOUT,
            socket_connect_timeout=REDIS_TIMEOUT,
            retry=None,
            # One connection per send in flight: paid broadcasts keep ~240 of them (redis-py's
            # default pool of 100 ran dry and failed sends with MaxConnectionsError).
            max_connections=1024,
        )
        free = float(settings.TELEGRAM_RATE)
        if settings.TELEGRAM_PAID_BROADCASTS:  # one overall budget, of which the free part is 30/s
            return cls(
                client, rate=global_rate(), allowed=float(settings.TELEGRAM_PAID_RATE), span=settings.TELEGRAM_RATE_SPAN,
                free_rate=free * settings.TELEGRAM_RATE_HEADROOM, free_allowed=free, lane=lane,
            )  # fmt: skip
        return cls(client, rate=global_rate(), allowed=free, span=settings.TELEGRAM_RATE_SPAN, lane=lane)

    @property
    def count_max(self) -> int:
        """The most messages one call should carry (a forward's ids): half a window of the
        tightest budget, so a call of them never waits for a whole window to empty."""
        caps = [c for c in (self.allowed, self.free_allowed) if c]
        return max(1, int(min(caps or [self.rate]) / 2))

    def acquire(self, chat_id: int | None = None, *, count: int = 1, paid: bool = False) -> float:
        """Replies go on without Redis (at FALLBACK_RATE, logged); bulk sends do not (the error
        reaches the sweep, which hands the row back). `count`: messages the call delivers (an
        album's, a forward's); `paid`: it carries the paid-broadcast flag."""
        waited = self._acquire_or_fall_back(chat_id, count, paid and self.free_interval is not None)
        LIMITER_WAIT.labels(self.lane).observe(waited)
        return waited

    def _acquire_or_fall_back(self, chat_id: int | None, count: int, paid: bool) -> float:
        if self.lane == REPLY and self.clock() < self._down_until:
            return self._fallback.acquire(chat_id, count=count)
        try:
            return self._acquire_shared(chat_id, count, paid)
        except redis.RedisError as exc:
            if self.lane == BULK:
                raise
            self._redis_down(exc)
            return self._fallback.acquire(chat_id, count=count)

    def _redis_down(self, exc: Exception) -> None:
        """Ask Redis again only after REDIS_RETRY_AFTER: a dead or hanging Redis must not cost
        every reply its timeout."""
        now = self.clock()
        self._down_until = now + REDIS_RETRY_AFTER
        if now - self._warned_at > 60:
            self._warned_at = now
            log.error("Redis unreachable (%s): replies paced by this process alone at %s/s", exc, FALLBACK_RATE)

    def _acquire_shared(self, chat_id: int | None, count: int = 1, paid: bool = False) -> float:
        """Block until this process may make one call to Telegram (to `chat_id`). Returns seconds
        waited. One round trip to Redis in the common case: the slot and, when it is now, the
        windows' admission with it (ACQUIRE_ADMIT). A bulk call takes a slot only when it is due
        within one interval, and asks when it is (`_ask`): replies find the queue empty. After a
        wait for a reserved slot, one more trip if the sleep was long enough for a pause to have
        arrived meanwhile, and one to be admitted by the windows."""
        bulk = self.lane == BULK
        chat_key = self._chat_key(chat_id) if chat_id is not None else self.global_key
        rates = [(self.global_key, self.interval)]
        if self.free_interval is not None and not paid:
            rates.append((self.free_key, self.free_interval))
        # A reply's slot is paced among replies alone (their own queues), not behind the slots
        # a broadcast reserved; it takes its slots from the shared queues all the same (the
        # broadcast's next batch moves back by them), and the windows give it the first place.
        own = [f"{k}:replies" for k, _ in rates] if not bulk else []
        keys = [chat_key, f"{chat_key}:pause", *(k for k, _ in rates), *own, *self._pause_keys(paid)]
        args = [
            chat_interval(chat_id) if chat_id is not None else 0,
            CHAT_BURST,
            self.interval * count if bulk else -1,
            self._late(paid) if bulk else 0,
            int(chat_id is not None),
            count,
            len(rates),
            *(i for _, i in rates),
            int(bool(own)),
        ]
        # A reply's id while it waits for the windows (bulk calls leave it a place: WINDOW).
        who = "-" if bulk else f"{self._process}:{next(self._replies)}"
        window_keys, window_args = self._windows(count, paid, who)
        if window_keys:  # the windows asked in the same trip when the slot is now (ACQUIRE_ADMIT)
            acquire, keys, args = self._acquire_admit, [*keys, *window_keys], [len(keys), len(args), *args, *window_args]
        else:
            acquire = self._acquire
        waited = 0.0
        while True:
            fields, asked = self._ask(acquire, keys, args, paid)
            waited += asked
            if len(fields) == 3:  # the slot was now, and the windows were asked with it
                wait = float(fields[2])
                if wait <= 0:
                    return waited  # admitted and logged
                self.sleep(wait)
                return waited + wait + self._admit(count, paid, who)
            delay = float(fields[0])
            if delay > 0:
                self.sleep(delay)
                waited += delay
                if delay >= 0.05 and self.paused_for(paid=paid) > 0:
                    continue  # a FloodWait arrived while we slept: take a new slot after the pause
            return waited + self._admit(count, paid, who)

    def _ask(self, script, keys: list, args: list, paid: bool) -> tuple[list[str], float]:
        """`script`'s answer once it grants a slot, split in its fields, and the seconds slept for
        it. A reply asks once (its slot is reserved, in the replies' own queue). A bulk sender's threads
        ask one at a time (the gate), each when the next free slot is due: when the last grant
        said it would be, or, told "-" (a reply or another process took it), when Redis says the
        next one is. Each sleep ends in a grant unless someone else took that slot meanwhile: no
        loop of "not yet", and a slot asked for when due is admitted by the windows in that trip."""
        if self.lane != BULK:
            return _text(script(keys=keys, args=args)).split(), 0.0
        waited = 0.0
        with self._gate:
            due = self._due[paid] - self.clock()
            if due > 0:
                self.sleep(due)
                waited += due
            while (answer := _text(self._asking.run(script, keys, args))).startswith("-"):
                wait = float(answer[1:])
                self.sleep(wait)
                waited += wait
            fields = answer.split()
            self._due[paid] = self.clock() + float(fields[1])
        return fields, waited

    def _late(self, paid: bool) -> float:
        """How late a bulk sender may ask for a slot it was told of and still have it (ACQUIRE's
        `late`): one window of its tightest rate (a sleep that overran, a busy machine)."""
        interval = self.free_interval if self.free_interval is not None and not paid else self.interval
        return max(interval, BATCH_WINDOW)

    def _windows(self, count: int | None, paid: bool, who: str = "-") -> tuple[list[str], list]:
        """WINDOW's keys and arguments for a call of `count` messages (no keys: no windows; None:
        the count left out, for ACQUIRE_MANY_ADMIT to add the batch's); `who`: a reply's id (see
        WINDOW), "-" for a bulk call."""
        windows = []
        if self.allowed:
            windows.append((f"{self.prefix}:window", self.allowed))
        if self.free_allowed and not paid:
            windows.append((f"{self.prefix}:window:free", self.free_allowed))
        if not windows:
            return [], []
        keys = [k for key, _ in windows for k in (key, f"{key}:sum")] + [f"{self.prefix}:window:waiting"]
        return keys, [self.span, *(cap for _, cap in windows), who, *([] if count is None else [count])]

    def _admit(self, count: int, paid: bool, who: str = "-") -> float:
        """Wait until the windows admit a call of `count` messages leaving now (see WINDOW)."""
        keys, args = self._windows(count, paid, who)
        if not keys:
            return 0.0
        waited = 0.0
        while (wait := float(self._window(keys=keys, args=args))) > 0:
            self.sleep(wait)
            waited += wait
        return waited

    def acquire_many(self, chat_ids: Sequence[int]) -> int:
        """Bulk lane: block until the first of up to len(chat_ids) sends may go, and return how
        many (the first that many of `chat_ids`) may go with it: the slots due within `batch_window`
        of each other (one round trip for all, admitted by the windows in it when asked for when
        due, as `_ask` does). The caller sends them at once; Telegram sees them bunched by at most
        that window, and evenly spaced over time. The sends carry the paid flag when paid
        broadcasts are on (as workers send). Redis errors are raised."""
        if self.lane != BULK:
            raise ValueError("acquire_many is for the bulk lane")
        paid = self.free_interval is not None
        pauses = self._pause_keys(paid)
        keys = [self.global_key, *pauses]
        args: list = [self.interval, batch_window(self.interval), self._late(paid), CHAT_BURST, len(pauses)]
        for chat_id in chat_ids:
            key = self._chat_key(chat_id)
            keys += [key, f"{key}:pause"]
            args.append(chat_interval(chat_id))
        window_keys, window_args = self._windows(None, paid)
        if window_keys:  # the batch admitted in the same trip when it is due now (ACQUIRE_MANY_ADMIT)
            script, keys, args = self._acquire_many_admit, [*keys, *window_keys], [len(keys), len(args), *args, *window_args]
        else:
            script = self._acquire_many
        fields, waited = self._ask(script, keys, args, paid)
        delay, granted = float(fields[0]), int(fields[2])
        if len(fields) == 4:  # due now, and the windows were asked with it
            wait = float(fields[3])
            if wait > 0:
                self.sleep(wait)
                waited += wait + self._admit(granted, paid)
        else:
            if delay > 0:
                self.sleep(delay)
                waited += delay
            waited += self._admit(granted, paid)
        LIMITER_WAIT.labels(self.lane).observe(waited)
        return granted

    def _chat_key(self, chat_id: int) -> str:
        return f"{self.prefix}:chat:{chat_id}"

    def pause(self, seconds: float, *, chat_id: int | None = None, paid: bool = False) -> float:
        """A FloodWait of `seconds` on a call (to `chat_id`; `paid`: it carried the paid flag):
        pause its scope (see the module's doc). Returns the pause in force."""
        FLOOD_WAITS.labels(self.lane).inc()
        FLOOD_WAIT_SECONDS.labels(self.lane).inc(seconds)
        try:
            if self.lane == REPLY and self.clock() < self._down_until:
                raise redis.ConnectionError("Redis was unreachable moments ago")
            return self._pause_shared(seconds, chat_id=chat_id, paid=paid)
        except redis.RedisError as exc:
            if self.lane == BULK:
                raise
            self._redis_down(exc)
            self._fallback.next_slot = max(self._fallback.next_slot, self.clock() + seconds)
            return seconds

    def _pause_shared(self, seconds: float, *, chat_id: int | None, paid: bool) -> float:
        if chat_id is not None and self._chat_was_busy(chat_id):
            return float(self._pause(keys=[f"{self._chat_key(chat_id)}:pause"], args=[seconds]))
        return float(self._pause(keys=[self._pause_key(self.lane, self._budget(paid))], args=[seconds]))

    def _budget(self, paid: bool) -> str:
        """The budget a call draws on: the one there is ("") without paid broadcasts, else the
        paid one for a call with the paid flag, the free one for any other."""
        if self.free_interval is None:
            return ""
        return "paid" if paid else "free"

    def _pause_key(self, lane: str, budget: str) -> str:
        """Where a FloodWait on a call of `lane` and `budget` pauses: a reply's pauses every
        call of its budget, a bulk call's the bulk lane's calls of its budget."""
        return ":".join([self.pause_key, *(["bulk"] if lane == BULK else []), *([budget] if budget else [])])

    def _pause_keys(self, paid: bool) -> list[str]:
        """The pauses a call of this lane (with the paid flag: `paid`) keeps to: its budget's in
        its lane and in every lane, and the budget-less ones (a limiter without paid broadcasts
        sharing the Redis)."""
        lanes = [REPLY, BULK] if self.lane == BULK else [REPLY]
        budgets = dict.fromkeys(["", self._budget(paid)])
        return [self._pause_key(lane, budget) for budget in budgets for lane in lanes]

    def _chat_was_busy(self, chat_id: int) -> bool:
        """Inferred: Telegram does not say which limit a FLOOD_WAIT is for. If this chat's bucket
        holds more than the call just made (the chat was also sent to within its interval before
        it), the per-chat limit is the likely one."""
        tat = self.redis.get(self._chat_key(chat_id))
        if tat is None:
            return False
        seconds, micros = self.redis.time()
        return float(tat) - (seconds + micros / 1_000_000) > chat_interval(chat_id) + 0.001

    def paused_for(self, *, paid: bool = False) -> float:
        """Seconds until this lane may send again (calls with the paid flag: `paid`), 0 or less:
        not paused."""
        return float(self._paused(keys=self._pause_keys(paid and self.free_interval is not None)))


class _GatedConnection:
    """The bulk lane's asks for slots, on one Redis connection of their own: its threads ask one at
    a time (the gate), so they need no pool. A call through redis-py's client (`Script.__call__`:
    its pool, retry, response callbacks and hooks) cost a worker twice the CPU of the command
    itself: 92 against 48 us a call in a tight loop, a fifth of a free-rate broadcast's CPU.
    The same command on the same connection class (redis.Connection's public send_command and
    read_response), with what the client did for it: a connection Redis dropped (a restart, an
    idle timeout, CLIENT KILL) is opened again and the call made once more (the pool notices a
    dropped one when lending it; here the call fails first: at worst a slot was reserved and the
    answer lost, and a slot not used costs rate, never a FloodWait); a script Redis lost (a
    restart, SCRIPT FLUSH) is loaded again, as Script.__call__ does; a forked child opens its own.
    A Redis that does not answer in REDIS_TIMEOUT raises redis.TimeoutError, once."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self.connection: redis.Connection | None = None
        self.pid = 0

    def run(self, script, keys: list, args: list):
        if self.connection is None or self.pid != os.getpid():
            self.connection = self.client.connection_pool.make_connection()
            self.pid = os.getpid()
        try:
            return self._call(script, keys, args)
        except redis.ConnectionError:  # dropped (and disconnected): once more, on a new connection
            return self._call(script, keys, args)

    def _call(self, script, keys: list, args: list):
        try:
            return self._evalsha(script, keys, args)
        except redis.exceptions.NoScriptError:
            script.sha = self.client.script_load(script.script)
            return self._evalsha(script, keys, args)

    def _evalsha(self, script, keys: list, args: list):
        connection = self.connection
        try:
            connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            return connection.read_response()
        except redis.ResponseError:  # Redis answered (NOSCRIPT, a script's error): the connection is fine
            raise
        except BaseException:  # dropped, timed out or interrupted mid-answer: start afresh next time
            connection.disconnect()
            raise


def _text(answer) -> str:
    return answer.decode() if isinstance(answer, bytes) else str(answer)
