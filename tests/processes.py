"""Other processes for tests that run the deployment's commands: a Redis server of the test's own,
the environment a `manage.py` subprocess needs to share this test's database, and waiting for
something a process does."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

ROOT = Path(__file__).resolve().parents[1]


REDIS_DATABASES = 16  # redis.conf's default `databases`: numbers 0 to 15


def redis_url_of_worker(url: str, worker: str) -> str:
    """The Redis URL of pytest-xdist's worker `worker` ("gw0", "gw1", ...): worker N uses the
    database N below `url`'s (wrapping at 0), so gw0 keeps `url` and the default db 15 gives 15, 14, ..."""
    parts = urlsplit(url)
    number = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(number - int(worker.removeprefix('gw'))) % REDIS_DATABASES}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], *, timeout: float, what: str, interval: float = 0.05):
    """Poll `condition` until it returns something true (returned), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def redis_server(directory: Path, *args: str) -> Iterator[str]:
    """redis-server on a free port with `args` (e.g. "--appendonly", "yes"), its files in
    `directory`; yields its URL and stops it on the way out."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "", *args],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_connect_timeout=0.5)

    def pong():
        try:
            return client.ping()
        except redis.RedisError:
            return False

    try:
        wait_for(pong, timeout=10, what="redis-server to answer")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test database), for a subprocess."""
    from django.db import connection

    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a `make sandbox` the suite runs: unless told otherwise, a sandbox database named
    after the suite's own, so two suites on one PostgreSQL (or a developer's sandbox beside a
    suite) never drop each other's (`--fresh` recreates it)."""
    if "SANDBOX_DATABASE_URL" not in env and os.environ.get("DATABASE_URL"):
        worker = os.environ.get("PYTEST_XDIST_WORKER")  # under xdist, one per worker (each runs its own)
        name = os.environ["DATABASE_URL"].rstrip("/") + "_suite_sandbox" + (f"_{worker}" if worker else "")
        env = {**env, "SANDBOX_DATABASE_URL": name}
    return env


def manage_env(**overrides: str) -> dict[str, str]:
    """This process's environment with the test database and `overrides`, for `manage.py`."""
    return {**os.environ, "DATABASE_URL": database_url(), **overrides}


def manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
