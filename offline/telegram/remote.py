"""The client's side of the in-memory Telegram's control protocol: `RemoteTelegram` steers a
`manage.py telegram_server` process (inmemory_telegram/process.py answers), `server_process` runs one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings

from inmemory_telegram.protocol import CONTROL, CONTROLS, frame
from offline.readiness import READY_TIMEOUT, ready_line_wait


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
