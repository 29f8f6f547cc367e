"""The bench scripts still run. docs/benchmarks.md's figures come from `bench/*.py`; a change to a
model or a job's signature broke two of them unnoticed once (the bench is not run by CI). Each
script runs here with tiny sizes, production settings (DEBUG=0, PostgreSQL, Redis, its own
telegram_server process), on this run's test database, and must finish with its summary. The
figures themselves mean nothing at these sizes: only that every script works end to end."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPTS = {
    "broadcast.py": (["--runs", "1", "--users", "300", "--mode", "burst"], "all sends / allowed"),
    "broadcast.py --link=2": (
        ["--runs", "1", "--users", "300", "--mode", "burst", "--link-users", "6", "--link-after", "0.2"],
        "2-file link burst",
    ),
    "abuse.py": (["--runs", "1", "--abusers", "2", "--rate", "5", "--others", "5", "--seconds", "3"], "answers per abuser"),
    "calls.py": (["--runs", "1"], "Telegram calls per operation"),
    "lateness.py": (["--runs", "1", "--rows", "20", "--spread", "3", "--lead", "5"], "idle beat round"),
    "start.py": (["--runs", "1", "--users", "5", "--burst", "10"], "runbot updates/s"),
    "sweep.py": (["--runs", "1", "--total", "400", "--due", "200", "--budget", "30"], "per CPU-second of the sweeping process"),
    "sweep.py --paced": (["--runs", "1", "--total", "100", "--due", "40", "--budget", "5"], "at production pace"),
    "sender.py": (["--runs", "1", "--sends", "100"], "sends per CPU-second of the sender"),
    "scheduled.py": (["--runs", "1", "--recipients", "300", "--sends", "100"], "min / median / max"),
    "limiter.py": (["--runs", "1", "--free-sends", "30", "--paid-sends", "200", "--no-diagnostic"], "achieved/allowed"),
    "rss.py": (["--users", "300"], "peak"),
    "download_connections.py": (
        ["--runs", "1", "--size-mib", "2", "--cap-mib", "64", "--streams", "1", "--connections", "1", "2"],
        "(min / median / max)",
    ),
    "stream.py": (
        [
            "--runs",
            "1",
            "--size",
            "3",
            "--ttfb",
            "3",
            "--streams",
            "3",
            "--stream-size",
            "1",
            "--reply-streams",
            "2",
            "--broadcast-users",
            "30",
            "--reply-rate",
            "5",
        ],
        "replies p95",
    ),  # fmt: skip
    "scale.py": (["--runs", "1", "--users", "6000", "--sent", "1000", "--sample-seconds", "1"], "achieved/allowed"),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_bench_script_runs(script):
    args, summary = SCRIPTS[script]
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [sys.executable, f"bench/{script.split()[0]}", *script.split()[1:], *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert summary in output, output[-3000:]
