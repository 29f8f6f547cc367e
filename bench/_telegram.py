"""The emulated Telegram for the bench scripts: `manage.py telegram_server` as a process of its own
(so its CPU is not the sender's), and users the bot has met, with their access hashes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path

from pyrogram import raw

from botapp.telegram.gateway import TgUser
from offline.readiness import ready_line_wait
from offline.telegram.remote import RemoteTelegram, server_process


@contextlib.contextmanager
def telegram_process(*args: str):
    """Run `manage.py telegram_server --socket <tmp> *args`; yields (socket path, RemoteTelegram, Popen)."""
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as directory:  # short: socket paths are limited
        path = Path(directory) / "telegram.sock"
        try:
            with server_process(path, *args) as proc:
                remote = RemoteTelegram(path, timeout=60)
                yield path, remote, proc
                remote.close()
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from exc


@contextlib.contextmanager
def production_process(args: list[str], env: dict, log: Path, ready: str, *, cwd: Path):
    """A production process (runbot, a Celery worker) with its output copied to `log`, once it
    has printed a line containing `ready` (offline/readiness.py: the line is waited for, not
    polled); stopped on the way out."""
    with open(log, "w") as out:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            try:
                ready_line_wait(proc, ready, echo=out, anywhere=True)
            except RuntimeError as exc:
                raise SystemExit(f"bench: {args[1:4]} did not start: {exc}") from exc
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


STORAGE = -1001000000001
ADMIN = 1000


def offline_env(path, session_dir: str, **extra: str) -> dict:
    """The environment of a runbot or worker process talking to the telegram_server at `path`."""
    return dict(
        os.environ,
        TELEGRAM_OFFLINE="1",
        TELEGRAM_OFFLINE_SOCKET=str(path),
        TELEGRAM_SESSION_DIR=session_dir,
        STORAGE_CHANNEL_ID=str(STORAGE),
        ADMIN_IDS=str(ADMIN),
        **extra,
    )


def process_cpu(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def users_meet_bot(remote: RemoteTelegram, ids) -> None:
    """Each user writes /start to the bot (as before a broadcast: the bot can only reach users who did)."""
    for user_id in ids:
        remote.user_sends(TgUser(id=user_id, first_name="U"), "/start")


def access_hashes(gateway, ids) -> dict[int, int]:
    """The access hashes Telegram gives the bot for users it has met (users.getUsers with hash 0,
    200 at a time): what runbot stores from their updates. A set-up call, not a measured one."""
    ids = list(ids)
    found: dict[int, int] = {}

    async def fetch(chunk):
        return await gateway.client.invoke(
            raw.functions.users.GetUsers(id=[raw.types.InputUser(user_id=i, access_hash=0) for i in chunk])
        )

    for start in range(0, len(ids), 200):
        for user in gateway._run(fetch(ids[start : start + 200])):
            found[user.id] = user.access_hash
    missing = set(ids) - set(found)
    if missing:
        raise SystemExit(f"bench: Telegram does not know {len(missing)} users, e.g. {sorted(missing)[:3]}")
    return found
