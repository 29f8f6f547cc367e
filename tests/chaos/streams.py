"""The stream scenarios' processes and client: the in-memory Telegram as a process of its own
(`manage.py telegram_server`), two streaming processes (`manage.py stream`, each its own kurigram
session) on the suite's test database and Redis, and a downloader that assembles what it is sent
and resumes as `curl -C -` does (a Range from the bytes it has)."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from offline.readiness import ready_line_wait
from tests.chaos.cluster import free_port

PIECE = 64 * 1024  # bytes the client asks its socket for at a time


@dataclass
class StreamFigures:
    """One stream scenario's line of the table."""

    scenario: str
    size: int = 0  # the file's bytes
    received: int = 0  # bytes the client was sent, over every response (a resume's too)
    wrong: int = 0  # bytes of the assembled file that differ from the stored file's
    repeated: int = 0  # bytes sent again that the client already had (a resume from the wrong place)
    recover: float = 0.0  # the longest the client went without a byte from the fault on (Download.stall)
    note: str = ""


STREAM_TABLE: list[StreamFigures] = []  # printed at the end of the run (conftest)


class StreamProcesses:
    """`manage.py stream` processes by name, on free ports, with their output in `logs`."""

    def __init__(self, env: dict, logs: Path):
        self.env = env
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str) -> None:
        """Start (or start again) process `name`; returns once uvicorn says its application started
        (the readers signed in: botapp/stream/app.py)."""
        port = free_port()
        log = open(self.logs / f"{name}.log", "a")  # noqa: SIM115 - the reader thread holds it
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "stream", "--port", str(port)],
            cwd=settings.BASE_DIR,
            env={**self.env, "STREAM_PUBLIC_URL": f"http://127.0.0.1:{port}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.procs[name], self.ports[name] = proc, port
        ready_line_wait(proc, "Application startup complete", echo=log, anywhere=True)

    def ensure(self, *names: str) -> None:
        for name in names:
            if name not in self.procs or self.procs[name].poll() is not None:
                self.start(name)

    def kill(self, name: str) -> None:
        """kill -9, mid-whatever."""
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@dataclass
class Download:
    """What a client assembled of one file, over however many responses it took."""

    size: int
    data: bytearray = field(default_factory=bytearray)
    received: int = 0
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (time.monotonic(), bytes had) per piece
    faulted: float | None = None  # time.monotonic() when the fault was made

    def get(self, port: int, path: str, *, at: int | None = None, fault=None) -> bool:
        """GET `path` from the bytes already had (`Range: bytes=N-` once there are some, as
        `curl -C -`), appending what comes, until the response ends; once `at` bytes are had,
        `fault()` is called (once) and the time noted in `faulted`. True when the file is whole and
        nothing came past its end; False when the response ended short (a resume is due)."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            headers = {"Range": f"bytes={len(self.data)}-"} if self.data else {}
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            if self.data:
                expected = f"bytes {len(self.data)}-{self.size - 1}/{self.size}"
                assert response.status == 206, response.status
                assert response.getheader("Content-Range") == expected, response.getheader("Content-Range")
            else:
                assert response.status == 200, response.status
            while len(self.data) < self.size:
                if fault is not None and self.faulted is None and len(self.data) >= at:
                    self.faulted = time.monotonic()
                    fault()
                try:
                    piece = response.read1(PIECE)
                except (http.client.IncompleteRead, ConnectionError, TimeoutError):
                    return False
                if not piece:
                    return False
                self.data += piece
                self.received += len(piece)
                self.arrivals.append((time.monotonic(), len(self.data)))
            return response.read1(1) == b""  # and nothing past the end
        finally:
            conn.close()

    def stall(self) -> float:
        """The longest time from the fault on without a byte arriving (the fault to the first
        piece, or between two pieces after it)."""
        times = [self.faulted, *(at for at, _ in self.arrivals if at > self.faulted)]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=float("nan"))
