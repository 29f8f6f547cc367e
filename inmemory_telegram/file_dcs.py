"""The file data centres as a process of their own, as Telegram keeps files on other machines than
the one answering the bot's chats (`manage.py telegram_server`, process.serve).

Telegram's help.getConfig names, for each data centre, addresses to use for media only
(dcOption's `media_only` flag), and a file is read through a media connection to the DC it is kept
on (core.telegram.org/api/files, /api/datacenter). Here every media connection, and every
connection to a DC other than the bot's (limits.HOME_DC), goes to the files' socket
(protocol.files_socket), which this process serves: it decrypts what the clients send, and puts
together, encrypts and sends upload.getFile's answers with their bytes, after the link's latency
and bandwidth (dc_set). Those are the work a file part costs: 50 streams reading 1 MiB parts no
longer take the process that answers the bot's messages.

The rules stay the bot's DC's, in one place, as strict as ever: each request this process
decrypts is handed, as plaintext, to the bot's DC's process (`RemoteEndpoint`), which answers it as
it answers its own connections: the session's checks (salts, msg_ids, the hostile mode), the
authorization imported on the DC, injected faults, the flood limit on file reads, offset and
limit, FILE_MIGRATE_X, file references and their lifetime, the latency and the bandwidth of the
link (ServerCore.dispatch). For upload.getFile it answers which bytes (wire.FilePart), not the
bytes: this process reads them itself, generated from the file's id (content.generated) or from
the file store, where the bot's DC writes an uploaded file's bytes the first time one of its parts
is answered to this process (a file's bytes never change). The two processes are linked by a
socket pair; when either ends, the other does.

    python -m inmemory_telegram.file_dcs FD FILES_SOCKET STORE   (started by process.serve)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from inmemory_telegram import wire
from inmemory_telegram.content import generated
from inmemory_telegram.protocol import HELLO, PACKET, STREAM_LIMIT, WRITTEN, frame, read_frame
from inmemory_telegram.session import Endpoint

log = logging.getLogger(__name__)

# Frames between the two processes (protocol.frame). From the file DCs: OPEN (a client connected:
# its id, auth key, DC, bot token), PLAIN (its decrypted packet: id, when it was written, the
# plaintext), CLOSED (it went away), READY (the files' socket accepts connections). From the bot's
# DC: ANSWER (messages for a connection, after a delay), HANGUP (drop a connection).
OPEN, PLAIN, CLOSED, READY, ANSWER, HANGUP = 11, 12, 13, 14, 15, 16
_PLAIN_HEAD = struct.Struct(">Qd")
_ID = struct.Struct(">Q")
START_TIMEOUT = 60.0  # seconds the file DCs' process may take to start (imports on a busy machine)
STOP_TIMEOUT = 10.0


# --- the bot's DC's side ----------------------------------------------------------------------------


class RemoteEndpoint(Endpoint):
    """A connection the file DCs' process holds, answered here: its packets arrive decrypted, its
    answers leave as plaintext messages (ids and sequence numbers given here) for that process to
    encrypt, and an upload.getFile answer names its bytes (wire.FilePart) instead of carrying them."""

    def __init__(self, server, auth_key, push, hangup=None, *, dc_id: int, link: FileDCs, conn_id: int):
        super().__init__(server, auth_key, push, hangup, dc_id=dc_id)
        self.link = link
        self.conn_id = conn_id

    def unpack(self, packet: bytes) -> wire.Incoming:
        return wire.unpack_plain(packet)  # decrypted, its msg_key checked, by the file DCs' process

    def file_part(self, file, offset: int, length: int) -> wire.FilePart:
        stored = file.content is not None
        if stored:
            self.link.store(file)
        return wire.FilePart(file.id, offset, length, photo=file.kind == "photo", stored=stored)

    def send(self, body, *, answer: bool, content: bool = True, delay: float = 0.0, direct: bool = False) -> None:
        if self._held(body, answer, content, delay, direct):
            return
        message = (self.server.msg_ids.next(answer=answer), self.seq.next(content=content), body)
        self.link.answer(self.conn_id, self.session_id, time.monotonic() + delay, [message], None)

    def _send_container(self, answers, delay: float) -> None:
        # Inner messages get their ids first: a container's msg_id is greater than theirs.
        inner = [
            (self.server.msg_ids.next(answer=answer), self.seq.next(content=content), body)
            for body, answer, content, _ in answers
        ]
        outer = (self.server.msg_ids.next(answer=False), self.seq.next(content=False))
        self.link.answer(self.conn_id, self.session_id, time.monotonic() + delay, inner, outer)


def _no_push(packet: bytes) -> None:
    raise RuntimeError("a file DC's connection is answered through its own process")


class FileDCs:
    """The bot's DC's link to the file DCs' process: started with `async with FileDCs(server,
    files_path)`, then `run()` answers what it hands over until it ends (an error: it must not)."""

    def __init__(self, server, files_path: Path):
        self.server = server
        self.files_path = files_path
        self.endpoints: dict[int, RemoteEndpoint] = {}
        self.stored: set[int] = set()
        self._store_lock = threading.Lock()
        self.store_dir: Path | None = None
        self.process: subprocess.Popen | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reader = self.writer = None
        self.stopping = False

    @property
    def pid(self) -> int:
        return self.process.pid

    async def __aenter__(self) -> FileDCs:
        self.loop = asyncio.get_running_loop()
        self.store_dir = Path(tempfile.mkdtemp(prefix="tgfiles"))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        root = Path(__file__).resolve().parent.parent
        try:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this package
                [sys.executable, "-m", "inmemory_telegram.file_dcs", str(theirs.fileno()), str(self.files_path), str(self.store_dir)],
                pass_fds=(theirs.fileno(),), cwd=root,
            )  # fmt: skip
        finally:
            theirs.close()
        self.reader, self.writer = await asyncio.open_unix_connection(sock=ours, limit=STREAM_LIMIT)
        try:
            kind, _ = await asyncio.wait_for(read_frame(self.reader), START_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError) as exc:
            await self._stop()
            raise RuntimeError(f"the file DCs' process did not start (exit code {self.process.poll()})") from exc
        if kind != READY:
            await self._stop()
            raise RuntimeError(f"the file DCs' process said {kind} before it was ready")
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self._stop()

    async def _stop(self) -> None:
        self.stopping = True
        if self.writer is not None:
            self.writer.close()  # the file DCs' process ends when its link does
        for endpoint in list(self.endpoints.values()):
            endpoint.close()
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), STOP_TIMEOUT)
        except TimeoutError:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)
        shutil.rmtree(self.store_dir, ignore_errors=True)

    async def run(self) -> None:
        """Answer the file DCs' connections until the link ends (RuntimeError unless stopping)."""
        try:
            while True:
                kind, payload = await read_frame(self.reader)
                if kind == PLAIN:
                    conn_id, written = _PLAIN_HEAD.unpack_from(payload)
                    endpoint = self.endpoints.get(conn_id)
                    if endpoint is not None:
                        endpoint.receive(payload[_PLAIN_HEAD.size :], written=written)
                elif kind == OPEN:
                    self._open(*pickle.loads(payload))  # noqa: S301 - our own child process
                elif kind == CLOSED:
                    endpoint = self.endpoints.pop(_ID.unpack(payload)[0], None)
                    if endpoint is not None:
                        endpoint.close()
                else:
                    raise RuntimeError(f"the file DCs' process sent an unknown frame {kind}")
        except (asyncio.IncompleteReadError, ConnectionError):
            if not self.stopping:
                raise RuntimeError(f"the file DCs' process ended (exit code {self.process.poll()})") from None

    def _open(self, conn_id: int, auth_key: bytes, dc_id: int, bot_token: str | None) -> None:
        try:
            endpoint = self.server.connect(
                auth_key, _no_push, hangup=functools.partial(self.hangup, conn_id), dc_id=dc_id, bot_token=bot_token,
                endpoint_type=functools.partial(RemoteEndpoint, link=self, conn_id=conn_id),
            )  # fmt: skip
        except ValueError as exc:  # no such DC: the connection is dropped
            log.warning("telegram server: a file DC's connection refused: %s", exc)
            self.hangup(conn_id)
            return
        self.endpoints[conn_id] = endpoint

    def _write(self, data: bytes) -> None:
        def write() -> None:
            if not self.writer.is_closing():
                self.writer.write(data)

        with contextlib.suppress(RuntimeError):  # the loop is closed: the link with it
            self.loop.call_soon_threadsafe(write)

    def answer(self, conn_id: int, session_id: bytes, due: float, messages: list, container: tuple | None) -> None:
        """`messages` [(msg_id, seq_no, body or wire.FilePartAnswer)] for connection `conn_id`, alone
        or in a container with (msg_id, seq_no), sent at `due` (time.monotonic(), the machine's
        clock in both processes) or once put together and encrypted if that is later: the time
        that takes is spent within the answer's delay (session.Endpoint.send), not added to it."""
        self._write(frame(ANSWER, pickle.dumps((conn_id, session_id, due, messages, container))))

    def hangup(self, conn_id: int) -> None:
        self.endpoints.pop(conn_id, None)
        self._write(frame(HANGUP, _ID.pack(conn_id)))

    def store(self, file) -> None:
        """Put `file`'s bytes in the file store, once (they never change), before a part is answered."""
        with self._store_lock:
            if file.id in self.stored:
                return
            path = self.store_dir / str(file.id)
            partial = path.with_suffix(".partial")
            partial.write_bytes(file.content)
            partial.replace(path)
            self.stored.add(file.id)


# --- the file DCs' process ------------------------------------------------------------------------------


@dataclass
class _Connection:
    auth_key: bytes
    writer: asyncio.StreamWriter

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)


class _Files:
    """A file part's bytes: generated from the file's id, or read from the file store."""

    def __init__(self, store: Path):
        self.store = store
        self.fds: dict[int, int] = {}

    def read(self, part: wire.FilePart) -> bytes:
        if not part.stored:
            return generated(part.file_id, part.offset, part.length)
        fd = self.fds.get(part.file_id)
        if fd is None:
            fd = self.fds[part.file_id] = os.open(self.store / str(part.file_id), os.O_RDONLY)
        return os.pread(fd, part.length, part.offset)


def _packet(files: _Files, auth_key: bytes, session_id: bytes, messages: list, container: tuple | None) -> bytes:
    def body(value) -> bytes:
        return value.written(files.read(value.part)) if isinstance(value, wire.FilePartAnswer) else value

    if container is None:
        ((msg_id, seq_no, value),) = messages
        return wire.pack_server(body(value), auth_key=auth_key, session_id=session_id, msg_id=msg_id, seq_no=seq_no)
    inner = b"".join(
        wire.Long(msg_id) + wire.Int(seq_no) + wire.Int(len(b)) + b
        for msg_id, seq_no, b in ((m, s, body(v)) for m, s, v in messages)
    )
    whole = wire.Int(wire.MSG_CONTAINER_ID, False) + wire.Int(len(messages)) + inner
    return wire.pack_server(whole, auth_key=auth_key, session_id=session_id, msg_id=container[0], seq_no=container[1])


async def serve_files(link: socket.socket, files_path: Path, store: Path) -> None:
    """The file DCs' process: serve `files_path` until the link to the bot's DC ends."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_unix_connection(sock=link, limit=STREAM_LIMIT)
    connections: dict[int, _Connection] = {}
    ids = itertools.count(1)
    files = _Files(store)

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        conn_id = None
        try:
            while True:
                kind, payload = await read_frame(client_reader)
                if kind == HELLO and conn_id is None:
                    # as process.serve reads it: the auth key, the DC (2 bytes), the bot's token
                    dc_id = struct.unpack(">H", payload[256:258])[0]
                    conn_id = next(ids)
                    connections[conn_id] = _Connection(payload[:256], client_writer)
                    writer.write(frame(OPEN, pickle.dumps((conn_id, payload[:256], dc_id, payload[258:].decode() or None))))
                elif kind == WRITTEN and conn_id is not None:
                    (written,) = struct.unpack_from(">d", payload)
                    try:
                        plain = wire.decrypt_client(payload[8:], connections[conn_id].auth_key)
                    except Exception:  # noqa: BLE001 - Telegram drops what it cannot decrypt
                        log.warning("telegram server: undecryptable packet dropped")
                        continue
                    writer.write(frame(PLAIN, _PLAIN_HEAD.pack(conn_id, written) + plain))
                else:
                    log.warning("telegram server: frame %s on the files' socket ignored (controls go to the bot's DC)", kind)
                await client_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if conn_id is not None and connections.pop(conn_id, None) is not None and not writer.is_closing():
                writer.write(frame(CLOSED, _ID.pack(conn_id)))
            client_writer.close()

    with contextlib.suppress(FileNotFoundError):
        files_path.unlink()
    server = await asyncio.start_unix_server(handle, path=str(files_path), limit=STREAM_LIMIT)
    os.chmod(files_path, 0o600)
    writer.write(frame(READY, b""))
    try:
        async with server:
            while True:
                try:
                    kind, payload = await read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the bot's DC ended: so does this process
                if kind == ANSWER:
                    conn_id, session_id, due, messages, container = pickle.loads(payload)  # noqa: S301 - our parent
                    connection = connections.get(conn_id)
                    if connection is None:
                        continue
                    data = frame(PACKET, _packet(files, connection.auth_key, session_id, messages, container))
                    if due > loop.time():  # the loop's clock is time.monotonic()
                        loop.call_at(due, connection.write, data)
                    else:
                        connection.write(data)
                elif kind == HANGUP:
                    connection = connections.pop(_ID.unpack(payload)[0], None)
                    if connection is not None:
                        connection.writer.close()  # its answers not yet sent are lost
    finally:
        with contextlib.suppress(FileNotFoundError):
            files_path.unlink()


def main(argv: list[str]) -> None:
    # It ends when its link to the bot's DC does (that process's end, however it ends): a Ctrl-C
    # or a SIGTERM to the process group leaves it to the bot's DC to stop first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="telegram_server (file DCs): %(levelname)s %(message)s")
    fd, files_path, store = int(argv[0]), Path(argv[1]), Path(argv[2])
    asyncio.run(serve_files(socket.socket(fileno=fd), files_path, store))


if __name__ == "__main__":
    main(sys.argv[1:])
