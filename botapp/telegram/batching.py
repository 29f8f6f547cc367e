"""A worker's batch of sends (`send_many`): each grant of the limiter goes to Telegram as one MTProto
container, in one hop to the loop, every request serialized before the limiter admits it.

A batch's state is `_Batch`: per item its result, its peer, its request's bytes and its two
counters (answers that count as attempts, asks after no answer), and for the batch the items left,
the groups whose admission lapsed, and why it stopped. What happens after each answer is retry.py's
rule (`CallPolicy`); this module only applies it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyrogram import raw

from botapp.metrics import ADMISSIONS_LAPSED
from botapp.telegram import request
from botapp.telegram.gateway import (
    BadRequest,
    BotUnauthorized,
    FloodWait,
    OutcomeUnknown,
    SendItem,
    Sent,
    TelegramError,
    random_id_of,
)
from botapp.telegram.kurigram import Lapsed, Unanswered, Written
from botapp.telegram.media import MEDIA_FILE_TYPES
from botapp.telegram.messages import MessageMethods
from botapp.telegram.request import error_to_domain, peer_check
from botapp.telegram.retry import ADMISSIONS_LAPSED_MAX, ADMITTED_FOR, Retry, keyed

log = logging.getLogger(__name__)


class InFlightError(Exception):
    """A bug (not Telegram's answer) that struck while a keyed send was on its way, raised from it:
    the send may have arrived (`maybe_delivered`). Not a TelegramError: the sweep hands the row
    back and fails the run loudly; the row is sent again with its random_id (delivered once)."""

    maybe_delivered = True


def _in_flight(exc: Exception, item: SendItem) -> Exception:
    """A batch item's result when a bug struck while its group was on its way. A keyed item gets
    InFlightError: handed back to be sent again with the same random_id, and the run fails (as
    OutcomeUnknown it would be recorded as Telegram's lost answer, and the bug go unreported when
    it struck the batch's last group). An item without a key cannot be sent again safely:
    OutcomeUnknown, at most once."""
    message = f"unexpected error while sending: {type(exc).__name__}: {exc}"[:200]
    if item.key:
        error = InFlightError(message)
        error.__cause__ = exc
        return error
    return OutcomeUnknown(message)


def _random_id() -> int:
    """A message's random_id, made in any thread: kurigram's rnd_id (MsgId) is a clock-based
    counter that two threads can make twice, and Telegram sends a message once per random_id."""
    return random.getrandbits(64) - 2**63


@dataclass
class _Batch:
    """One `send_many`, by item index n."""

    items: Sequence[SendItem]
    outcomes: list  # each item's result once settled (None: not yet)
    peers: dict[int, raw.base.InputPeer | None] = field(default_factory=dict)
    # Each request serialized once (a retry sends the same bytes, so the same random_id); None:
    # built on the loop (`_send_group`).
    requests: dict[int, Written | None] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)  # answers counted (CallPolicy.after)
    asked_again: dict[int, int] = field(default_factory=dict)  # no answer, asked again (after_unanswered)
    todo: list[int] = field(default_factory=list)  # not settled, in the order they go
    lapsed: int = 0  # groups not written within their admission (admission_bounded)
    stop: Exception | None = None  # nothing more can be sent: the items left get this


@dataclass
class _Settled:
    """What a group's answers leave to do: the items to send again, the longest FloodWait among
    them (the limiter paused for it), and how long to wait before the next group."""

    again: list[int] = field(default_factory=list)
    flood: int = 0
    wait: float = 0.0

    def retry(self, n: int, after: Retry) -> None:
        self.again.append(n)
        self.wait = max(self.wait, after.wait)


class BatchSending(MessageMethods):
    """`send_many` in containers. `admitted_for`: seconds an admitted group may take to be written."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.admitted_for = ADMITTED_FOR

    def send_many(self, items: Sequence[SendItem]) -> list[Sent | TelegramError | Exception]:
        """A worker's batch: each grant of the limiter (`acquire_many`: as many slots as are due
        together) goes to Telegram as one MTProto container, in one hop to the loop; Telegram
        answers each message of it on its own (`_invoke_many`). Per item, as `_call` does: a
        FloodWait pauses the limiter's scope and the item is asked again, a transient error is
        retried, up to MAX_ATTEMPTS; every other error is that item's result. When the batch
        cannot go on (the limiter's Redis down, the bot's token refused, an exception that is not
        Telegram's: a bug), what was sent stays Sent and every item not sent gets that exception;
        the items of a group in flight when a bug struck may have arrived: InFlightError (keyed:
        sent again with the same random_id) or OutcomeUnknown (no key: never sent again). runbot
        (which parses its answers) and media given by URL go one by one."""
        by_url = any(i.media is not None and (i.media.kind not in MEDIA_FILE_TYPES or "://" in i.media.file) for i in items)
        if self._parses_answers or by_url:
            return super().send_many(items)
        self._refuse_the_loop()
        batch = self._batch_prepare(items)
        while batch.todo and batch.stop is None:
            try:
                granted = (
                    self.limiter.acquire_many([items[n].chat_id for n in batch.todo])
                    if self.limiter is not None
                    else len(batch.todo)
                )
            except Exception as exc:  # noqa: BLE001 - Redis down: nothing more goes, nothing sent is lost
                batch.stop = exc
                break
            write_by = time.monotonic() + self.admitted_for if self.policy.admission_bounded(batch.lapsed) else None
            group, batch.todo = batch.todo[:granted], batch.todo[granted:]
            try:
                answers = self._run(self._send_group([items[n] for n in group], batch.peers, [batch.requests[n] for n in group], write_by=write_by), send=True)  # fmt: skip
            except (TelegramError, BotUnauthorized) as exc:  # no answer at all: this group's, not the others'
                answers = [exc] * len(group)
            except Exception as exc:  # a bug while this group was on its way: it may have arrived
                log.error("unexpected error sending a group of %d: nothing more of this batch is sent", len(group), exc_info=exc)
                for n in group:
                    batch.outcomes[n] = _in_flight(exc, items[n])
                batch.stop = exc
                break
            settled = self._group_settle(batch, group, answers)
            if settled.flood:
                log.warning(
                    "FloodWait %ss on %d of a batch of %d: the limiter pauses", settled.flood, len(settled.again), len(group)
                )
            elif settled.wait and batch.stop is None:
                self.sleep(settled.wait)
            batch.todo = settled.again + batch.todo
        for n in batch.todo:
            batch.outcomes[n] = batch.stop
        if self._learnt:  # users of this batch addressed by id alone, whose hash Telegram named: once per batch
            self._learnt_hand_on()
        return batch.outcomes  # type: ignore[return-value]

    def _batch_prepare(self, items: Sequence[SendItem]) -> _Batch:
        """The batch with each item's peer and request made before the limiter admits any: an
        admitted group leaves at once. Telegram counts a send when it arrives, the windows when
        they admit it; what runs between them can bunch sends. An item whose peer or request
        cannot be made has its result already (a bug: handed back unsent); a user with no stored
        access hash is addressed by id alone (request.ZERO_HASH)."""
        batch = _Batch(items, [None] * len(items))
        for n, item in enumerate(items):
            try:
                peer_check(item.chat_id)
                batch.peers[item.chat_id] = self._input_peer(item.chat_id)
            except Exception as exc:  # noqa: BLE001 - that item's result (an invalid id, or a bug: handed back)
                batch.outcomes[n] = exc
        batch.attempts = dict.fromkeys(range(len(items)), 0)
        batch.asked_again = dict.fromkeys(range(len(items)), 0)
        for n, item in enumerate(items):
            if batch.outcomes[n] is None:
                try:
                    batch.requests[n] = self._prebuilt(item, batch.peers.get(item.chat_id))
                except Exception as exc:  # noqa: BLE001 - a bug building it: that item goes back unsent
                    batch.outcomes[n] = exc
        batch.todo = [n for n in range(len(items)) if batch.outcomes[n] is None]
        return batch

    def _group_settle(self, batch: _Batch, group: list[int], answers: list) -> _Settled:
        """Each answer of a group becomes its item's result, or the item is asked again as
        retry.py's rule says."""
        settled = _Settled()
        items = batch.items
        if any(isinstance(answer, Lapsed) for answer in answers):
            batch.lapsed += 1
            ADMISSIONS_LAPSED.labels(getattr(self.limiter, "lane", "bulk")).inc()
            if batch.lapsed == ADMISSIONS_LAPSED_MAX:
                log.warning("%d groups of this batch were not written within %.0f ms of their admission: "
                            "the rest of this batch goes unbounded", batch.lapsed, self.admitted_for * 1000)  # fmt: skip
        for n, answer in zip(group, answers, strict=True):
            if isinstance(answer, Lapsed):  # never left: the limiter is asked again, no attempt spent
                settled.again.append(n)
                continue
            if isinstance(answer, Unanswered):
                batch.asked_again[n] += 1
                after = self.policy.after_unanswered(batch.asked_again[n])
                if after.again:  # the same bytes again, admitted again
                    batch.requests[n] = answer.query
                    settled.retry(n, after)
                    continue
                answer = answer.cause
            batch.attempts[n] += 1
            if isinstance(answer, int):
                batch.outcomes[n] = Sent(items[n].chat_id, answer)
                continue
            error = answer if isinstance(answer, (TelegramError, BotUnauthorized)) else error_to_domain(answer, send=True)
            error = keyed(self.refused_unknown(items[n].chat_id, error), items[n])
            if error is None:  # not Telegram's answer: a bug building this item's request (not sent)
                batch.outcomes[n] = answer
                continue
            if isinstance(error, BotUnauthorized):
                batch.outcomes[n] = batch.stop = error  # Telegram refused the bot itself: nothing was sent
                continue
            try:
                after = self.policy.after(error, attempt=batch.attempts[n], chat_id=items[n].chat_id, paid=bool(self.paid))
            except Exception as exc:  # noqa: BLE001 - Redis down: this item is not asked again
                batch.outcomes[n] = error
                batch.stop = batch.stop or exc
                continue
            if isinstance(error, FloodWait):
                settled.flood = max(settled.flood, error.seconds)
            if after.again:
                settled.retry(n, after)
                continue
            batch.outcomes[n] = error
        return settled

    async def _send_group(
        self, items: list[SendItem], peers: dict, prebuilt: list, *, write_by: float | None = None
    ) -> list[int | BaseException]:
        """Send them all: each item's request as the sending thread serialized it (`_prebuilt`),
        or else built here (the text's HTML parsed once per distinct text); none written after
        `write_by` (those are Lapsed: kurigram.invoke_many)."""
        answers: list[int | BaseException | None] = [None] * len(items)
        queries: list[tuple[int, raw.core.TLObject]] = []
        for n, item in enumerate(items):
            if prebuilt[n] is not None:
                queries.append((n, prebuilt[n]))
                continue
            try:
                peer = peers.get(item.chat_id) or await self.client.resolve_peer(item.chat_id)
                queries.append((n, await self._request(item, peer)))
            except Exception as exc:  # noqa: BLE001 - that item's result
                answers[n] = exc
        answered = await self._invoke_many([q for _, q in queries], write_by=write_by, one_sent=True, ask_again=False)
        for (n, _), answer in zip(queries, answered, strict=True):
            if isinstance(answer, BaseException):
                answers[n] = answer
            else:
                ids = request.sent_ids(answer)
                answers[n] = ids[0] if ids else BadRequest(f"no message id in Telegram's answer {type(answer).__name__}")
        return answers  # type: ignore[return-value]

    def _prebuilt(self, item: SendItem, peer) -> Written | None:
        """The item's request serialized in the sending thread, when everything it takes is at
        hand: the user's peer, the text's parsed HTML and the keyboard's bytes in their caches
        (so a broadcast's or a sweep's sends after the first). The loop then only wraps, encrypts
        and writes, and it also reads every answer: building 100 notices there held it 4 ms.
        None: `_send_group` builds it on the loop."""
        if peer is None:
            return None
        parsed = self._parse_cache.get(item.text) if item.text else ("", None)
        keyboard = self._markup_cache.get(tuple(tuple(row) for row in item.buttons)) if item.buttons else None
        if parsed is None or (item.buttons and keyboard is None):
            return None
        query = self._request_of(item, peer, parsed, keyboard, random_id=random_id_of(item.key) if item.key else _random_id())
        return Written(self._wire(query).write(), query)
