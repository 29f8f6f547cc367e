"""The protocol core of the in-memory Telegram: sessions, dispatch, salts, faults, the hostile mode,
the rates, and the records every method shares. The controls tests and the sandbox use (users
writing, channels posting, faults injected, what was received) are mixins beside it
(controls.py, inspection.py); server.TelegramServer puts them together with the methods.
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
from datetime import datetime

from pyrogram import raw

from inmemory_telegram import limits, render, wire
from inmemory_telegram.accounts import EXTRA_BOT_METHODS, Accounts
from inmemory_telegram.faults import HOSTILE_FLOODS, INTERNAL_ERRORS, LOSE_ANSWER, SEND_METHODS, Fault, Hostile, RpcFault
from inmemory_telegram.rates import CALL_LIMITED, Network, Rates, Window
from inmemory_telegram.session import Endpoint
from inmemory_telegram.state import Account, Bot, Call, Channel, Event, File, Message, Profile, Upload, User, channel_raw_id

log = logging.getLogger(__name__)

# How long Telegram remembers a send's random_id (a repeat within it is refused with
# RANDOM_ID_DUPLICATE). Inferred: Telegram documents no duration. This model assumes ten minutes,
# the shortest a client is known to rely on (Courier's TELEGRAM_RANDOM_ID_WINDOW infers the same),
# and delivers a repeat made later as a new message: a client that repeats later sends twice here.
RANDOM_ID_MEMORY = 600.0
# How long a salt Telegram replaced is still accepted. Telegram documents that salts change and that
# a client learns the new one from bad_server_salt or get_future_salts, not for how long the old one
# is honoured: inferred, and stricter than Telegram is likely to be, not at all.
OLD_SALT_GRACE = 0.0
# A person's own account signing in (a user session): the calls it makes before it is signed in.
LOGIN_METHODS = frozenset({"auth.SendCode", "auth.SignIn", "auth.CheckPassword", "account.GetPassword"})
# What a signed-in account may call here: what a user session of Courier's calls. Telegram lets an
# account call far more; this model answers only these, and anything else as not implemented.
ACCOUNT_METHODS = frozenset(
    {"help.GetConfig", "updates.GetState", "users.GetFullUser", "users.GetUsers", "contacts.ResolveUsername",
     "messages.GetHistory"}
)  # fmt: skip
# Methods a bot may not call (BOT_METHOD_INVALID: "This method can't be used by a bot", as
# core.telegram.org lists for messages.getHistory; the Bot API gives bots no history). A key signed
# in to a bot may not call LOGIN_METHODS either: core.telegram.org's auth.sendCode says "Only users
# can use this method".
USER_ONLY = frozenset({"messages.GetHistory"})


# What a key not signed in (a new key on another DC, a person's before they sign in) may call: the
# configuration, and the import of an authorization exported on the bot's DC
# (core.telegram.org/api/datacenter#authorization transfer); and a person's LOGIN_METHODS ("This
# method can be invoked over an unauthenticated connection", core.telegram.org's auth.sendCode).
UNAUTHORIZED_METHODS = frozenset({"help.GetConfig", "auth.ImportAuthorization"})


class ServerCore(Accounts):
    """Telegram's side of every session: the state under one lock, the dispatch of each request to
    its method (a table given by whoever builds it: server.TelegramServer), the checks made before
    any method runs (the token, injected faults, the hostile mode, the rates), and the records and
    updates the methods and the controls make."""

    BOT_ID = 7_000_000_001

    def __init__(
        self,
        *,
        methods: dict[str, Callable],
        now: Callable[[], datetime],
        username: str = "CourierBot",
        token: str = "7000000001:offline-token",
        enforce_rates: bool = True,
        global_rate: float = limits.GLOBAL_RATE,
        paid_rate: float = limits.PAID_RATE,
        latency: float = 0.0,
        network: Network | None = None,
        count_per_message: bool = True,
    ):
        self.methods = methods  # "messages.SendMessage" -> handler(server, query)
        # The clock messages, invites, updates and outages are dated by (timezone-aware UTC), given
        # by whoever builds the server: tests and the sandbox give theirs, which they move forward.
        # Rates count in `rate_clock` (the machine's monotonic time), MTProto's msg_ids in real time.
        self.now = now
        self.bot = Bot(id=self.BOT_ID, username=username, first_name="Courier", token=token)
        self.bots: dict[int, Bot] = {self.bot.id: self.bot}  # the main bot, and extra ones (bot_add)
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
        self.authorized: dict[tuple[int, bytes], int] = {}  # (dc, auth key id) -> the bot it is signed in to
        self.exported: dict[bytes, int] = {}  # auth.exportAuthorization's bytes -> the DC they are for
        # Each DC's link, as a benchmark sets it (dc_set): extra seconds every answer takes, and the
        # bytes per second each connection to it carries (None: no cap).
        self.dc_links: dict[int, tuple[float, float | None]] = {}
        self.file_read_rate = limits.FILE_READ_RATE
        self.file_reads: dict[int, Window] = {}  # by bot: each account's own budget (file_reads_of)
        self.file_reads_served = 0  # upload.getFile answers with bytes, and their bytes
        self.file_bytes_served = 0
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
        # `forgotten`: the highest value of each kind dropped after UPDATES_KEPT (methods/updates.py).
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
        # People's own accounts (user sessions): by phone (digits), and the keys signed in to them.
        self.accounts: dict[str, Account] = {}
        self.signed_in: dict[bytes, int] = {}  # auth key id -> the account's user id
        self.logging_in: dict[bytes, str] = {}  # auth key id -> the phone a code was sent to
        self.password_pending: dict[bytes, object] = {}  # auth key id -> its SRP check (methods/auth.py)
        self.caller: User | None = None  # the account the request being answered comes from (None: the bot)
        self.caller_key = b""  # that request's auth key id

    # --- sessions -------------------------------------------------------------------------------

    def connect(
        self,
        auth_key: bytes,
        push: Callable[[bytes], None],
        hangup: Callable[[], None] | None = None,
        *,
        dc_id: int = limits.HOME_DC,
        bot_token: str | None,
        endpoint_type: Callable[..., Endpoint] = Endpoint,
    ) -> Endpoint:
        """A client connects to data centre `dc_id` with a key it was provisioned with (see
        offline/telegram/connection.py); `hangup` drops its connection. A key is signed in on the
        bots' own DC (as a provisioned session is) to the bot whose token the client holds (a
        token no bot has: to none, every call AUTH_KEY_UNREGISTERED; None: a person's user session,
        whose key is signed in to nothing until the account signs in, methods/auth.py); on another
        DC only once auth.importAuthorization was called with it. `endpoint_type`: what carries
        its packets (file_dcs.RemoteEndpoint: a connection the file DCs' process holds)."""
        if dc_id not in limits.DCS:
            raise ValueError(f"no data centre {dc_id}")
        with self.lock:
            self.keys[wire.key_id(auth_key)] = auth_key
            bot = next((b for b in self.bots.values() if b.token == bot_token), None) if bot_token else None
            if dc_id == limits.HOME_DC and bot is not None:
                self.authorized.setdefault((dc_id, wire.key_id(auth_key)), bot.id)
            endpoint = endpoint_type(self, auth_key, push, hangup, dc_id=dc_id)
            self.endpoints.append(endpoint)
            return endpoint

    def disconnect(self, endpoint: Endpoint) -> None:
        with self.lock:
            if endpoint in self.endpoints:
                self.endpoints.remove(endpoint)

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
                with self.lock:
                    if self.hostile is not None:  # not turned off meanwhile
                        self.hostile.internals_delivered += 1
                raise RpcFault("INTERNAL", 500)
            body_bytes = wire.rpc_result(msg_id, result)
        except RpcFault as fault:
            body_bytes = wire.rpc_result(msg_id, raw.types.RpcError(error_code=fault.code, error_message=fault.message))
        endpoint.send(body_bytes, answer=True, delay=self.latency + self._link_delay(endpoint, len(body_bytes)))

    def _link_delay(self, endpoint: Endpoint, size: int) -> float:
        """The extra time an answer of `size` bytes takes on `endpoint`'s link (dc_set): the DC's
        latency, and, with a bandwidth cap, its turn on the connection (answers go one after
        another, each taking size / bandwidth)."""
        link = self.dc_links.get(endpoint.dc_id)
        if link is None:
            return 0.0
        latency, bandwidth = link
        if not bandwidth:
            return latency
        with self.lock:
            now = time.monotonic()
            endpoint.link_free = max(endpoint.link_free, now) + size / bandwidth
            return latency + endpoint.link_free - now

    def current_endpoint(self) -> Endpoint:
        """The session whose request this thread answers (a method that depends on its DC)."""
        return self._answering.endpoint

    def _invoke(self, endpoint: Endpoint, name: str, query, *, subscribe: bool):
        chat_id = self._chat_of(query)
        self.calls.append(Call(name, chat_id, self._arrived_monotonic(), self._user_hash_of(query)))
        self._caller_set(endpoint, name)
        self._raise_fault(name, chat_id)
        self._hostile_flood(name)
        if name in CALL_LIMITED:  # reads and deletes: one call each in the free budget (inferred)
            self.check_rate(None, paid=False)
        handler = self.methods.get(name)
        if handler is None:
            log.error("telegram server: %s is not implemented", name)
            raise RpcFault("INPUT_METHOD_INVALID")
        self._answering.endpoint = endpoint
        if subscribe and name.startswith("updates."):
            # Inferred from MTProto's docs: a session that asks for the update state gets updates;
            # kurigram's no_updates clients wrap every call in invokeWithoutUpdates and get none.
            endpoint.receives_updates = True
        return handler(self, query)

    def _caller_set(self, endpoint: Endpoint, name: str) -> None:
        """Who the request comes from, and whether they may make it. A key is signed in to one bot
        (`authorized`, on its DC: accounts.Accounts.bot_of) or to one person's account
        (`signed_in`: a user session), never both, or to nothing yet: then it may make only the
        calls of an unauthenticated connection (UNAUTHORIZED_METHODS, LOGIN_METHODS), anything else
        AUTH_KEY_UNREGISTERED (401). A person's account may call ACCOUNT_METHODS; a bot may not call
        USER_ONLY nor LOGIN_METHODS (BOT_METHOD_INVALID), and an extra bot only EXTRA_BOT_METHODS."""
        self.caller_key = wire.key_id(endpoint.auth_key)
        account_id = self.signed_in.get(self.caller_key)
        self.caller = self.users[account_id] if account_id is not None else None
        if self.caller is not None:
            if name not in ACCOUNT_METHODS:
                log.error("telegram server: %s is not implemented for a user account", name)
                raise RpcFault("INPUT_METHOD_INVALID")
            return
        bot = self.bot_of(endpoint)
        if bot is None:  # a key on another DC before importAuthorization, or a person's not signed in yet
            if name not in UNAUTHORIZED_METHODS and name not in LOGIN_METHODS:
                raise RpcFault("AUTH_KEY_UNREGISTERED", 401)
            return
        if name != "help.GetConfig":
            if bot.revoked:
                raise RpcFault("AUTH_KEY_UNREGISTERED")
            if bot.deactivated:
                raise RpcFault("USER_DEACTIVATED")
        if name in USER_ONLY or name in LOGIN_METHODS:
            raise RpcFault("BOT_METHOD_INVALID")
        if bot is not self.bot and name not in EXTRA_BOT_METHODS:
            log.error("telegram server: %s is not modelled for an extra bot", name)
            raise RpcFault("INPUT_METHOD_INVALID")

    def _chat_of(self, query) -> int | None:
        for attr in ("peer", "to_peer", "channel"):
            peer = getattr(query, attr, None)
            if isinstance(peer, (raw.types.InputPeerUser, raw.types.InputUser)):
                return peer.user_id
            if isinstance(peer, (raw.types.InputPeerChannel, raw.types.InputChannel)):
                return -1_000_000_000_000 - peer.channel_id
        return None

    def _user_hash_of(self, query) -> int | None:
        """The access hash the request names its user with, as `_chat_of` finds the user."""
        for attr in ("peer", "to_peer", "channel"):
            peer = getattr(query, attr, None)
            if isinstance(peer, (raw.types.InputPeerUser, raw.types.InputUser)):
                return peer.access_hash
            if isinstance(peer, (raw.types.InputPeerChannel, raw.types.InputChannel)):
                return None
        return None

    def _answer_lost(self, name: str, query) -> bool:
        for fault in list(self.faults):
            if fault.error == LOSE_ANSWER and (fault.methods is None or name in fault.methods):
                if fault.chat_id is not None and self._chat_of(query) != fault.chat_id:
                    continue
                if fault.over(self.now()):
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
            if fault.over(self.now()):
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

    def user_record(self, tg: Profile | int) -> User:
        """The user `tg` names (made when new); a profile (or an object with its fields) also
        updates their names, as a user's app does each time it writes."""
        user_id = tg if isinstance(tg, int) else tg.id
        user = self.users.get(user_id)
        if user is None:
            user = self.users[user_id] = User(id=user_id)
        if not isinstance(tg, int):
            user.first_name, user.last_name = tg.first_name, tg.last_name
            user.username, user.language_code = tg.username, tg.language_code
        return user

    def new_message(self, chat_id: int, **fields) -> Message:
        if chat_id > 0:
            msg = Message(chat_id=chat_id, id=next(self._box_ids), date=self.now(), **fields)
            self.box[msg.id] = msg
            self.pts += 1
            # Every message of the box is an event of its pts sequence, the bot's own too: getDifference
            # hands them all back (methods/updates.py, OWN_MESSAGES_IN_DIFFERENCE).
            self.update_log.append(("pts", self.pts, msg, msg.date))
        else:
            channel = self.channels[channel_raw_id(chat_id)]
            msg = Message(chat_id=chat_id, id=channel.next_id, date=self.now(), **fields)
            channel.next_id += 1
            channel.pts += 1
            self.channel_messages[channel.raw_id][msg.id] = msg
        return msg

    def new_file(self, kind: str, name: str, size: int | None = None, *, dc_id: int = limits.HOME_DC) -> File:
        if dc_id not in limits.DCS:
            raise ValueError(f"no data centre {dc_id}")
        file = File(id=next(self._file_ids), kind=kind, name=name, dc_id=dc_id, reference_at=self.now())
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
            date=int(self.now().timestamp()),
            seq=0,
        )
