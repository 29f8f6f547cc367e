"""An in-memory Telegram that kurigram's real client talks to over MTProto (as moto answers boto3).

Only the socket is replaced (`connection.py`): kurigram's `Client`, `Session`, storage, peer
resolution, retries and FloodWait handling all run as they do against Telegram. This module holds
Telegram's side: one bot, users with access hashes, channels with 64-bit ids, messages with ids,
dates, files and buttons, and the rules Telegram applies to a bot. `methods.py` answers the raw TL
functions; this class holds the state, the sessions and the controls tests and the sandbox use.

Behaviour from Telegram's documents (core.telegram.org): about 30 messages/s overall, 1000/s with
paid broadcasts when the request carries `allow_paid_floodskip`; about 1 message/s in a private
chat; 20/min in a group; bots may delete messages only for 48 h; at most 100 ids per call;
FLOOD_WAIT_X, USER_IS_BLOCKED, INPUT_USER_DEACTIVATED, PEER_ID_INVALID, CHAT_FORWARDS_RESTRICTED,
MESSAGE_EMPTY, AUTH_KEY_UNREGISTERED. Private-chat message ids are the bot's own sequence, shared by
all its private chats; each channel has its own. Inferred (marked where used): the window shapes
of the rate limits, the burst a private chat tolerates, what a call with several problems answers.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyrogram import raw
from pyrogram.file_id import FileId, FileType, ThumbnailSource

from botapp import clock
from botapp.telegram import limits
from botapp.telegram.gateway import Button, Media, TgUser
from offline.telegram import render, wire
from offline.telegram.rates import CALL_LIMITED, Network, Rates
from offline.telegram.state import Bot, Channel, File, Invite, Message, Upload, User, channel_raw_id

log = logging.getLogger(__name__)

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
    return ERROR_CODES.get(message, 400)


# fail_next(LOSE_ANSWER): the call takes effect but its answer is lost on the way back.
LOSE_ANSWER = "LOSE_ANSWER"
# How long Telegram remembers a send's random_id (a repeat within it is refused with
# RANDOM_ID_DUPLICATE). Inferred: Telegram documents no duration. This model assumes ten minutes,
# the shortest a client is known to rely on (Courier's TELEGRAM_RANDOM_ID_WINDOW infers the same),
# and delivers a repeat made later as a new message: a client that repeats later sends twice here.
RANDOM_ID_MEMORY = 600.0

# What delivers a message to a chat (a hostile mode's unknown 420s strike these).
SEND_METHODS = frozenset({"messages.SendMessage", "messages.SendMedia", "messages.SendMultiMedia", "messages.ForwardMessages"})

# A message whose msg_id is this far behind or ahead of the server's clock is refused with
# bad_msg_notification 16 / 17 (core.telegram.org/mtproto/description#message-identifier-msg-id:
# "more than 300 seconds in the past or more than 30 seconds in the future").
MSG_ID_PAST = 300
MSG_ID_FUTURE = 30
# How long a salt Telegram replaced is still accepted. Telegram documents that salts change and that
# a client learns the new one from bad_server_salt or get_future_salts, not for how long the old one
# is honoured: inferred, and stricter than Telegram is likely to be, not at all.
OLD_SALT_GRACE = 0.0


class RpcFault(Exception):
    """Telegram's answer is an error: `rpc_error#2144ca19 error_code:int error_message:string`."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else error_code(message)


@dataclass
class Event:
    """One thing the bot did that a user could see."""

    action: str  # send | copy | delete | edit | answer
    chat_id: int
    message_ids: list[int] = field(default_factory=list)
    text: str = ""
    media: Media | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()
    alert: bool = False  # an answer shown as an alert rather than a toast
    reply_to: int | None = None  # the message a send replies to
    # When it happened (time.monotonic(), the machine's clock): read by benchmarks, never compared.
    at: float = field(default_factory=time.monotonic, compare=False, repr=False)


@dataclass(frozen=True)
class Call:
    method: str  # "messages.SendMessage"
    chat_id: int | None
    at: float  # time.monotonic()


@dataclass
class Fault:
    error: str
    methods: frozenset[str] | None
    chat_id: int | None
    remaining: int
    skip: int = 0  # let this many matching calls through first
    code: int | None = None  # the error_code to answer with; None: as Telegram sends `error`
    until: datetime | None = None  # an outage: every matching call until then (botapp.clock), however many

    def over(self) -> bool:
        return self.until is not None and clock.now() >= self.until

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

    def due(self, every: int, count: int) -> bool:
        return bool(every) and count % every == 0


# How late a split container's answers come (Telegram documents no bound; inferred: late enough to
# arrive after later answers, well within a client's wait).
SPLIT_LATE = 0.5
DROP_WHEN = ("before", "during", "after")
INTERNAL_ERRORS = (("Timeout", -503), ("INTERNAL", 500))  # before processing / after delivering


HOSTILE_FLOODS = ("FLOOD_NEWKIND_WAIT_1", "FROZEN_METHOD_INVALID")  # a new 420 with seconds, one without


class Endpoint:
    """One connected MTProto session (a kurigram `Session`)."""

    def __init__(
        self, server: TelegramServer, auth_key: bytes, push: Callable[[bytes], None], hangup: Callable[[], None] | None = None
    ):
        self.server = server
        self.auth_key = auth_key
        self.push_packet = push
        self.hangup_connection = hangup  # drops the client's connection (the hostile mode)
        self.session_id = b"\0" * 8
        self.seq = wire.SeqNo()
        self.receives_updates = False
        self.closed = False
        self._collecting = threading.local()  # .answers: this thread is answering a container
        self._arriving: collections.deque[tuple[float, bytes]] = collections.deque()
        self._arrival = threading.Condition()
        self._last_arrival = 0.0
        self._carrier: threading.Thread | None = None

    def receive(self, packet: bytes, *, written: float | None = None) -> None:
        """A packet the client wrote at `written` (time.monotonic(); None: now, a client in this
        process): it reaches Telegram after the network's delay (in the order written), or then
        when there is no network. Its arrival is when Telegram counts it (TelegramServer.arrived)."""
        network = self.server.network
        if network is None:
            self.arrive(packet, at=written)
            return
        with self._arrival:
            at = max(self._last_arrival, (time.monotonic() if written is None else written) + network.delay(self.server.rng))
            self._last_arrival = at
            self._arriving.append((at, packet))
            if self._carrier is None:
                self._carrier = threading.Thread(target=self._carry, name="telegram-network", daemon=True)
                self._carrier.start()
            self._arrival.notify()

    def _carry(self) -> None:
        while not self.closed:
            with self._arrival:
                while not self._arriving and not self.closed:
                    self._arrival.wait()
                if self.closed:
                    return
                at, packet = self._arriving[0]
                if (delay := at - time.monotonic()) > 0:
                    self._arrival.wait(delay)
                    continue
                self._arriving.popleft()
            try:
                self.arrive(packet, at=at)
            except Exception:  # noqa: BLE001 - the connection lives on, as dispatch's callers expect
                log.exception("telegram server: a packet failed")

    def arrive(self, packet: bytes, *, at: float | None = None) -> None:
        """A packet from the client reached Telegram (at `at`, time.monotonic(); None: now, a
        client in this process with no network): answer every message in it."""
        with self.server.arriving(at):
            self._answer(packet)

    def _answer(self, packet: bytes) -> None:
        try:
            incoming = wire.unpack_client(packet, self.auth_key)
        except Exception:  # noqa: BLE001 - Telegram drops what it cannot decrypt
            log.warning("telegram server: undecryptable packet dropped")
            return
        self.session_id = incoming.session_id
        self.server.hostile_tick()
        if self._refused(incoming):
            return
        hostile = self.server.hostile
        if hostile is not None and hostile.service_every:
            with self.server.lock:
                hostile.served += 1
                service = hostile.due(hostile.service_every, hostile.served)
                hostile.services += service
            if service:  # Telegram may say these at any moment: the client must take them in its stride
                ids = (
                    [m.msg_id for m in incoming.body.messages]
                    if isinstance(incoming.body, raw.core.MsgContainer)
                    else [incoming.msg_id]
                )
                created = raw.types.NewSessionCreated(
                    first_msg_id=min(ids), unique_id=self.server.rng.getrandbits(63), server_salt=self.server.salt
                )
                self.send(created.write(), answer=False, content=True)
                self.send(raw.types.MsgsAck(msg_ids=ids).write(), answer=False, content=False)
        if not isinstance(incoming.body, raw.core.MsgContainer):
            self.server.dispatch(self, incoming.msg_id, incoming.body)
            return
        bodies = [(m.msg_id, m.body) for m in incoming.body.messages]
        drop = split = None
        with self.server.lock:
            self.server.containers += 1
            if hostile is not None:
                hostile.containers += 1
                if hostile.due(hostile.drop_every, hostile.containers):
                    drop = DROP_WHEN[hostile.drops % len(DROP_WHEN)]
                    hostile.drops += 1
                elif hostile.due(hostile.split_every, hostile.containers):
                    split = True
                    hostile.splits += 1
        if drop == "before":
            self.hangup()
            return
        # A container's answers go back in one container, as Telegram often does (core.telegram.org
        # /mtproto/service_messages#containers: either side may pack messages into one).
        self._collecting.answers = answers = []
        try:
            for n, (msg_id, body) in enumerate(bodies):
                if drop == "during" and n == len(bodies) // 2:
                    break
                self.server.dispatch(self, msg_id, body)
        finally:
            self._collecting.answers = None
        if drop is not None:  # halfway, or all of it done: the answers are lost with the connection
            self.hangup()
            return
        delay = max((d for *_, d in answers), default=0.0)
        if split:  # one packet each, last first, late
            for body, answer, content, _ in reversed(answers):
                self.send(body, answer=answer, content=content, delay=delay + SPLIT_LATE)
        elif len(answers) == 1:
            self.send(answers[0][0], answer=answers[0][1], content=answers[0][2], delay=delay)
        elif answers:
            self._send_container(answers, delay)

    def hangup(self) -> None:
        """The connection drops: nothing more is answered on it; the client connects again."""
        hangup = self.hangup_connection
        self.close()
        if hangup is not None:
            hangup()

    def _refused(self, incoming) -> bool:
        """Refuse a message (or a container, whole) as Telegram does before processing it: a salt
        that is not the session's (bad_server_salt, with the new one), a msg_id from a client
        clock that is off (bad_msg_notification 16/17). With `salt_refusal == "items"` a refused
        container gets one bad_server_salt per message inside instead of one naming it."""
        server = self.server
        now_id = time.time()
        sent_at = incoming.msg_id / 2**32
        code = 16 if sent_at < now_id - MSG_ID_PAST else 17 if sent_at > now_id + MSG_ID_FUTURE else 0
        if code:
            server.refusals.append(f"bad_msg_notification {code}")
            notice = raw.types.BadMsgNotification(bad_msg_id=incoming.msg_id, bad_msg_seqno=incoming.seq_no, error_code=code)
            self.send(notice.write(), answer=True, content=False)
            return True
        if server.salt_ok(incoming.salt):
            return False
        named = [(incoming.msg_id, incoming.seq_no)]
        if isinstance(incoming.body, raw.core.MsgContainer) and server.salt_refusal == "items":
            named = [(m.msg_id, m.seq_no) for m in incoming.body.messages]
        for msg_id, seq_no in named:
            server.refusals.append("bad_server_salt")
            notice = raw.types.BadServerSalt(bad_msg_id=msg_id, bad_msg_seqno=seq_no, error_code=48, new_server_salt=server.salt)
            self.send(notice.write(), answer=True, content=False)
        return True

    def _send_container(self, answers: list[tuple[bytes, bool, bool, float]], delay: float) -> None:
        # Inner messages get their ids first: a container's msg_id is greater than theirs.
        inner = b"".join(
            wire.Long(self.server.msg_ids.next(answer=answer))
            + wire.Int(self.seq.next(content=content))
            + wire.Int(len(body))
            + body
            for body, answer, content, _ in answers
        )
        container = wire.Int(wire.MSG_CONTAINER_ID, False) + wire.Int(len(answers)) + inner
        self.send(container, answer=False, content=False, delay=delay, direct=True)

    def send(self, body: bytes, *, answer: bool, content: bool = True, delay: float = 0.0, direct: bool = False) -> None:
        if self.closed:
            return
        collected = getattr(self._collecting, "answers", None)
        if collected is not None and not direct:  # answering a container: collected, sent as one
            collected.append((body, answer, content, delay))
            return
        packet = wire.pack_server(
            body,
            auth_key=self.auth_key,
            session_id=self.session_id,
            msg_id=self.server.msg_ids.next(answer=answer),
            seq_no=self.seq.next(content=content),
        )
        if delay:
            threading.Timer(delay, self.push_packet, (packet,)).start()
        else:
            self.push_packet(packet)

    def close(self) -> None:
        self.closed = True
        with self._arrival:
            self._arrival.notify()
        self.server.disconnect(self)


class TelegramServer:
    BOT_ID = 7_000_000_001

    def __init__(
        self,
        *,
        username: str = "CourierBot",
        token: str = "7000000001:offline-token",
        enforce_rates: bool = True,
        global_rate: float = limits.GLOBAL_RATE,
        paid_rate: float = limits.PAID_RATE,
        latency: float = 0.0,
        network: Network | None = None,
        count_per_message: bool = True,
    ):
        from offline.telegram.methods import METHODS

        self.methods = METHODS
        self.bot = Bot(id=self.BOT_ID, username=username, first_name="Courier", token=token)
        self.enforce_rates = enforce_rates
        self.rate_clock = time.monotonic  # the time rate limits are counted in (tests stop and move it)
        self._answering = threading.local()  # .at: when the request this thread answers arrived (arrived())
        self._counted_last = 0.0  # the latest arrival the rates counted (arrived())
        self.global_rate = global_rate
        self.paid_rate = paid_rate
        self.rates = Rates(global_rate=global_rate, paid_rate=paid_rate, count_per_message=count_per_message)
        self.latency = latency  # seconds every answer takes on its way back
        self.network = network  # the way requests take to the server (rates.Network; None: none)
        self.rng = random.Random()
        self.lock = threading.RLock()
        self.msg_ids = wire.MsgIds()
        self.keys: dict[bytes, bytes] = {}
        self.endpoints: list[Endpoint] = []
        self.users: dict[int, User] = {}
        self.channels: dict[int, Channel] = {}  # by raw id
        self.box: dict[int, Message] = {}  # the bot's private-chat messages, by id (one sequence)
        self.channel_messages: dict[int, dict[int, Message]] = collections.defaultdict(dict)
        self.files: dict[int, File] = {}
        self.uploads: dict[int, Upload] = {}  # by the client's file id, until uploadMedia or a send takes it
        self._file_ids = itertools.count(5_000_000_001)
        self._box_ids = itertools.count(1)
        self._group_ids = itertools.count(13_000_000_000_000_001)  # albums' grouped_id (64-bit)
        self.pts = 1
        self.qts = 1
        # What getDifference hands back: ("pts"|"qts", value, record or TL update, when), oldest first;
        # `forgotten`: the highest value of each kind dropped after UPDATES_KEPT (methods.py).
        self.update_log: collections.deque[tuple[str, int, object, datetime]] = collections.deque()
        self.forgotten = {"pts": 0, "qts": 0}
        self.callbacks: dict[int, tuple[int, float]] = {}  # query id -> (user id, monotonic time)
        self._query_ids = itertools.count(900_000_000_001)
        self.faults: list[Fault] = []
        self.random_ids: dict[int, float] = {}  # random_id -> when it was claimed (time.monotonic())
        self._random_id_order: collections.deque = collections.deque()
        self.calls: list[Call] = []
        self.containers = 0  # MTProto containers received (several requests in one packet)
        self.flood_waits = 0
        # The server salt every session must use (a client starts with 0 and learns it from
        # bad_server_salt, as from Telegram); rotate_salt() replaces it.
        self.salt = int.from_bytes(os.urandom(8), "big", signed=True)
        self._old_salt: tuple[int, float] | None = None  # (salt, accepted until, monotonic)
        self.salt_refusal = "container"  # or "items": how a refused container is named
        self.refusals: list[str] = []  # bad_server_salt / bad_msg_notification N, as sent
        self.hostile: Hostile | None = None  # hostile_start(): salt rotation, unknown 420s
        self.record_requests = False  # when set, `requests` gets each request's body as received
        self.requests: list[bytes] = []
        self.events: list[Event] = []
        self.listeners: list[Callable[[Event], None]] = []

    # --- sessions -------------------------------------------------------------------------------

    def connect(self, auth_key: bytes, push: Callable[[bytes], None], hangup: Callable[[], None] | None = None) -> Endpoint:
        """A client connects with a key it was provisioned with (see connection.py); `hangup`
        drops its connection."""
        with self.lock:
            self.keys[wire.key_id(auth_key)] = auth_key
            endpoint = Endpoint(self, auth_key, push, hangup)
            self.endpoints.append(endpoint)
            return endpoint

    def disconnect(self, endpoint: Endpoint) -> None:
        with self.lock:
            if endpoint in self.endpoints:
                self.endpoints.remove(endpoint)

    def hostile_start(
        self, *, salt_every: int = 50, flood_every: int = 200, service_every: int = 0, split_every: int = 0,
        drop_every: int = 0, internal_every: int = 0,
    ) -> None:  # fmt: skip
        """Turn on the hostile mode (see Hostile); hostile_stop() turns it off."""
        with self.lock:
            self.hostile = Hostile(
                salt_every=salt_every, flood_every=flood_every, service_every=service_every, split_every=split_every,
                drop_every=drop_every, internal_every=internal_every,
            )  # fmt: skip

    def hostile_stop(self) -> dict:
        """Turn it off; what it did: {"rotations": n, "floods": n, "services": n, ...}."""
        with self.lock:
            done, self.hostile = self.hostile, None
        names = ("rotations", "floods", "services", "splits", "drops", "internals")
        return {name: getattr(done, name) if done else 0 for name in names}

    def hostile_tick(self) -> None:
        hostile = self.hostile
        if hostile is None or not hostile.salt_every:
            return
        with self.lock:
            hostile.packets += 1
            if hostile.packets % hostile.salt_every == 0:
                hostile.rotations += 1
                self.rotate_salt(refusal="container" if hostile.rotations % 2 else "items")

    def _hostile_flood(self, name: str) -> None:
        hostile = self.hostile
        if hostile is None or not hostile.flood_every or name not in SEND_METHODS:
            return
        hostile.sends += 1
        if hostile.sends % hostile.flood_every == 0:
            hostile.floods += 1
            raise RpcFault(HOSTILE_FLOODS[hostile.floods % 2], 420)

    def _hostile_internal(self, name: str) -> str | None:
        hostile = self.hostile
        if hostile is None or not hostile.internal_every or name not in SEND_METHODS:
            return None
        with self.lock:
            hostile.internal_sends += 1
            if not hostile.due(hostile.internal_every, hostile.internal_sends):
                return None
            hostile.internals += 1
            return INTERNAL_ERRORS[hostile.internals % 2][0]

    def salt_ok(self, salt: int) -> bool:
        if salt == self.salt:
            return True
        old = self._old_salt
        return old is not None and salt == old[0] and time.monotonic() < old[1]

    def rotate_salt(self, *, refusal: str = "container") -> int:
        """A new server salt, as Telegram changes it about hourly: messages with the old one are
        refused with bad_server_salt naming the container (or, `refusal="items"`, each message in
        it). Returns the new salt."""
        with self.lock:
            self._old_salt = (self.salt, time.monotonic() + OLD_SALT_GRACE)
            self.salt = int.from_bytes(os.urandom(8), "big", signed=True)
            self.salt_refusal = refusal
            return self.salt

    def dispatch(self, endpoint: Endpoint, msg_id: int, body) -> None:
        if isinstance(body, raw.types.MsgsAck):
            return
        if self.record_requests:
            self.requests.append(body.write())
        if isinstance(body, (raw.functions.Ping, raw.functions.PingDelayDisconnect)):
            pong = raw.types.Pong(msg_id=msg_id, ping_id=body.ping_id)
            endpoint.send(pong.write(), answer=True, content=False)
            return
        query, updates = body, True
        while isinstance(
            query, (raw.functions.InvokeWithLayer, raw.functions.InitConnection, raw.functions.InvokeWithoutUpdates)
        ):
            if isinstance(query, raw.functions.InvokeWithoutUpdates):
                updates = False
            query = query.query
        name = query.QUALNAME.split(".", 1)[1]
        internal = self._hostile_internal(name)
        try:
            if internal == "Timeout":  # -503: Telegram gave up before processing it
                raise RpcFault("Timeout", -503)
            with self.lock:
                result = self._invoke(endpoint, name, query, subscribe=updates)
                if self._answer_lost(name, query):
                    return  # done, but the answer never reaches the client (a dropped connection)
            if internal == "INTERNAL":  # delivered, and the answer is an internal error
                raise RpcFault("INTERNAL", 500)
            body_bytes = wire.rpc_result(msg_id, result)
        except RpcFault as fault:
            body_bytes = wire.rpc_result(msg_id, raw.types.RpcError(error_code=fault.code, error_message=fault.message))
        endpoint.send(body_bytes, answer=True, delay=self.latency)

    def _invoke(self, endpoint: Endpoint, name: str, query, *, subscribe: bool):
        chat_id = self._chat_of(query)
        self.calls.append(Call(name, chat_id, self._arrived_monotonic()))
        if name not in ("help.GetConfig",):
            if self.bot.revoked:
                raise RpcFault("AUTH_KEY_UNREGISTERED")
            if self.bot.deactivated:
                raise RpcFault("USER_DEACTIVATED")
        self._raise_fault(name, chat_id)
        self._hostile_flood(name)
        if name in CALL_LIMITED:  # reads and deletes: one call each in the free budget (inferred)
            self.check_rate(None, paid=False)
        handler = self.methods.get(name)
        if handler is None:
            log.error("telegram server: %s is not implemented", name)
            raise RpcFault("INPUT_METHOD_INVALID")
        if subscribe and name.startswith("updates."):
            # Inferred from MTProto's docs: a session that asks for the update state gets updates;
            # kurigram's no_updates clients wrap every call in invokeWithoutUpdates and get none.
            endpoint.receives_updates = True
        return handler(self, query)

    def _chat_of(self, query) -> int | None:
        for attr in ("peer", "to_peer", "channel"):
            peer = getattr(query, attr, None)
            if isinstance(peer, (raw.types.InputPeerUser, raw.types.InputUser)):
                return peer.user_id
            if isinstance(peer, (raw.types.InputPeerChannel, raw.types.InputChannel)):
                return -1_000_000_000_000 - peer.channel_id
        return None

    def _answer_lost(self, name: str, query) -> bool:
        for fault in list(self.faults):
            if fault.error == LOSE_ANSWER and (fault.methods is None or name in fault.methods):
                if fault.chat_id is not None and self._chat_of(query) != fault.chat_id:
                    continue
                if fault.over():
                    self.faults.remove(fault)
                    continue
                if fault.spend():
                    self.faults.remove(fault)
                return True
        return False

    def claim_random_ids(self, random_ids) -> None:
        """Telegram remembers each send's random_id: a repeat (a client retrying a request whose
        answer it lost) is refused rather than delivered twice, for RANDOM_ID_MEMORY seconds;
        later the same random_id delivers the message again."""
        now = time.monotonic()
        while self._random_id_order and self._random_id_order[0][0] < now - RANDOM_ID_MEMORY:
            _, old = self._random_id_order.popleft()
            if self.random_ids.get(old, now) < now - RANDOM_ID_MEMORY:
                del self.random_ids[old]
        if any(r in self.random_ids for r in random_ids):
            raise RpcFault("RANDOM_ID_DUPLICATE")
        for r in random_ids:
            self.random_ids[r] = now
            self._random_id_order.append((now, r))

    def _raise_fault(self, name: str, chat_id: int | None) -> None:
        for fault in list(self.faults):
            if fault.error == LOSE_ANSWER:
                continue
            if fault.methods is not None and name not in fault.methods:
                continue
            if fault.chat_id is not None and fault.chat_id != chat_id:
                continue
            if fault.over():
                self.faults.remove(fault)
                continue
            if fault.skip:
                fault.skip -= 1
                continue
            if fault.spend():
                self.faults.remove(fault)
            if fault.error.startswith("FLOOD_WAIT_"):
                self.flood_waits += 1
            raise RpcFault(fault.error, fault.code)

    # --- rules every send obeys -------------------------------------------------------------------

    @contextlib.contextmanager
    def arriving(self, at: float | None):
        """This thread answers a request that arrived at `at` (time.monotonic(); None: now)."""
        before = getattr(self._answering, "at", None)
        self._answering.at = at
        try:
            yield
        finally:
            self._answering.at = before

    def _arrived_monotonic(self) -> float:
        at = getattr(self._answering, "at", None)
        return time.monotonic() if at is None else at

    def arrived(self) -> float:
        """When the request this thread answers arrived at Telegram, in `rate_clock`'s time: what
        the rates count (rates.py: "measured at the moment each request arrives").

        A client's packet arrives when it was written plus the network's delay (Endpoint.receive),
        and this process may answer it later: a packet waits in the socket's buffer, or for the
        carrier thread, while this process waits for the CPU or the GIL. That wait is this
        process's, not Telegram's (seen: the server's loop read a worker's packets 52 ms late on a
        busy machine, and refused 81 sends of a broadcast whose sends, as written, never exceeded
        996 in any second). A request answered as it arrives (a client in this process with no
        network) counts at `rate_clock()`, which tests stop and move. Requests of two connections
        (runbot's and a worker's) can be answered out of their arrival order by a few
        milliseconds: each counts no earlier than the last one counted, so the rates' windows,
        which count in order (rates.Window), never count one back in time."""
        at = getattr(self._answering, "at", None)
        now = self.rate_clock()
        if at is None:
            return now
        now = max(now - max(0.0, time.monotonic() - at), self._counted_last)
        self._counted_last = now
        return now

    def rates_set(self, **settings) -> None:
        """Change `enforce_rates`, `global_rate`, `paid_rate`, `latency` or `count_per_message`;
        the limits start counting afresh."""
        with self.lock:
            per_message = settings.pop("count_per_message", self.rates.count_per_message)
            for key, value in settings.items():
                if key not in ("enforce_rates", "global_rate", "paid_rate", "latency"):
                    raise ValueError(f"not a rate setting: {key}")
                setattr(self, key, value)
            self.rates = Rates(global_rate=self.global_rate, paid_rate=self.paid_rate, count_per_message=per_message)

    def check_rate(self, chat_id: int | None, *, paid: bool, messages: int = 1) -> None:
        """FLOOD_WAIT_X when a request exceeds Telegram's limits, counted when it arrives (see
        rates.py for what is documented and what is inferred): `messages` delivered to `chat_id`
        (None: a read or a delete, limited as a call), with or without the paid flag."""
        if not self.enforce_rates:
            return
        seconds = self.rates.check(self.arrived(), chat_id=chat_id, paid=paid, messages=messages)
        if seconds:
            self.flood_waits += 1
            raise RpcFault(f"FLOOD_WAIT_{seconds}")

    # --- records ----------------------------------------------------------------------------------

    def user_record(self, tg: TgUser | int) -> User:
        user_id = tg if isinstance(tg, int) else tg.id
        user = self.users.get(user_id)
        if user is None:
            user = self.users[user_id] = User(id=user_id)
        if isinstance(tg, TgUser):
            user.first_name, user.last_name = tg.first_name, tg.last_name
            user.username, user.language_code = tg.username, tg.language_code
        return user

    def new_message(self, chat_id: int, **fields) -> Message:
        if chat_id > 0:
            msg = Message(chat_id=chat_id, id=next(self._box_ids), date=clock.now(), **fields)
            self.box[msg.id] = msg
            self.pts += 1
            if not msg.out:
                self.update_log.append(("pts", self.pts, msg, msg.date))
        else:
            channel = self.channels[channel_raw_id(chat_id)]
            msg = Message(chat_id=chat_id, id=channel.next_id, date=clock.now(), **fields)
            channel.next_id += 1
            channel.pts += 1
            self.channel_messages[channel.raw_id][msg.id] = msg
        return msg

    def new_file(self, kind: str, name: str, size: int | None = None) -> File:
        file = File(id=next(self._file_ids), kind=kind, name=name)
        if size is not None:
            file.size = size
        self.files[file.id] = file
        return file

    def stored(self, chat_id: int, message_id: int) -> Message | None:
        if chat_id > 0:
            msg = self.box.get(message_id)
            return msg if msg is not None and msg.chat_id == chat_id else None
        return self.channel_messages.get(channel_raw_id(chat_id), {}).get(message_id)

    def emit(self, event: Event) -> None:
        if getattr(self._answering, "at", None) is not None:  # done answering a request: when it arrived
            event.at = self._answering.at
        self.events.append(event)
        for listener in list(self.listeners):
            listener(event)

    # --- pushing updates to runbot -------------------------------------------------------------------

    def push(self, updates) -> None:
        """Send an Updates object to every session that receives updates."""
        body = updates.write()
        for endpoint in list(self.endpoints):
            if endpoint.receives_updates:
                endpoint.send(body, answer=False)

    def updates_tl(self, updates: list, *, users: Iterable[User] = (), channels: Iterable[Channel] = ()):
        return raw.types.Updates(
            updates=updates,
            users=[render.bot_tl(self.bot), *(render.user_tl(u) for u in users)],
            chats=[render.channel_tl(c) for c in channels],
            date=int(clock.now().timestamp()),
            seq=0,
        )

    # --- controls: what users and admins do (tests, the sandbox) ---------------------------------------

    def create_channel(
        self, chat_id: int, *, title: str = "", members: Iterable[int] = (), noforwards: bool = False, bot_is_admin: bool = True
    ) -> None:
        if chat_id > -1_000_000_000_000:
            raise ValueError("channel ids look like -100…")
        with self.lock:
            channel = self.channels.setdefault(
                channel_raw_id(chat_id), Channel(raw_id=channel_raw_id(chat_id), title=title or f"Channel {chat_id}")
            )
            channel.members.update(members)
            channel.noforwards = noforwards
            channel.bot_is_admin = bot_is_admin

    def join(self, chat_id: int, user_id: int) -> None:
        with self.lock:
            self.channels[channel_raw_id(chat_id)].members.add(user_id)

    def leave(self, chat_id: int, user_id: int) -> None:
        with self.lock:
            self.channels[channel_raw_id(chat_id)].members.discard(user_id)

    def request_join(self, chat_id: int, user: TgUser, *, link: str = "https://t.me/+offline") -> None:
        """A user asks to join a join-request channel: the bot (an admin) gets the request."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            record = self.user_record(user)
            record.known_to_bot = True
            channel.join_requests.add(user.id)
            self.qts += 1
            invite = raw.types.ChatInviteExported(link=link, admin_id=self.bot.id, date=0, request_needed=True)
            update = raw.types.UpdateBotChatInviteRequester(
                peer=render.peer_tl(chat_id),
                date=int(clock.now().timestamp()),
                user_id=user.id,
                about="",
                invite=invite,
                qts=self.qts,
            )
            self.update_log.append(("qts", self.qts, update, clock.now()))
            self.push(self.updates_tl([update], users=[record], channels=[channel]))

    def post(
        self,
        chat_id: int,
        text: str = "",
        *,
        media: Media | None = None,
        service: bool = False,
        file_size: int | None = None,
        entities: list | None = None,
    ) -> int:
        """Something is posted in a channel (by an admin); returns the message id. A bot that is
        an admin there is told (UpdateNewChannelMessage, the Bot API's channel_post). `media.file`
        is the file's name (documents, videos, audio and animations carry it), `file_size` its size;
        `entities` its formatting (raw MessageEntity objects, offsets in UTF-16 units)."""
        with self.lock:
            if channel_raw_id(chat_id) not in self.channels:
                raise KeyError(f"no channel {chat_id}")
            file = self.new_file(media.kind, media.file, file_size) if media else None
            msg = self.new_message(chat_id, out=False, text=text, file=file, service=service, entities=list(entities or []))
            channel = self.channels[channel_raw_id(chat_id)]
            if channel.bot_is_admin:
                channel.posts.append((channel.pts, msg))
                update = raw.types.UpdateNewChannelMessage(
                    message=render.message_tl(msg, bot_id=self.bot.id), pts=channel.pts, pts_count=1
                )
                self.push(self.updates_tl([update], channels=[channel]))
            return msg.id

    def invite_add(self, chat_id: int, link: str, *, request_needed: bool = False) -> None:
        """An invite link the channel's owner made (not the bot): it never expires."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            channel.invites[link] = Invite(link=link, date=clock.now(), request_needed=request_needed)

    def open_invite(self, link: str, user: TgUser) -> str:
        """A user opens an invite link the bot exported: they join the channel, or (a join-request
        link) ask to join, which the bot hears of. Returns what happened: "joined", "requested",
        "expired" (Telegram shows "this invite link has expired"), or "unknown" (not such a link)."""
        with self.lock:
            for channel in self.channels.values():
                invite = channel.invites.get(link)
                if invite is None:
                    continue
                if invite.revoked or (invite.expire_date is not None and invite.expire_date <= clock.now()):
                    return "expired"
                if invite.request_needed:
                    self.request_join(channel.api_id, user, link=link)
                    return "requested"
                channel.members.add(user.id)
                return "joined"
            return "unknown"

    def delete_post(self, chat_id: int, message_id: int) -> None:
        with self.lock:
            self.stored(chat_id, message_id).deleted = True

    def bot_rights(self, chat_id: int, *, post: bool | None = None, edit: bool | None = None, invite: bool | None = None) -> None:
        """The channel's owner changes the bot's admin rights (None: that right unchanged)."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            for name, value in (("post", post), ("edit", edit), ("invite", invite)):
                if value is not None:
                    setattr(channel, f"bot_can_{name}", value)

    def remove_bot(self, chat_id: int) -> None:
        """The bot is removed from a channel (or the channel is deleted): it can no longer read,
        forward from or post in it."""
        with self.lock:
            self.channels[channel_raw_id(chat_id)].bot_is_admin = False

    def user_sends(
        self,
        user: TgUser,
        text: str = "",
        *,
        media: Media | None = None,
        forward_from: tuple[int, int] | None = None,
        file_size: int | None = None,
        reply_to: int | None = None,
    ) -> int:
        """A user writes to the bot in private (optionally replying to a message of that chat);
        runbot's session gets UpdateNewMessage. Returns its id."""
        return self.user_sends_album(
            user, [media] if media else [], text, forward_from=forward_from, reply_to=reply_to, file_size=file_size
        )[0]

    def user_sends_album(
        self,
        user: TgUser,
        media: list[Media],
        caption: str = "",
        *,
        forward_from: tuple[int, int] | None = None,
        reply_to: int | None = None,
        file_size: int | None = None,
    ) -> list[int]:
        """A user sends several media as one album (one grouped_id; the caption on the first), or,
        with one or no media, a single message. runbot gets one UpdateNewMessage per message, in one
        Updates, as Telegram sends an album. Returns their ids."""
        with self.lock:
            record = self.user_record(user)
            record.known_to_bot = True
            was_blocked, record.blocked_bot = record.blocked_bot, False  # writing to a bot unblocks it
            grouped_id = next(self._group_ids) if len(media) > 1 else None
            if reply_to is not None and self.stored(user.id, reply_to) is None:
                reply_to = None  # Telegram drops a reply to a message that is not in the chat
            updates = [self._bot_stopped(user.id, stopped=False)] if was_blocked else []
            ids = []
            for index, item in enumerate(media or [None]):
                file = None
                if forward_from is not None:
                    source = self.stored(*forward_from)
                    file = source.file if source is not None else None
                elif item is not None:
                    file = self.new_file(item.kind, item.file, file_size)
                msg = self.new_message(
                    user.id,
                    out=False,
                    text=caption if index == 0 else "",
                    file=file,
                    forward_from=forward_from,
                    sender_id=user.id,
                    grouped_id=grouped_id,
                    reply_to=reply_to,
                )
                ids.append(msg.id)
                updates.append(
                    raw.types.UpdateNewMessage(message=render.message_tl(msg, bot_id=self.bot.id), pts=self.pts, pts_count=1)
                )
            channels = [self.channels[channel_raw_id(forward_from[0])]] if forward_from else []
            self.push(self.updates_tl(updates, users=[record], channels=channels))
            return ids

    def tap(self, user: TgUser, message_id: int, data: str) -> int:
        """A user taps a callback button under a bot message; runbot gets UpdateBotCallbackQuery."""
        with self.lock:
            record = self.user_record(user)
            query_id = next(self._query_ids)
            self.callbacks[query_id] = (user.id, time.monotonic())
            update = raw.types.UpdateBotCallbackQuery(
                query_id=query_id,
                user_id=user.id,
                peer=render.peer_tl(user.id),
                msg_id=message_id,
                chat_instance=user.id,
                data=data.encode(),
            )
            self.push(self.updates_tl([update], users=[record]))
            return query_id

    def _bot_stopped(self, user_id: int, *, stopped: bool):
        self.qts += 1
        update = raw.types.UpdateBotStopped(user_id=user_id, date=int(clock.now().timestamp()), stopped=stopped, qts=self.qts)
        self.update_log.append(("qts", self.qts, update, clock.now()))
        return update

    def block(self, user_id: int) -> None:
        with self.lock:
            record = self.user_record(user_id)
            record.blocked_bot = True
            self.push(self.updates_tl([self._bot_stopped(user_id, stopped=True)], users=[record]))

    def unblock(self, user_id: int) -> None:
        with self.lock:
            record = self.user_record(user_id)
            record.blocked_bot = False
            self.push(self.updates_tl([self._bot_stopped(user_id, stopped=False)], users=[record]))

    def deactivate(self, user_id: int) -> None:
        with self.lock:
            self.user_record(user_id).deactivated = True

    def revoke_token(self) -> None:
        """The operator revoked the bot token in @BotFather: every session of the bot gets 401."""
        with self.lock:
            self.bot.revoked = True

    def restore_token(self) -> None:
        """The operator put the bot's new token (from @BotFather) in place: its sessions work again.
        Offline sessions carry no token (ProvisionedStorage), so lifting the revocation is all a
        new token changes here."""
        with self.lock:
            self.bot.revoked = False

    def fail_next(
        self,
        error: str,
        *,
        methods: Iterable[str] | None = None,
        times: int = 1,
        chat_id: int | None = None,
        after: int = 0,
        code: int | None = None,
        seconds: float | None = None,
    ) -> None:
        """The next `times` calls (of `methods`, to `chat_id`) after `after` matching ones answer
        `error` ("FLOOD_WAIT_7", "USER_IS_BLOCKED", "INTERNAL", ...), as Telegram would; LOSE_ANSWER
        lets the call take effect and drops its answer. `code`: the error_code, for a name Telegram
        may send one day with a code we cannot guess (a new 420 "FROZEN_METHOD_INVALID").
        `seconds`: an outage instead of a count: every matching call answers `error` for that long
        on the clock messages are dated by (botapp.clock: tests move it), `times` aside."""
        until = clock.now() + timedelta(seconds=seconds) if seconds is not None else None
        with self.lock:
            self.faults.append(Fault(error, frozenset(methods) if methods else None, chat_id, times, after, code, until))

    def file_id(self, kind: str, name: str = "file") -> str:
        """A new file on the server and the file_id string a bot would get for it."""
        with self.lock:
            file = self.new_file(kind, name)
        file_type = {
            "photo": FileType.PHOTO,
            "video": FileType.VIDEO,
            "document": FileType.DOCUMENT,
            "animation": FileType.ANIMATION,
            "audio": FileType.AUDIO,
        }[kind]
        photo = {}
        if kind == "photo":  # as kurigram's Photo._parse builds it
            photo = dict(
                thumbnail_source=ThumbnailSource.THUMBNAIL,
                thumbnail_file_type=FileType.PHOTO,
                thumbnail_size="x",
                volume_id=0,
                local_id=0,
            )
        return FileId(
            file_type=file_type,
            dc_id=render.DC_ID,
            media_id=file.id,
            access_hash=file.access_hash,
            file_reference=file.file_reference,
            **photo,
        ).encode()

    def users_meet(self, user_ids: Iterable[int]) -> dict[int, int]:
        """Set-up for thousands of users at once: each has written to the bot before (as after
        `user_sends(user, "/start")`, without the updates). Returns each one's access hash, which
        runbot would have stored from that update."""
        with self.lock:
            met = {}
            for user_id in user_ids:
                record = self.user_record(user_id)
                record.first_name = record.first_name or f"User{user_id}"
                record.known_to_bot = True
                met[user_id] = record.access_hash
            return met

    def bot_sent(self, chat_ids: Iterable[int], text: str) -> list[int]:
        """Set-up: one message the bot sent earlier in each private chat (say, a delivered file
        waiting for its auto-delete), made directly, with no call counted. Returns their ids."""
        with self.lock:
            return [self.new_message(chat_id, out=True, text=text, sender_id=self.bot.id).id for chat_id in chat_ids]

    # --- looking at what happened -------------------------------------------------------------------

    def received(self, *, since: int = 0, text: str | None = None) -> dict[int, int]:
        """How many messages each private chat received from the bot (sends and copies: what a
        user sees arrive, deleted later or not), from event number `since` on; with `text`, only
        messages whose text starts with it."""
        with self.lock:
            return dict(
                collections.Counter(
                    e.chat_id
                    for e in self.events[since:]
                    if e.action in ("send", "copy") and e.chat_id > 0 and (text is None or e.text.startswith(text))
                )
            )

    def update_state(self) -> dict[str, int]:
        """The bot's update sequences now: where a client that has every update stands."""
        with self.lock:
            return {"pts": self.pts, "qts": self.qts}

    def live(self, message_ids: Iterable[int]) -> list[int]:
        """Those of the bot's private-chat messages `message_ids` that are still there (not deleted)."""
        with self.lock:
            return [i for i in message_ids if (m := self.box.get(i)) is not None and not m.deleted]

    def count(self, method: str | None = None, *, chat_id: int | None = None, since: int = 0) -> int:
        """How many calls (of `method`, to `chat_id`) Telegram received, from call number `since` on."""
        with self.lock:
            return sum(
                1
                for call in self.calls[since:]
                if (method is None or call.method == method) and (chat_id is None or call.chat_id == chat_id)
            )

    def call_times(self, since: int = 0) -> list[tuple[str, int | None, float]]:
        """(method, chat id, time.monotonic() when it arrived) of every call from number `since` on:
        on Linux that clock is the machine's, so another process's monotonic times compare."""
        with self.lock:
            return [(call.method, call.chat_id, call.at) for call in self.calls[since:]]

    def send_times(self, since: int = 0) -> list[tuple[int, float, str]]:
        """(chat id, time.monotonic(), the text's first 40 characters) of every message the bot
        sent or copied (accepted, counted by the rates) from event number `since` on: what a
        benchmark counts as sends."""
        with self.lock:
            return [(e.chat_id, e.at, e.text[:40]) for e in self.events[since:] if e.action in ("send", "copy")]

    def events_count(self) -> int:
        with self.lock:
            return len(self.events)

    def methods_called(self, since: int = 0) -> list[str]:
        with self.lock:
            return [call.method for call in self.calls[since:]]

    def messages(self, chat_id: int, *, include_deleted: bool = False) -> list[Message]:
        with self.lock:
            source = (
                [m for m in self.box.values() if m.chat_id == chat_id]
                if chat_id > 0
                else list(self.channel_messages.get(channel_raw_id(chat_id), {}).values())
            )
            return sorted((m for m in source if include_deleted or not m.deleted), key=lambda m: m.id)

    def bot_messages(self, chat_id: int) -> list[Message]:
        return [m for m in self.messages(chat_id) if m.out]

    def message(self, chat_id: int, message_id: int) -> Message | None:
        with self.lock:
            return self.stored(chat_id, message_id)

    def find_button(self, chat_id: int, label: str) -> tuple[Message, Button] | None:
        """The newest live bot message in the chat with a button whose text, callback data or URL is
        `label` (text also matches without its emoji and case: "get files again")."""
        wanted = _plain(label)
        for msg in reversed(self.bot_messages(chat_id)):
            for row in buttons_of(msg.reply_markup):
                for button in row:
                    if label in (button.text, button.callback_data, button.url) or _same_words(button.text, wanted):
                        return msg, button
        return None


def buttons_of(markup) -> tuple[tuple[Button, ...], ...]:
    """The domain buttons of a raw ReplyInlineMarkup."""
    if not isinstance(markup, raw.types.ReplyInlineMarkup):
        return ()
    rows = []
    for row in markup.rows:
        buttons = []
        for b in row.buttons:
            kind = b.type
            if isinstance(kind, raw.types.InlineButtonTypeUrl):
                buttons.append(Button(b.text, url=kind.url))
            elif isinstance(kind, raw.types.InlineButtonTypeCallback):
                buttons.append(Button(b.text, callback_data=kind.data.decode()))
        rows.append(tuple(buttons))
    return tuple(rows)


def media_of(file: File | None) -> Media | None:
    return Media(file.kind, file.name) if file is not None else None


def _plain(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch.isalnum() or ch.isspace()).split()).casefold()


def _same_words(button_text: str, wanted: str) -> bool:
    """ "get files again" names "♻️ Get files again"; "how to verify" names "ℹ️ How to verify"
    (some emoji count as letters, so a leading symbol word may be left over)."""
    plain = _plain(button_text)
    return bool(wanted) and (plain == wanted or plain.endswith(" " + wanted) and len(plain) - len(wanted) <= 3)
