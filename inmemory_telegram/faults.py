"""What goes wrong, as Telegram makes it go wrong: its errors (rpc_error), the faults a test
injects (`fail_next`), and the hostile mode's steady pace of what a long-lived connection meets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# error_message -> error_code, as Telegram sends them
ERROR_CODES = {
    "USER_IS_BLOCKED": 403,
    "CHAT_WRITE_FORBIDDEN": 403,
    "MESSAGE_AUTHOR_REQUIRED": 403,
    "AUTH_KEY_UNREGISTERED": 401,
    "SESSION_REVOKED": 401,
    "USER_DEACTIVATED": 401,
    "USER_DEACTIVATED_BAN": 401,
    "INTERNAL": 500,
}


def error_code(message: str) -> int:
    if message.startswith("FLOOD_WAIT_") or message.startswith("FLOOD_PREMIUM_WAIT_"):
        return 420
    if message.startswith("FILE_MIGRATE_"):
        return 303
    return ERROR_CODES.get(message, 400)


# fail_next(LOSE_ANSWER): the call takes effect but its answer is lost on the way back.
LOSE_ANSWER = "LOSE_ANSWER"

# What delivers a message to a chat (a hostile mode's unknown 420s strike these).
SEND_METHODS = frozenset({"messages.SendMessage", "messages.SendMedia", "messages.SendMultiMedia", "messages.ForwardMessages"})


class RpcFault(Exception):
    """Telegram's answer is an error: `rpc_error#2144ca19 error_code:int error_message:string`."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else error_code(message)


@dataclass
class Fault:
    error: str
    methods: frozenset[str] | None
    chat_id: int | None
    remaining: int
    skip: int = 0  # let this many matching calls through first
    code: int | None = None  # the error_code to answer with; None: as Telegram sends `error`
    until: datetime | None = None  # an outage: every matching call until then (the server's `now`), however many

    def over(self, now: datetime) -> bool:
        return self.until is not None and now >= self.until

    def spend(self) -> bool:
        """One matching call meets this fault: True when the fault is used up after it."""
        if self.until is not None:
            return False
        self.remaining -= 1
        return self.remaining <= 0


@dataclass
class Hostile:
    """What a long-lived connection to Telegram meets, at a steady pace (deterministic, so a run can
    be repeated). Every `salt_every` packets the server salt changes (refusals alternately name
    the container and each message in it); every `flood_every` sends one is refused with a 420
    kurigram's table does not know, alternately with seconds and without; every `service_every`
    packets the answers come after a new_session_created (with the salt) and a msgs_ack of the
    request; every `split_every` containers their answers come one packet each, last first, late
    (SPLIT_LATE); every `drop_every` containers the connection drops, in turn before the
    container is processed, halfway through it, and after it with its answers lost; every
    `internal_every` sends one is answered, in turn, -503 Timeout before it is processed and
    500 INTERNAL after it was delivered."""

    salt_every: int = 0
    flood_every: int = 0
    service_every: int = 0
    split_every: int = 0
    drop_every: int = 0
    internal_every: int = 0
    packets: int = 0
    served: int = 0
    sends: int = 0
    internal_sends: int = 0
    containers: int = 0
    rotations: int = 0
    floods: int = 0
    services: int = 0
    splits: int = 0
    drops: int = 0
    internals: int = 0
    # Of those, the 500s answered after the send was delivered (not lost, not refused): each is a
    # delivered message its client does not know of.
    internals_delivered: int = 0

    def due(self, every: int, count: int) -> bool:
        return bool(every) and count % every == 0


# How late a split container's answers come (Telegram documents no bound; inferred: late enough to
# arrive after later answers, well within a client's wait).
SPLIT_LATE = 0.5
DROP_WHEN = ("before", "during", "after")
INTERNAL_ERRORS = (("Timeout", -503), ("INTERNAL", 500))  # before processing / after delivering


HOSTILE_FLOODS = ("FLOOD_NEWKIND_WAIT_1", "FROZEN_METHOD_INVALID")  # a new 420 with seconds, one without
