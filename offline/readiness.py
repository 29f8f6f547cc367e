"""Waiting for a process to say it is ready, rather than sleeping and hoping it is.

`manage.py telegram_server` prints `telegram_server: listening …` once its socket accepts
connections, and `manage.py runbot` prints `runbot: listening …` once it is signed in with its
update handlers registered. Callers that start them (tests, bench scripts, the chaos cluster)
block on that line; the timeout only bounds a failure, it is never how long a start takes.
"""

from __future__ import annotations

import subprocess
import threading
from typing import IO

READY_TIMEOUT = 120.0  # seconds: generous, for a loaded machine; only a process that never starts waits this long


def ready_line_wait(
    proc: subprocess.Popen, prefix: str, *, timeout: float = READY_TIMEOUT, echo: IO[str] | None = None, anywhere: bool = False
) -> str:
    """Block until `proc` (started with stdout=PIPE, text=True) prints a line starting with
    `prefix` (`anywhere`: containing it, as Celery's "celery@host ready." after its log prefix),
    and return it. Its output is read to the end by a thread of this process, copied to
    `echo` when given, so the process never blocks on a full pipe. Raises RuntimeError when the
    process exits first, or says nothing within `timeout` seconds."""
    said: list[str] = []  # what it printed before the line (for the error)
    found: list[str] = []
    done = threading.Event()  # the line came, or the output ended

    def read() -> None:
        for line in proc.stdout:
            if echo is not None:
                echo.write(line)
                echo.flush()
            if done.is_set():
                continue  # drained, so that the process never blocks on a full pipe
            if line.startswith(prefix) or (anywhere and prefix in line):
                found.append(line.rstrip("\n"))
                done.set()
            else:
                said[:] = [*said[-4:], line.rstrip("\n")]
        done.set()

    threading.Thread(target=read, daemon=True, name=f"stdout-{proc.pid}").start()
    if not done.wait(timeout):
        raise RuntimeError(f"{proc.args!r} did not say {prefix!r} within {timeout:g} s; it said: {said}")
    if not found:
        raise RuntimeError(f"{proc.args!r} exited ({proc.wait()}) before saying {prefix!r}; it said: {said}")
    return found[0]
