"""One connected MTProto session, Telegram's side: packets in (after the network's delay), their
messages refused (bad_server_salt, bad_msg_notification) or handed to the server one by one, and
the answers back, encrypted, alone or in a container, on time or (the hostile mode) late, split,
preceded by service messages, or lost with a dropped connection.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from pyrogram import raw

from inmemory_telegram import wire
from inmemory_telegram.faults import DROP_WHEN, SPLIT_LATE

log = logging.getLogger(__name__)

# A message whose msg_id is this far behind or ahead of the server's clock is refused with
# bad_msg_notification 16 / 17 (core.telegram.org/mtproto/description#message-identifier-msg-id:
# "more than 300 seconds in the past or more than 30 seconds in the future").
MSG_ID_PAST = 300
MSG_ID_FUTURE = 30


class Endpoint:
    """One connected MTProto session (a kurigram `Session`). `server` is the core.ServerCore that
    answers its messages (unannotated: the core imports this module, not the other way round)."""

    def __init__(
        self, server, auth_key: bytes, push: Callable[[bytes], None], hangup: Callable[[], None] | None = None, *, dc_id: int = 2
    ):
        self.server = server
        self.dc_id = dc_id  # the data centre this connection is to
        self.link_free = 0.0  # time.monotonic() when its link has sent every answer so far (dc_set)
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
        when there is no network. Its arrival is when Telegram counts it (ServerCore.arrived)."""
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
            incoming = self.unpack(packet)
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

    def unpack(self, packet: bytes) -> wire.Incoming:
        """The message a packet from the client carries (decrypted here)."""
        return wire.unpack_client(packet, self.auth_key)

    def file_part(self, file, offset: int, length: int):
        """upload.getFile's answer on this connection: `length` bytes of `file` (a state.File) from
        `offset`, read here (a file DC's own process reads them itself: file_dcs.RemoteEndpoint)."""
        file_type = raw.types.storage.FilePartial() if file.kind != "photo" else raw.types.storage.FileJpeg()
        return raw.types.upload.File(type=file_type, mtime=0, bytes=file.read(offset, length))

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

    def _held(self, body, answer: bool, content: bool, delay: float, direct: bool) -> bool:
        """Whether an answer is not to be sent now: the connection is closed, or this thread is
        answering a container (the answer is collected, and sent with the others as one)."""
        if self.closed:
            return True
        collected = getattr(self._collecting, "answers", None)
        if collected is not None and not direct:
            collected.append((body, answer, content, delay))
            return True
        return False

    def send(self, body: bytes, *, answer: bool, content: bool = True, delay: float = 0.0, direct: bool = False) -> None:
        if self._held(body, answer, content, delay, direct):
            return
        # `delay` counts from now, the answer made: the time encrypting it takes (1 MiB: ~10 ms) is
        # this process's, spent within the delay, not added to the latency a benchmark set (dc_set).
        due = time.monotonic() + delay
        packet = wire.pack_server(
            body,
            auth_key=self.auth_key,
            session_id=self.session_id,
            msg_id=self.server.msg_ids.next(answer=answer),
            seq_no=self.seq.next(content=content),
        )
        if delay and (left := due - time.monotonic()) > 0:
            threading.Timer(left, self.push_packet, (packet,)).start()
        else:
            self.push_packet(packet)

    def close(self) -> None:
        self.closed = True
        with self._arrival:
            self._arrival.notify()
        self.server.disconnect(self)
