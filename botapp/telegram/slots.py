"""Session names a process holds alone: two processes never share a kurigram session file (two
clients on one auth key would each take the other's answers). No kurigram here, so a worker takes
its slot before it loads kurigram (scheduler/sender.py)."""

from __future__ import annotations

import fcntl
from pathlib import Path


def slot_take(sessions_dir: Path, prefix: str) -> tuple[str, object]:
    """The first free `<prefix>-<n>` under `sessions_dir` (workers', streaming processes'), and the
    open file whose exclusive lock keeps it this process's until closed or the process ends."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        handle = open(sessions_dir / f"{prefix}-{n}.lock", "w")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            n += 1
            continue
        return f"{prefix}-{n}", handle
