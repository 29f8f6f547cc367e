"""Every decision to ask Telegram again, in one place: what is asked again, how often, after what.

A request can be asked again at six places; each asks this module, none decides alone:

1. A FloodWait (Telegram: too fast). `CallPolicy.after` pauses the scope Telegram limited in the
   shared limiter (the chat for a send, else the senders of the call's lane and budget: see
   limiter.py) and the call is asked again once the limiter lets it: not without a limiter, not
   past `max_flood_wait`, up to MAX_ATTEMPTS. Asked by the request layer for one call
   (request.py, `_call`) and by the batch for each of its items (batching.py).
2. A transient error (the request never reached Telegram, or was refused before processing):
   `CallPolicy.after` again, after an exponential back-off from BACKOFF_BASE, up to MAX_ATTEMPTS.
3. No answer, or Telegram's own trouble (500, -503: it may or may not have done it). A batch and
   a call asked alone (runbot's replies and plain sends, albums, pins, forwards, deletions:
   request.py `_invoke`; and, inside such a call, what kurigram's own methods ask through
   `client.invoke`: texts with callback buttons, media by URL, edits, button answers, reads:
   kurigram.asked_through) ask again themselves, so that each ask is admitted by the limiter:
   `CallPolicy.after_unanswered`, the same bytes (the same random_id) after kurigram's
   RETRY_DELAY, ASK_AGAIN_MAX asks in all, as kurigram would. Only what kurigram asks outside a
   call (signing in, its update catch-up, uploads) keeps its `Session.invoke` retries. When
   kurigram discarded the answer as out of time (a client clock that is off), the session is
   restarted before asking again (kurigram.clock_recover). The request layer waits CALL_TIMEOUT,
   longer than all the asks, before it calls the outcome unknown.
4. An admission that lapsed (a batch's group not written within ADMITTED_FOR of the limiter's
   grant): it never left, so the limiter is asked again and no attempt is spent; after
   ADMISSIONS_LAPSED_MAX lapses in one batch the rest goes unbounded (`admission_bounded`).
5. A later run (the sweeps, services/outgoing.py `send_failure`): `send_later` says which refused
   sends a sweep hands back `pending`: nothing was delivered (a FloodWait or transient error that
   outlasted 1 and 2), or the outcome is unknown and every message carried its row's random_id
   (`repeatable`, set by `repeatable_when` and `keyed` below), so Telegram delivers it once.

6. A read of a stored file (downloads.py: upload.getFile, and the message read again for a fresh
   file reference): `read_after`. A FloodWait is waited out when it is at most `max_flood_wait`
   (the cap sends have, TELEGRAM_MAX_FLOOD_WAIT); a transient error (a dropped connection, no
   answer) after a back-off; up to READ_ATTEMPTS in a row. A read changes nothing, so asking again
   is always safe.

Not decisions about Telegram's answer, and so not here: kurigram.invoke_many sends again at once
what MTProto's session protocol refused (bad_server_salt, bad_msg_notification: nothing was
processed), as kurigram's Session does; and a user's access hash missing from kurigram's storage
is a second hop to the loop with the same limiter slot (request.py, `_NotCached`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from pyrogram.session import Session

from botapp.telegram.gateway import FloodWait, OutcomeUnknown, SendItem, TelegramError, TransientError
from botapp.telegram.limiter import Limiter

# Longer than kurigram's own retry loop for one request (MAX_RETRIES attempts of WAIT_TIMEOUT plus
# RETRY_DELAY each, about 160 s): while kurigram still retries (with the same random_id, which
# Telegram deduplicates), Courier never gives up and sends again with a new one.
CALL_TIMEOUT = Session.MAX_RETRIES * (Session.WAIT_TIMEOUT + Session.RETRY_DELAY) + 30
MAX_ATTEMPTS = 3
BACKOFF_BASE = 0.5  # seconds: 0.5, 1, 2 ...
# How long after the limiter admits a group it may still be written (send_many): the windows count
# what they admit, Telegram what arrives, and the windows' span (TELEGRAM_RATE_SPAN, 1.04 s) leaves
# 40 ms for the two to differ. The network takes up to 25 ms of it (its jitter; the in-memory
# Telegram's inference), this the rest, with room. A group not written by then (its thread or the
# loop stalled: the GIL, the CPU, a garbage collection) never leaves: the limiter is asked again
# (no attempt spent; the windows counted it once already, which costs a little rate, not a
# FloodWait). After ADMISSIONS_LAPSED_MAX lapses in one batch, a stalled machine's sends go with no
# bound (a FloodWait, if one comes, pauses the budget as any does).
ADMITTED_FOR = 0.01
ADMISSIONS_LAPSED_MAX = 5
# A send of a batch that Telegram left unanswered (no answer in time, or 500/-503: it may or may not
# have done it) is asked again as kurigram's `invoke` would (the same bytes, so the same random_id,
# after its RETRY_DELAY, up to its MAX_RETRIES times in all), but each time admitted by the limiter
# like any send: kurigram's own retries went out past the windows, a batch's worth at once after an
# outage of answers.
ASK_AGAIN_MAX = Session.MAX_RETRIES
ASK_AGAIN_WAIT = Session.RETRY_DELAY

# What a later run does with a send Telegram refused (`send_later`).
AGAIN = "again"  # nothing was delivered: it is sent as any pending row is
REPEAT = "repeat"  # it may have arrived: it is sent again with the same random_id, delivered once


@dataclass(frozen=True)
class Retry:
    """What to do after an attempt Telegram refused: ask again after `wait` seconds, or give up."""

    again: bool
    wait: float = 0.0


class CallPolicy:
    """The rule for every Telegram call, alone (`_call`) or in a batch (`send_many`): places 1 to 4
    of this module's list. `pause` may raise (Redis down): the caller stops sending."""

    def __init__(self, *, limiter: Limiter | None, max_flood_wait: int, attempts: int = MAX_ATTEMPTS):
        self.limiter = limiter
        self.max_flood_wait = max_flood_wait
        self.attempts = attempts

    def after(self, error: TelegramError, *, attempt: int, chat_id: int | None, paid: bool = False) -> Retry:
        """After a refusal (1 and 2). `paid`: the refused call carried the paid-broadcast flag (its
        FloodWait is the paid budget's, not the free one's). Anything but a FloodWait or a
        transient error is the call's result."""
        if isinstance(error, FloodWait):
            if self.limiter is None:
                return Retry(False)
            self.limiter.pause(error.seconds, chat_id=chat_id, paid=paid)
            return Retry(error.seconds <= self.max_flood_wait and attempt < self.attempts)
        if isinstance(error, TransientError):
            return Retry(attempt < self.attempts, BACKOFF_BASE * 2 ** (attempt - 1))
        return Retry(False)

    @staticmethod
    def after_unanswered(asked: int) -> Retry:
        """After a batch's send went unanswered for the `asked`-th time (3): the same bytes again,
        admitted again; past ASK_AGAIN_MAX the send's result is its cause."""
        return Retry(True, ASK_AGAIN_WAIT) if asked < ASK_AGAIN_MAX else Retry(False)

    def admission_bounded(self, lapsed: int) -> bool:
        """Whether a batch's next group must be written within ADMITTED_FOR of its admission (4),
        after `lapsed` groups of the batch were not."""
        return self.limiter is not None and lapsed < ADMISSIONS_LAPSED_MAX


def send_later(exc: TelegramError) -> str | None:
    """What a later run does with a send Telegram refused (5): AGAIN when nothing was delivered,
    REPEAT when it may have arrived with its key's random_id, None when it is never sent again."""
    if isinstance(exc, (FloodWait, TransientError)):
        return AGAIN
    if isinstance(exc, OutcomeUnknown) and exc.repeatable:
        return REPEAT
    return None


@contextlib.contextmanager
def repeatable_when(keyed: bool):
    """An OutcomeUnknown raised inside may be sent again (with the same random_ids) when every
    message of the call carried its key's random_id (`keyed`)."""
    try:
        yield
    except OutcomeUnknown as exc:
        exc.repeatable = keyed
        raise


def keyed(error, item: SendItem):
    """A batch item's error: an unknown outcome is repeatable when the item carried a key."""
    if isinstance(error, OutcomeUnknown):
        error.repeatable = bool(item.key)
    return error


# A read of a stored file (6): how many refusals in a row one part of it survives. More than a
# send's MAX_ATTEMPTS: a stream that has sent bytes cannot start again, and a read is safe to repeat.
READ_ATTEMPTS = 6


def read_after(error: TelegramError, *, attempt: int, max_flood_wait: int) -> Retry:
    """After a read was refused (6): ask again after `wait`, or give up (the stream ends short)."""
    if attempt >= READ_ATTEMPTS:
        return Retry(False)
    if isinstance(error, FloodWait):
        return Retry(error.seconds <= max_flood_wait, float(error.seconds))
    if isinstance(error, TransientError):
        return Retry(True, min(BACKOFF_BASE * 2 ** (attempt - 1), READ_BACKOFF_MAX))
    return Retry(False)


READ_BACKOFF_MAX = 4.0  # seconds: a read's back-off grows no further
