"""The shared send limiter's Redis side: its Lua scripts (each reservation, admission and pause is
one atomic round trip) and the connection the bulk lane runs them on, one ask at a time.

limiter.py says what the limiter promises and reserves through these; nothing else runs them.
"""

from __future__ import annotations

import os

import redis

# Every script reads Redis's own clock first: one clock for every process that asks.
NOW = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
"""

# One round trip per call: the chat's slot (KEYS[1], its pause KEYS[2]), then G rate slots (KEYS[3
# .. 2+G]: the overall one, and the free one for a call without the paid flag when paid broadcasts
# are on), then, for a reply, the replies' own queues: C classes of G slots each (class k's rate i
# at KEYS[2 + G + k * G + i]), then the pauses. ARGV: chat interval, chat burst, max_ahead (-1:
# always reserve), late, has_chat (0/1), count (messages in the call), G, each rate slot's
# interval, then C (0: a bulk call, no own queues) and the reply's class (0 first). A reply is
# paced among the replies of its class and the classes before it: its slot is found in its own
# class's queues, and the queues of the classes after it and the shared ones move on by the slots
# it took (the broadcast's next batch, a later class's next reply move back by them). The last
# class (later messages) asks as bulk calls do (max_ahead: a slot due within one interval, else
# "-"), so it never holds a slot that a first message, coming after, would have to share. A
# call of `count` messages takes `count` consecutive slots and goes at the last of them (so no span
# of a second ever holds more than the rate). A rate queue moves on from the slot that rate gives
# the call, not from a later one its chat's pace or another rate sets: a reply that waits for its
# chat (or for the free 30/s while the paid 1000/s is idle) does not push the queue's next slots
# that far back. `late`: how far in the past a rate slot may still be
# taken (a bulk sender told to come at its slot that woke a little late: its slot was not lost,
# and it goes at once; a rate slot older than that was idle and is not taken back). Returns
# "<delay until the reserved slot> <delay until the next free rate slot after it>", or "-" and
# the delay until the next free slot is due (when it is more than max_ahead away): a sender that
# sleeps that long and asks again is granted it (with no delay: ACQUIRE_ADMIT admits it then).
ACQUIRE = (
    NOW
    + """
local chat_interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_ahead = tonumber(ARGV[3])
local late = tonumber(ARGV[4])
local has_chat = ARGV[5] == '1'
local count = tonumber(ARGV[6])
local g = tonumber(ARGV[7])
local classes = tonumber(ARGV[8 + g])
local class = tonumber(ARGV[9 + g] or '0')
local start = now - late
local chat_tat = nil
if has_chat then
  local chat_pause = tonumber(redis.call('GET', KEYS[2]) or '0')
  local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now, chat_pause)
  chat_tat = tat + chat_interval
  start = math.max(chat_tat - burst * chat_interval, start, chat_pause)
end
local function own_key(k, i)
  return KEYS[2 + g + k * g + i]
end
local first_pause = 3 + g + classes * g
local pause = 0
for i = first_pause, #KEYS do
  pause = math.max(pause, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
local slot = math.max(start, pause)
local rate_slot = {}
local rate_due = pause
for i = 1, g do
  local interval = tonumber(ARGV[7 + i])
  local tat = tonumber(redis.call('GET', classes > 0 and own_key(class, i) or KEYS[2 + i]) or '0')
  if tat < now - late then
    tat = now
  end
  rate_slot[i] = math.max(tat, now - late, pause) + (count - 1) * interval
  rate_due = math.max(rate_due, rate_slot[i])
  slot = math.max(slot, math.max(tat, start, pause) + (count - 1) * interval)
end
-- a reply's max_ahead is about its rates' slots (what another reply could share), not its chat's pace
local due = classes > 0 and rate_due or slot
if max_ahead >= 0 and due - now > max_ahead then
  return '-' .. string.format('%.6f', due - now)
end
if has_chat then
  redis.call('SET', KEYS[1], string.format('%.6f', chat_tat), 'PX', math.ceil((chat_tat - now) * 1000) + 1000)
end
local function advance(key, new_tat)
  redis.call('SET', key, string.format('%.6f', new_tat), 'PX', math.max(1, math.ceil((new_tat - now) * 1000) + 1000))
end
local function move_back(key, i, interval)
  advance(key, math.max(tonumber(redis.call('GET', key) or '0'), rate_slot[i] - (count - 1) * interval) + count * interval)
end
local next_ = 0
for i = 1, g do
  local interval = tonumber(ARGV[7 + i])
  local new_tat = slot + interval
  if classes > 0 then
    advance(own_key(class, i), rate_slot[i] + interval)
    for k = class + 1, classes - 1 do
      move_back(own_key(k, i), i, interval)
    end
    move_back(KEYS[2 + i], i, interval)
    new_tat = tonumber(redis.call('GET', KEYS[2 + i]))
  else
    advance(KEYS[2 + i], new_tat)
  end
  next_ = math.max(next_, new_tat - now)
end
return string.format('%.6f %.6f', math.max(slot - now, 0), next_)
"""
)

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
ACQUIRE_MANY = (
    NOW
    + """
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
)

PAUSED = (
    NOW
    + """
local until_ = 0
for i = 1, #KEYS do
  until_ = math.max(until_, tonumber(redis.call('GET', KEYS[i]) or '0'))
end
return string.format('%.6f', until_ - now)
"""
)

PAUSE = (
    NOW
    + """
local until_ = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > current then
  redis.call('SET', KEYS[1], string.format('%.6f', until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return string.format('%.6f', math.max(until_, current) - now)
"""
)

# Telegram counts its rates over any span of a second when each request ARRIVES (offline/telegram/
# rates.py models it so); the slots above are evenly spaced when reserved, but a sender that wakes
# late, a slow hop to the loop or the network's jitter can bunch them on the way. So right before a
# call leaves, it is admitted against a log of what actually left: at most ARGV[2+i] messages in
# any ARGV[1] seconds (a little over one second: TELEGRAM_RATE_SPAN), per window (KEYS[2i-1]: the
# log, "time count" entries; KEYS[2i]: their sum). ARGV[2]... the windows' caps; then each
# window's own span, when it has one longer than ARGV[1] (the free budget's with paid broadcasts
# on: TELEGRAM_FREE_RATE_SPAN); then who asks
# (a reply's own id, or "-" for a bulk call); the last ARGV is the call's count. The last KEYS:
# the replies waiting for a place (a sorted set, each id scored with when its wait ends). A
# broadcast fills the windows to their caps; a reply told to wait registers there, and bulk calls
# leave it a place while it waits, and WAITING_GRACE after (their cap is lower by the replies waiting;
# a reply that never comes back is forgotten then): the place that
# frees first is the reply's, not the next bulk batch's (which, asking at the same instant, took
# it two times in three, and replies waited up to four expiries). Returns 0
# (admitted and logged) or the seconds until it would be.
WAITING_GRACE = 0.05  # seconds a waiting reply keeps its place after its wait (WINDOW)
WINDOW = (
    NOW
    + """
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
local spans = {}
for w = 1, windows do
  local log, sum_key = KEYS[2 * w - 1], KEYS[2 * w]
  local cap = tonumber(ARGV[1 + w]) - yield
  local span = tonumber(ARGV[1 + windows + w] or ARGV[1])
  spans[w] = span
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
  local ttl = math.ceil(spans[w] * 1000) + 1000
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
)


# A user's quotas (services/fair_use.py), on the limiter's Redis: N sliding windows (at
# most cap_i in any span_i seconds, like WINDOW's, one sorted set of times each) and a calendar
# day's count. Their time is the caller's (botapp.clock, which tests and the sandbox move on), the
# first ARGV. KEYS: the told key, the strikes key, the N windows, the day's counter. ARGV: now, N,
# then span_i cap_i per window, then the day's cap (0: none), the seconds to the day's end, the
# strikes' span, the least time between two refusals told, and whether a refusal told is a strike
# (1/0). A call within every quota is counted in each and answers "ok"; one over any is not
# counted and answers "over <seconds until it fits> <told> <strikes> <which>": told 1 for the
# first refusal until then, or until that least time has passed if longer (the told key holds
# that time: the user is told once a window), and strikes, the refusals told within the strikes'
# span (a sorted set of when each was told).
QUOTA = """
local now = tonumber(table.remove(ARGV, 1))
local n = tonumber(ARGV[1])
local wait, which = 0, 0
for i = 1, n do
  local key, span, cap = KEYS[2 + i], tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - span)
  if redis.call('ZCARD', key) + 1 > cap then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local until_ = oldest[2] and (tonumber(oldest[2]) + span - now) or span
    if until_ > wait then wait, which = until_, i end
  end
end
local day_cap, day_left = tonumber(ARGV[2 * n + 2]), tonumber(ARGV[2 * n + 3])
local day_key = KEYS[3 + n]
if day_cap > 0 and tonumber(redis.call('GET', day_key) or '0') + 1 > day_cap and day_left > wait then
  wait, which = day_left, n + 1
end
if wait > 0 then
  -- told: the first refusal since the quota filled (the told key holds until when, on this clock)
  local told = tonumber(redis.call('GET', KEYS[1]) or '0') <= now
  local strike_span = tonumber(ARGV[2 * n + 4])
  local quiet = math.max(wait, tonumber(ARGV[2 * n + 5]))
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - strike_span)
  if told then
    redis.call('SET', KEYS[1], string.format('%.6f', now + quiet), 'PX', math.ceil(quiet * 1000) + 60000)
    if ARGV[2 * n + 6] == '1' then
      redis.call('ZADD', KEYS[2], now, string.format('%.6f', now))
      redis.call('PEXPIRE', KEYS[2], math.ceil(strike_span * 1000) + 60000)
    end
  end
  return string.format('over %.3f %d %d %d', wait, told and 1 or 0, redis.call('ZCARD', KEYS[2]), which)
end
for i = 1, n do
  local key, span = KEYS[2 + i], tonumber(ARGV[2 * i])
  redis.call('ZADD', key, now, string.format('%.6f', now) .. ':' .. redis.call('ZCARD', key))
  redis.call('PEXPIRE', key, math.ceil(span * 1000) + 1000)
end
if day_cap > 0 then
  redis.call('INCR', day_key)
  redis.call('PEXPIRE', day_key, math.ceil(day_left * 1000) + 60000)
end
return 'ok'
"""


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


class GatedConnection:
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


def decoded(answer) -> str:
    return answer.decode() if isinstance(answer, bytes) else str(answer)
