"""Telegram's rate limits as the in-memory Telegram applies them, and the network in between.

Documented (core.telegram.org/bots/faq#broadcasting-to-users, "paid broadcasts"): about 30
messages per second overall; with paid broadcasts up to 1000 per second, "charging … per message
beyond the free amount of 30": one overall budget of 1000/s that free sends share, of which at
most 30/s without the paid flag; about one message per second in a private chat; at most 20
messages per minute in a group. Telegram does not say how it measures any of them. Every shape
below is inferred and chosen stricter than Telegram is likely to be; each constant says so.
"""

from __future__ import annotations

import collections
import math
import random
from dataclasses import dataclass

from inmemory_telegram import limits

# Inferred: "N per second" holds over ANY one-second span, measured at the moment each request
# arrives (when its client wrote it, plus the network's delay: TelegramServer.arrived): a sliding
# window, not per fixed one-second bucket (which would let 2N through across a bucket's edge), and
# with no tolerance for arrivals that bunch.
WINDOW = 1.0
# Inferred: an album of 10 counts 10 messages against the overall budgets, a forward of 100 ids
# counts 100 (stricter than one per request). TelegramServer(count_per_message=False) counts one
# per request instead: the product must be right under both.
COUNT_PER_MESSAGE = True
# Inferred: the per-chat limit counts requests, not messages. Telegram delivers an album of 10 to
# a private chat in one request; counting it as 10 against "one per second" would make every album
# a FloodWait, which Telegram's own clients show is not so.
# Inferred: reads (messages.getMessages, channels.getMessages) and deletes (messages.deleteMessages,
# channels.deleteMessages) are limited too, one per request, inside the same free 30/s budget as
# sends. Telegram documents no rate for them; a budget of their own would be more lenient.
CALL_LIMITED = frozenset({"messages.GetMessages", "channels.GetMessages", "messages.DeleteMessages", "channels.DeleteMessages"})
# Inferred: FloodWaits grow on repeated excess. A request that arrives more than IGNORED_AFTER
# seconds after Telegram told its limit to wait, while that wait still runs (the client had the
# answer and sent anyway), gets FLOOD_ESCALATION times the last wait; so does a new excess within
# STRIKES_FORGOTTEN seconds after a wait ended. Up to FLOOD_WAIT_CEILING seconds: beyond any
# TELEGRAM_MAX_FLOOD_WAIT an operator sets. Requests already on their way when the wait was told
# (a container's other items) get what is left of it.
FLOOD_ESCALATION = 2
FLOOD_WAIT_CEILING = 3600
IGNORED_AFTER = 1.0
STRIKES_FORGOTTEN = 60.0


class Window:
    """At most `limit` counted in any `span` seconds."""

    def __init__(self, limit: float, span: float = WINDOW):
        self.limit = limit
        self.span = span
        self.entries: collections.deque[tuple[float, int]] = collections.deque()
        self.total = 0

    def wait(self, now: float, count: int) -> float:
        """0 if `count` more fit now, else seconds until they do (a count over the limit never
        fits: the whole span)."""
        while self.entries and self.entries[0][0] <= now - self.span:
            self.total -= self.entries.popleft()[1]
        excess = self.total + count - self.limit
        if excess <= 0:
            return 0.0
        if count > self.limit:
            return self.span
        for at, n in self.entries:
            excess -= n
            if excess <= 0:
                return at + self.span - now
        return self.span

    def add(self, now: float, count: int) -> None:
        self.entries.append((now, count))
        self.total += count


class Gcra:
    """One message per `interval`, a burst of `burst` (the per-chat limits)."""

    def __init__(self, interval: float, burst: float):
        self.interval = interval
        self.burst = burst
        self.tat = 0.0

    def wait(self, now: float) -> float:
        return max(0.0, max(self.tat, now) - (self.burst - 1) * self.interval - now)

    def add(self, now: float) -> None:
        self.tat = max(self.tat, now) + self.interval


@dataclass
class Told:
    at: float
    until: float
    seconds: int


class Rates:
    """The limits of one bot. `check` raises nothing: it answers the FloodWait seconds (0: go)
    and, when 0, counts the request."""

    def __init__(self, *, global_rate: float, paid_rate: float, count_per_message: bool = COUNT_PER_MESSAGE):
        self.count_per_message = count_per_message
        self.overall = Window(paid_rate)
        self.free = Window(global_rate)
        self.chats: dict[int, tuple[Gcra, Window | None]] = {}
        self.told: dict[object, Told] = {}

    def _chat(self, chat_id: int) -> tuple[Gcra, Window | None]:
        found = self.chats.get(chat_id)
        if found is None:
            if chat_id > 0:
                found = (Gcra(limits.PRIVATE_CHAT_INTERVAL, limits.PRIVATE_CHAT_BURST), None)
            else:  # documented: 20 a minute; the burst of 3 before the pace is inferred, as for users
                found = (Gcra(limits.GROUP_CHAT_INTERVAL, limits.PRIVATE_CHAT_BURST), Window(limits.GROUP_PER_MINUTE, 60.0))
            self.chats[chat_id] = found
        return found

    def check(self, now: float, *, chat_id: int | None, paid: bool, messages: int = 1) -> int:
        count = messages if self.count_per_message else 1
        limited: list[tuple[object, float]] = [("overall", self.overall.wait(now, count))]
        if not paid:
            limited.append(("free", self.free.wait(now, count)))
        chat = self._chat(chat_id) if chat_id is not None else None
        if chat is not None:
            limited.append((("chat", chat_id), chat[0].wait(now)))
            if chat[1] is not None:
                limited.append((("group", chat_id), chat[1].wait(now, 1)))
        for n, (key, wait) in enumerate(limited):  # a FloodWait told is a wait: nothing goes before its end
            told = self.told.get(key)
            if told is not None and now < told.until:
                limited[n] = (key, max(wait, told.until - now))
        over = [(key, wait) for key, wait in limited if wait > 0.0005]
        if over:
            return max(self._told(key, now, wait) for key, wait in over)
        self.overall.add(now, count)
        if not paid:
            self.free.add(now, count)
        if chat is not None:
            chat[0].add(now)
            if chat[1] is not None:
                chat[1].add(now, 1)
        return 0

    def _told(self, key, now: float, wait: float) -> int:
        told = self.told.get(key)
        seconds = max(1, math.ceil(wait))
        if told is not None and now < told.until:
            if now - told.at <= IGNORED_AFTER:  # on its way before the client could know
                return max(seconds, math.ceil(told.until - now))
            seconds = min(FLOOD_WAIT_CEILING, max(seconds, told.seconds * FLOOD_ESCALATION))
        elif told is not None and now < told.until + STRIKES_FORGOTTEN:
            seconds = min(FLOOD_WAIT_CEILING, max(seconds, told.seconds * FLOOD_ESCALATION))
        self.told[key] = Told(now, now + seconds, seconds)
        return seconds


@dataclass(frozen=True)
class Network:
    """The way from a client to Telegram: each packet arrives `base` seconds after it was written
    plus a random part (exponential, mean `spread`, at most `cap`), in the order written on its
    connection (TCP): a late packet holds back those behind it."""

    base: float
    spread: float
    cap: float

    def delay(self, rng: random.Random) -> float:
        if not self.spread:
            return self.base
        return self.base + min(self.cap, rng.expovariate(1.0 / self.spread))


# Inferred: a worker in a data centre near Telegram's: ~15 ms one way, a few ms of jitter with a
# tail up to 25 ms. `manage.py telegram_server` uses it unless told `--network none`; in-process
# test servers have no network unless given one.
REALISTIC = Network(base=0.015, spread=0.004, cap=0.025)
NETWORKS = {"realistic": REALISTIC, "none": None}
