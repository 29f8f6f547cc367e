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

The Lua scripts that do each reservation, admission and pause in one round trip, and the bulk
lane's own Redis connection, are in limiter_scripts.py.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Protocol

import redis
from django.conf import settings

from botapp.metrics import FLOOD_WAIT_SECONDS, FLOOD_WAITS, LIMITER_WAIT
from botapp.telegram.limiter_scripts import (
    ACQUIRE,
    ACQUIRE_ADMIT,
    ACQUIRE_MANY,
    ACQUIRE_MANY_ADMIT,
    PAUSE,
    PAUSED,
    WINDOW,
    GatedConnection,
    decoded,
)
from botapp.telegram.limits import GROUP_CHAT_INTERVAL, PRIVATE_CHAT_BURST, PRIVATE_CHAT_INTERVAL

# A reply of a few messages (files, then "deleted in 30 min") may go at once (PRIVATE_CHAT_BURST);
# the per-chat rate holds over time. The global rate has no burst: sends are spaced evenly.
CHAT_BURST = PRIVATE_CHAT_BURST
REPLY, BULK = "reply", "bulk"

# The reply lane's classes, first to last: the owner and admins, premium users, other users, and
# the later messages of any answer but an admin's (a chat replied to within its interval:
# RedisLimiter._reply_class). A reply is queued behind the replies of its class and the classes
# before it only; a later message takes its slot only once it is due (ACQUIRE's max_ahead).
REPLY_OWNER, REPLY_PREMIUM, REPLY_USER, REPLY_LATER = range(4)
REPLY_CLASSES = 4
_reply_class = threading.local()


@contextlib.contextmanager
def reply_class(value: int):
    """The class of the replies this thread sends inside the block (runbot's router sets it per
    update from who wrote); outside any block, REPLY_USER, and a reply is never a later message
    (a call of the console's, a test's)."""
    before = getattr(_reply_class, "value", None)
    _reply_class.value = value
    try:
        yield
    finally:
        _reply_class.value = before


def reply_class_raise(value: int) -> None:
    """Inside a reply_class block: its replies from now on go in `value` when that is before the
    block's class (the router learns a user is premium once it has read their row)."""
    _reply_class.value = min(value, reply_class_current())


def reply_class_current() -> int:
    value = getattr(_reply_class, "value", None)
    return REPLY_USER if value is None else value


# A user's share of the free budget (Bot settings' fair use): the reply lane spaces the messages
# to one user at least this far apart, on top of the chat's own pace. Set by the router per update
# (it reads the settings); outside it, the chat's pace alone.
_user_pace = threading.local()


@contextlib.contextmanager
def user_pace(interval: float):
    """Inside the block, messages to one private chat are at least `interval` seconds apart (0:
    the chat's own pace, Telegram's about one a second)."""
    before = getattr(_user_pace, "value", 0.0)
    _user_pace.value = interval
    try:
        yield
    finally:
        _user_pace.value = before


class Limiter(Protocol):
    """What the gateway asks of a limiter (RedisLimiter, its LocalLimiter fallback, a test's)."""

    count_max: int  # the most messages one call should deliver (a forward's ids)

    def acquire(self, chat_id: int | None = None, *, count: int = 1, paid: bool = False) -> float: ...
    def acquire_many(self, chat_ids: Sequence[int]) -> int: ...
    def pause(self, seconds: float, *, chat_id: int | None = None, paid: bool = False) -> float: ...


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
# over is lost to the broadcast (replies may use it): 1000 holds 52 batches of 19 (12 left) but 62
# of 16 (8 left), so 16 comes nearer the cap. Smaller batches cost a worker more CPU a send for no
# more rate; bigger ones (a window twice as long) cost less CPU but fill the windows in bigger
# steps, and a paid broadcast end to end lost rate and met FLOOD_WAITs. The side-by-side runs are
# in the message of fb214d5, the commit that set 16.
BATCH_WINDOW = 0.017
BATCH_MAX = 50  # sends per batch at most, whatever the rate
# Sends per batch at least, whatever the rate: at the free rate (28.8/s) a pair, two slots 35 ms
# apart sent at once. Each batch costs a worker the same thread hops, Redis call, container and
# answer whatever its size, so one send at a time cost about twice a pair's CPU a send. No more
# than a pair: a reply waits for a place in the windows, and a pair's places free two at a time.
# End to end (bench/broadcast.py --mode free) replies keep within their goal in pairs, and the runs
# meet no FLOOD_WAIT (one at a time met a few a run); docs/benchmarks.md has the current figures.
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
    admit calls against (None: no window, only the paced slots); `span`: the windows' length;
    `free_span`: the free window's, when longer (paid broadcasts on: TELEGRAM_FREE_RATE_SPAN)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        rate: float,
        free_rate: float | None = None,
        allowed: float | None = None,
        free_allowed: float | None = None,
        span: float = 1.0,
        free_span: float | None = None,
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
        self.free_span = max(span, free_span or span)
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
        self._asking = GatedConnection(client)  # the gate's own connection: one ask at a time
        # When the next free slot is due (this process's clock), as the last grant said, for calls
        # without and with the paid flag: the next thread asks then, not before (asking before it
        # would be a "not yet" round trip), and is granted and admitted in one.
        self._due = {False: 0.0, True: 0.0}
        self._process = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._replies = itertools.count()  # thread-safe: next() on a count holds the GIL
        # When this process last took a reply slot for each chat (its clock): a reply to a chat
        # within its interval of the last is a later message (REPLY_LATER). Replies come from
        # runbot alone, so its own record is the whole story (ACQUIRE also sees a worker's sends).
        self._replied: dict[int, float] = {}

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
                free_span=settings.TELEGRAM_FREE_RATE_SPAN,
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
        cls = REPLY_USER if bulk else self._reply_class(chat_id)
        chat_key = self._chat_key(chat_id) if chat_id is not None else self.global_key
        rates = [(self.global_key, self.interval)]
        if self.free_interval is not None and not paid:
            rates.append((self.free_key, self.free_interval))
        # A reply's slot is paced among the replies of its class and the classes before it (their
        # own queues: reply_class), not behind the slots a broadcast reserved; it takes its slots
        # from the shared queues all the same (the broadcast's next batch moves back by them), and
        # the windows give it the first place.
        own = [f"{k}:replies:{c}" for c in range(REPLY_CLASSES) for k, _ in rates] if not bulk else []
        keys = [chat_key, f"{chat_key}:pause", *(k for k, _ in rates), *own, *self._pause_keys(paid)]
        args = [
            self._chat_pace(chat_id) if chat_id is not None else 0,
            CHAT_BURST,
            self._ahead(count, paid) if bulk or cls == REPLY_LATER else -1,
            self._late(paid) if bulk else 0,
            int(chat_id is not None),
            count,
            len(rates),
            *(i for _, i in rates),
            0 if bulk else REPLY_CLASSES,
            cls,
        ]
        # A reply's id while it waits for the windows (bulk calls leave it a place: WINDOW).
        # A reply's id while it waits for the windows (bulk calls, and a later message of a reply,
        # leave it a place: WINDOW); a later message is not given one itself.
        who = "-" if bulk or cls == REPLY_LATER else f"{self._process}:{next(self._replies)}"
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
        if self.lane != BULK:  # a reply asks once; a later message (max_ahead) when its slot is due
            waited = 0.0
            while (answer := decoded(script(keys=keys, args=args))).startswith("-"):
                wait = float(answer[1:])
                self.sleep(wait)
                waited += wait
            return answer.split(), waited
        waited = 0.0
        with self._gate:
            due = self._due[paid] - self.clock()
            if due > 0:
                self.sleep(due)
                waited += due
            while (answer := decoded(self._asking.run(script, keys, args))).startswith("-"):
                wait = float(answer[1:])
                self.sleep(wait)
                waited += wait
            fields = answer.split()
            self._due[paid] = self.clock() + float(fields[1])
        return fields, waited

    def _ahead(self, count: int, paid: bool) -> float:
        """How far ahead a call that takes what others leave (a bulk call, a later message of a
        reply) may reserve its slot: one interval of its tightest rate per message (a later
        message one more: the slot after the one a first message may be taking). Further, it is
        told when to ask again (ACQUIRE's "-"), and a reply of a class before it, asking
        meanwhile, takes that slot: no two hold one slot for long."""
        if self.lane == BULK:
            return self.interval * count
        interval = self.free_interval if self.free_interval is not None and not paid else self.interval
        return interval * (count + 1)

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
        spans = [self.free_span if key.endswith(":free") else self.span for key, _ in windows]
        return keys, [self.span, *(cap for _, cap in windows), *spans, who, *([] if count is None else [count])]

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

    def _reply_class(self, chat_id: int | None) -> int:
        """The class of a reply to `chat_id`: the thread's (reply_class), or REPLY_LATER for a
        chat this process replied to within its interval (unless the thread's is REPLY_OWNER)."""
        cls = reply_class_current()
        if chat_id is None or getattr(_reply_class, "value", None) is None:
            return cls
        now = self.clock()
        last = self._replied.get(chat_id)
        if len(self._replied) > 10_000:
            self._replied.clear()
        self._replied[chat_id] = now
        if cls != REPLY_OWNER and last is not None and now - last < chat_interval(chat_id):
            return REPLY_LATER
        return cls

    def _chat_pace(self, chat_id: int) -> float:
        """The interval a reply keeps to in `chat_id`: the chat's, or the user's share of the
        budget when that is longer (user_pace)."""
        pace = chat_interval(chat_id)
        return max(pace, getattr(_user_pace, "value", 0.0)) if chat_id > 0 else pace

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
        """Inferred: Telegram does not say which limit a FLOOD_WAIT is for. The calls to one chat
        keep to its burst and pace (ACQUIRE), so its own limit is the likely one only when more
        than a burst is queued for it (the chat is being paced, and a late or bunched arrival
        could break its pace); a call within a chat's burst (a file answer's copies and notice)
        was refused by a budget, which must pause for everyone: pausing the chat alone let the
        next replies meet the budget's wait too (the 2-file link burst: four more FLOOD_WAITs)."""
        tat = self.redis.get(self._chat_key(chat_id))
        if tat is None:
            return False
        seconds, micros = self.redis.time()
        interval = self._chat_pace(chat_id)
        return float(tat) - (seconds + micros / 1_000_000) > CHAT_BURST * interval + 0.001

    def paused_for(self, *, paid: bool = False) -> float:
        """Seconds until this lane may send again (calls with the paid flag: `paid`), 0 or less:
        not paused."""
        return float(self._paused(keys=self._pause_keys(paid and self.free_interval is not None)))
