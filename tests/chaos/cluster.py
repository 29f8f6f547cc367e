"""The processes the chaos suite breaks: a Redis server of its own (so it can be killed and
restarted), `manage.py telegram_server`, and real Celery workers (`celery -A config worker`)
running the project's tasks against the test database.

Each worker is a process group of its own (the prefork parent and its child): `kill` sends SIGKILL
to the whole group, as a machine or container dying would; a worker's child alone dying is
something Celery notices and reports, which is the easier case.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from django.conf import settings

from offline.readiness import ready_line_wait

DEPLOYMENT_DB_APP = "courier-chaos"  # application_name of the PostgreSQL connections of runbot and the workers


@dataclass
class Figures:
    """One scenario's line of the table."""

    scenario: str
    rows: int = 0
    sends: int = 0  # user-visible messages Telegram delivered
    duplicates: int = 0  # chats that received one of them twice
    lost: int = 0  # rows never settled, or whose record contradicts what Telegram delivered
    interrupted: int = 0  # sends given up because their outcome was unknown (at most once)
    recover: float = 0.0  # seconds from the fault until every row and run was final
    note: str = ""
    problems: list[str] = field(default_factory=list)


TABLE: list[Figures] = []  # every scenario's line, printed at the end of the run (conftest)


@dataclass
class UpdateFigures:
    """One line of the table of runbot's scenarios (updates users sent, and what became of them)."""

    scenario: str
    updates: int = 0  # messages users (and the admin) sent to runbot
    handled: int = 0  # of them answered
    replayed: int = 0  # times Telegram handed back an update runbot had taken on (recognised)
    twice: int = 0  # updates handled twice though recorded handled before the kill (users served twice)
    lost: int = 0  # updates never answered
    recover: float = 0.0  # seconds from the restart until every update was answered
    note: str = ""
    problems: list[str] = field(default_factory=list)


UPDATES_TABLE: list[UpdateFigures] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NOTHING = object()


def wait_for(condition, *, timeout: float, what: str, interval: float = 0.1, default=NOTHING):
    """Poll `condition` until it returns something truthy (returned); after `timeout`, `default` if
    given, else AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            if default is not NOTHING:
                return default
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class RedisServer:
    """redis-server on a free port, no persistence (a restart comes back empty, as a crashed cache
    server without a disk would)."""

    def __init__(self, directory: Path, logs: Path):
        self.directory = directory
        self.logs = logs
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.directory,
            stdout=open(self.logs / "redis.log", "a"),  # noqa: SIM115 - the process holds it
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        wait_for(lambda: self._pong(client), timeout=10, what="redis-server to answer")

    @staticmethod
    def _pong(client) -> bool:
        try:
            return client.ping()
        except redis.RedisError:
            return False

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


class Workers:
    """The deployment's processes: named Celery workers (`w1@chaos`, ...), one task at a time each,
    and runbot (`bot`), all on the suite's Telegram, Redis and test database."""

    def __init__(self, env: dict, logs: Path):
        self.env = env
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.cwd = Path(settings.BASE_DIR)  # the code they run: another release's tree (test_upgrade.py)

    def start(self, name: str) -> None:
        if name == "bot":
            argv = [sys.executable, "manage.py", "runbot"]
        else:
            # The project's Celery app, with the faults the suite can inject (inert until armed).
            argv = [sys.executable, "-m", "celery", "-A", "tests.chaos.faults", "worker", "-n", f"{name}@chaos", "-c", "1",
                    "--without-gossip", "--without-mingle"]  # fmt: skip
        log = open(self.logs / f"{name}.log", "a")  # noqa: SIM115 - the process holds it
        bot = name == "bot"
        self.procs[name] = subprocess.Popen(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE if bot else log,  # runbot's is read for its "listening" line, then copied to the log
            stderr=subprocess.STDOUT,
            text=bot,
            start_new_session=True,  # a process group of its own: kill() takes a worker's pool child too
        )
        if bot:
            ready_line_wait(self.procs[name], "runbot: listening", echo=log)

    def kill(self, name: str) -> None:
        """kill -9: the worker's parent and its pool child, mid-whatever."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def dead(self) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def alive(self) -> list[str]:
        """The live Celery workers."""
        return [name for name, proc in self.procs.items() if proc.poll() is None and name != "bot"]

    def restart_dead(self) -> list[str]:
        dead = self.dead()
        for name in dead:
            self.start(name)
        return dead

    def stop(self, *, workers_only: bool = False) -> None:
        """Warm shutdown (SIGTERM); whatever is still there after 20 s is killed."""
        procs = [p for name, p in self.procs.items() if not (workers_only and name == "bot")]
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def log_of(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for name in self.procs:
            text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
            out += [f"--- {name} ---", *text[-lines:]]
        return "\n".join(out)
