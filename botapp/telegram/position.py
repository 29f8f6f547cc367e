"""Where runbot has got to in Telegram's update sequences, counted by what it has handled, not by
what it has received.

Telegram numbers the events of an account (core.telegram.org/api/updates): `pts` for messages in
private chats, `qts` for some bot events (a user blocking the bot, a join request), a `pts` of its
own per channel. An update carries the number its event took it to and how many it took
(`pts_count`; a qts event takes one): it covers the span (pts - pts_count, pts]. A client that
remembers a number asks `updates.getDifference` (`getChannelDifference`) for everything after it.

kurigram stores the number an update reaches as soon as it receives the update, before any handler
has run, and commits it only at start and stop: after `kill -9` a restarted runbot asked for
everything again (and handled it twice), and an update received but not yet handled would be skipped
had the number been committed. `Position` keeps instead, per sequence, the number up to which
every update has been *handled*: the lowest start of a span still being handled, and otherwise the
end of what has been received without a hole. runbot stores it in PostgreSQL about once a second
(`PositionStore`), and asks Telegram for what came after it when it starts again.

Holes: the events of a sequence are not all updates runbot receives. The bot's own messages take a
number each (runbot's replies come back as answers, not updates; a worker's sends reach no one),
and Telegram sends updates out of order now and then. A hole that no update fills within
HOLE_WAIT is taken to be events that are not runbot's to handle. Telegram's own advice for a gap is
to wait up to 0.5 s and then ask getDifference; with a hole after nearly every reply that would be a
getDifference per reply, so runbot does not, as kurigram never did: a live update Telegram never
sent at all is not fetched (Telegram sends each message to the bot; a lost one is its bug).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyrogram import raw, utils

PTS = 0  # the account's sequence (private chats); a channel's sequence is keyed by its chat id (-100…)
QTS = "qts"  # the account's qts sequence (bot events)
# Seconds a hole in a sequence may stay open before it is taken to be events that were not runbot's
# (its own messages). Telegram's docs wait "up to 0.5 seconds" for a gap to fill itself; twice that,
# since an update handled out of order stays counted as unhandled meanwhile either way.
HOLE_WAIT = 1.0


@dataclass(frozen=True)
class Span:
    """Events (lo, hi] of one sequence."""

    box: int | str
    lo: int
    hi: int


@dataclass
class PositionState:
    """What runbot stores: the bot's own pts, qts, date and seq, each channel's pts, and which
    bot (its user id) they are the sequences of."""

    pts: int
    qts: int
    date: int
    seq: int = 0
    channels: dict[int, int] = field(default_factory=dict)  # chat id (-100…) -> pts
    bot_id: int = 0


def spans_of(update) -> list[Span]:
    """The sequence numbers a raw update covers (none for a callback query, a user typing, ...)."""
    pts = getattr(update, "pts", None)
    if isinstance(pts, int) and not isinstance(pts, bool):
        count = getattr(update, "pts_count", None) or 0
        message = getattr(update, "message", None)
        channel = getattr(getattr(message, "peer_id", None), "channel_id", None) or getattr(update, "channel_id", None)
        box = utils.get_channel_id(channel) if channel else PTS
        return [Span(box, pts - max(count, 0), pts)]
    qts = getattr(update, "qts", None)
    if isinstance(qts, int) and not isinstance(qts, bool) and not isinstance(update, raw.types.updates.State):
        return [Span(QTS, qts - 1, qts)]
    return []


class Chain:
    """One sequence as received: `value`, the end of what has come without a hole, and the spans
    that came after a hole (`ahead`: a heap of (lo, hi, when received))."""

    def __init__(self, value: int):
        self.value = value
        self.ahead: list[tuple[int, int, float]] = []

    def add(self, lo: int, hi: int, now: float) -> None:
        if lo > self.value:
            heapq.heappush(self.ahead, (lo, hi, now))
            return
        self.value = max(self.value, hi)
        self._absorb()

    def forgive(self, now: float) -> bool:
        """Close the holes open for HOLE_WAIT (a hole is as old as the oldest span received above
        it): what they stand for was not runbot's. Whether one was."""
        forgiven = False
        while self.ahead and now - min(when for _, _, when in self.ahead) >= HOLE_WAIT:
            self.value = max(self.value, self.ahead[0][0])
            self._absorb()
            forgiven = True
        return forgiven

    def _absorb(self) -> None:
        while self.ahead and self.ahead[0][0] <= self.value:
            self.value = max(self.value, heapq.heappop(self.ahead)[1])


class Ticket:
    """An update (or a batch of them, fetched together) being handled, and the spans it covers."""

    __slots__ = ("spans", "left", "key")

    def __init__(self, spans: list[Span], left: int = 1):
        self.spans = spans
        self.left = left  # packets of it not yet handled
        self.key = -1  # its place in Position.open


class Position:
    """runbot's sequences: what was received (a `Chain` each) and what is still being handled.

    The durable number of a sequence is the lowest start of a span still being handled, or else the
    end of what was received without a hole. Runs on the event loop; `started` once the stored
    state is known (updates received before that wait for it)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.chains: dict[int | str, Chain] = {}
        self.open: dict[int, Ticket] = {}  # tickets with spans still being handled, by key
        self._keys = itertools.count()
        self.early: list[Ticket] = []  # received before start()
        self.holds: dict[int | str, int] = {}  # per sequence: what was missed is fetched up to here only
        self.started = False
        self.closed = False
        self.date = 0
        self.seq = 0
        self.bot_id = 0
        self.changed = False  # the durable numbers moved since the last snapshot

    def start(self, state: PositionState) -> None:
        self.date, self.seq, self.bot_id = state.date, state.seq, state.bot_id
        self.chains = {PTS: Chain(state.pts), QTS: Chain(state.qts)}
        self.chains.update({box: Chain(pts) for box, pts in state.channels.items()})
        self.started = True
        now = self.clock()
        for ticket in self.early:
            self._receive(ticket.spans, now)
        self.early.clear()
        self.changed = True

    def received(self, spans: list[Span], packets: int = 1) -> Ticket:
        """An update (or `packets` of them, one batch) about to be handled."""
        ticket = Ticket(spans, max(packets, 0))
        if not spans:
            return ticket  # nothing to count (a callback query, a user typing): no bookkeeping
        if ticket.left:
            ticket.key = next(self._keys)
            self.open[ticket.key] = ticket
        if self.started:
            self._receive(spans, self.clock())
        else:
            self.early.append(ticket)
        self.changed = True
        return ticket

    def finished(self, ticket: Ticket) -> None:
        """One packet of `ticket` has been handled (once closed, nothing counts: runbot is stopping)."""
        if self.closed or ticket.left <= 0:
            return
        ticket.left -= 1
        if ticket.left == 0 and self.open.pop(ticket.key, None) is not None:
            self.changed = True

    def close(self) -> None:
        """runbot stops taking updates: from now on nothing counts as handled (what was in flight
        comes again at the next start, and is recognised there)."""
        self.closed = True

    def dated(self, date: int, seq: int | None = None) -> None:
        if date and date != self.date:
            self.date = date
            self.changed = True
        if seq:
            self.seq = seq

    def hold(self, box: int | str, value: int) -> None:
        """What `box` got after `value` is still being fetched: the stored number stays at most
        `value` (a hole above it is not runbot's own messages, it is what is being fetched)."""
        self.holds[box] = value
        self.changed = True

    def release(self, box: int | str) -> None:
        if self.holds.pop(box, None) is not None:
            self.changed = True

    def forget(self, box: int | str) -> None:
        """Stop following a channel's sequence (the bot is no longer in it)."""
        self.holds.pop(box, None)
        if box not in (PTS, QTS) and self.chains.pop(box, None) is not None:
            self.changed = True

    def seen(self, box: int | str) -> int | None:
        chain = self.chains.get(box)
        return None if chain is None else chain.value

    def holes(self) -> bool:
        return any(chain.ahead for chain in self.chains.values())

    def snapshot(self) -> PositionState | None:
        """The durable numbers (None before start): nothing at or below them is still to handle."""
        if not self.started:
            return None
        now = self.clock()
        for chain in self.chains.values():
            chain.forgive(now)
        lowest: dict[int | str, int] = {}
        for ticket in self.open.values():
            for span in ticket.spans:
                if span.box in self.chains:
                    lowest[span.box] = min(lowest.get(span.box, span.lo), span.lo)
        value = {
            box: min(chain.value, lowest.get(box, chain.value), self.holds.get(box, chain.value))
            for box, chain in self.chains.items()
        }
        self.changed = False
        return PositionState(
            pts=value[PTS],
            qts=value[QTS],
            date=self.date,
            seq=self.seq,
            channels={box: v for box, v in value.items() if box not in (PTS, QTS)},
            bot_id=self.bot_id,
        )

    def _receive(self, spans: Iterable[Span], now: float) -> None:
        for span in spans:
            chain = self.chains.get(span.box)
            if chain is None:  # a channel first heard of now: its sequence starts just before this update
                chain = self.chains[span.box] = Chain(span.lo)
            chain.add(span.lo, span.hi, now)
