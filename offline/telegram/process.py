"""The in-memory Telegram as a process of its own, on a Unix socket (`manage.py telegram_server`).

runbot, workers and the sandbox connect with `SocketConnection` (MTProto packets in frames), so
several processes share one Telegram as they share the real one, and what a killed worker sent
is still counted. Tests and scripts steer it with `RemoteTelegram`: the same controls as a
`TelegramServer` in-process (user_sends, block, fail_next, count, ...), as JSON over the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from botapp.telegram.gateway import Media, TgUser
from offline.readiness import READY_TIMEOUT, ready_line_wait
from offline.telegram.connection import CONTROL, CONTROL_ANSWER, HELLO, PACKET, WRITTEN, frame, read_frame

if TYPE_CHECKING:  # a process that only talks to `manage.py telegram_server` never loads the server
    from offline.telegram.server import TelegramServer

# What a remote caller may ask of the server: the test and sandbox controls, nothing internal.
CONTROLS = {
    "create_channel", "join", "leave", "request_join", "post", "delete_post", "user_sends", "tap", "block", "unblock",
    "deactivate", "revoke_token", "fail_next", "file_id", "count", "methods_called", "events_since", "flood_waits",
    "set_rates", "restore_token", "bot_rights", "users_meet", "bot_sent", "received", "live", "hostile_start",
    "hostile_stop", "rotate_salt", "call_times", "update_state",
    "send_times", "events_count",
}  # fmt: skip


def _control(server: TelegramServer, name: str, args: list, kwargs: dict):
    if name not in CONTROLS:
        raise ValueError(f"unknown control {name!r}")
    if name == "events_since":
        with server.lock:
            return [dataclasses.asdict(e) for e in server.events[args[0] if args else 0 :]]
    if name == "flood_waits":
        return server.flood_waits
    if name == "set_rates":
        server.rates_set(**kwargs)
        return None
    if name in ("user_sends", "tap", "request_join"):
        user_index = 1 if name == "request_join" else 0
        args = list(args)
        args[user_index] = TgUser(**args[user_index])
    if "media" in kwargs and kwargs["media"] is not None:
        kwargs["media"] = Media(**kwargs["media"])
    if "forward_from" in kwargs and kwargs["forward_from"] is not None:
        kwargs["forward_from"] = tuple(kwargs["forward_from"])
    return getattr(server, name)(*args, **kwargs)


async def serve(server: TelegramServer, path: Path, *, ready: Callable[[], object] | None = None) -> None:
    """Listen on `path` until cancelled; `ready()` is called once connections are accepted."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        endpoint = None

        def write(data: bytes) -> None:
            if not writer.is_closing():
                writer.write(data)

        def push(packet: bytes) -> None:  # any thread (answers can be delayed by a timer)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(write, frame(PACKET, packet))

        try:
            while True:
                kind, payload = await read_frame(reader)
                if kind == HELLO:
                    endpoint = server.connect(payload, push, hangup=lambda: loop.call_soon_threadsafe(writer.close))
                elif kind == WRITTEN and endpoint is not None:
                    (written,) = struct.unpack_from(">d", payload)
                    endpoint.receive(payload[8:], written=written)
                elif kind == CONTROL:
                    request = json.loads(payload)
                    try:
                        answer = {"ok": _control(server, request["name"], request.get("args", []), request.get("kwargs", {}))}
                    except Exception as exc:  # noqa: BLE001 - the caller gets the error, the server goes on
                        answer = {"error": f"{type(exc).__name__}: {exc}"}
                    write(frame(CONTROL_ANSWER, json.dumps(answer, default=str).encode()))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if endpoint is not None:
                endpoint.close()
            writer.close()

    unix_server = await asyncio.start_unix_server(handle, path=str(path))
    os.chmod(path, 0o600)
    if ready is not None:
        ready()
    async with unix_server:
        await unix_server.serve_forever()


class RemoteTelegram:
    """Controls of a `telegram_server` process: `remote.block(1001)`, `remote.count("messages.SendMessage")`."""

    def __init__(self, path: Path | str, *, timeout: float = 10.0):
        self.path = str(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None

    def call(self, name: str, *args, **kwargs):
        args = [dataclasses.asdict(a) if dataclasses.is_dataclass(a) else a for a in args]
        kwargs = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in kwargs.items()}
        payload = json.dumps({"name": name, "args": args, "kwargs": kwargs}).encode()
        with self._lock:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sock.settimeout(self.timeout)
                self._sock.connect(self.path)
            self._sock.sendall(frame(CONTROL, payload))
            (length,) = struct.unpack(">I", self._recv(4))
            data = self._recv(length)
        answer = json.loads(data[1:])
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["ok"]

    def _recv(self, n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("telegram_server closed the connection")
            chunks += chunk
        return chunks

    def __getattr__(self, name: str):
        if name not in CONTROLS:
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def users_meet(self, user_ids) -> dict[int, int]:
        """As `TelegramServer.users_meet`: {user id: access hash} (JSON keys are strings)."""
        return {int(k): v for k, v in self.call("users_meet", list(user_ids)).items()}

    def received(self, *, since: int = 0, text: str | None = None) -> dict[int, int]:
        """As `TelegramServer.received`: {chat id: messages the bot sent it}."""
        return {int(k): v for k, v in self.call("received", since=since, text=text).items()}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@contextlib.contextmanager
def server_process(path: Path | str, *args: str, env: dict | None = None, stdout=None, timeout: float = READY_TIMEOUT):
    """Run `manage.py telegram_server --socket <path> *args` (benchmarks, process tests); yields
    its Popen once it says it is listening (its output copied to `stdout`, a file, when given),
    and stops it on the way out."""
    from django.conf import settings

    path = Path(path)
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "telegram_server", "--socket", str(path), *args],
        cwd=settings.BASE_DIR,
        env=os.environ.copy() if env is None else env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            ready_line_wait(proc, "telegram_server: listening", timeout=timeout, echo=stdout)
        except RuntimeError as exc:
            raise RuntimeError(f"telegram_server did not start: {exc}") from exc
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)
