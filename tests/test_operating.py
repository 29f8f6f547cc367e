"""docs/operating.md and deploy/: every command of the guide that can run here runs (its `sh`
blocks, against a database, a Redis and folders of this test's own), each systemd unit's command
starts (in a dry run for the long-running ones), and the Procfile's release phase migrates."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.processes import ROOT, database_url, manage_env, redis_server

GUIDE = ROOT / "docs" / "operating.md"
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
BIN = Path(sys.executable).parent


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def test_the_guide_says_which_commands_run_here():
    assert len(blocks("sh")) >= 7
    assert all(b.strip() for b in blocks("sh"))


@pytest.fixture
def scratch_database(db):
    url = database_url().rsplit("/", 1)[0]
    name = "courier_ops_restore"
    with psycopg.connect(f"{url}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    yield f"{url}/{name}"
    with psycopg.connect(f"{url}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_sh_command_of_the_guide_runs(tmp_path, scratch_database):
    """In order, as an operator would: the backup is restored into a new database and sessions
    folder, and both hold what was backed up."""
    from botapp.models import BotSettings

    conf = BotSettings.load()
    conf.welcome_text = "Restored welcome"
    conf.save()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "bot.session").write_bytes(b"runbot's update position")
    (tmp_path / "backups").mkdir()
    (tmp_path / "redis").mkdir()
    with redis_server(tmp_path / "redis") as redis_url:
        env = manage_env(
            PATH=f"{BIN}:{os.environ['PATH']}",  # `python` is the project's
            REDIS_URL=redis_url,
            CELERY_BROKER_URL=redis_url,
            BACKUP_DIR=str(tmp_path / "backups"),
            TELEGRAM_SESSION_DIR=str(sessions),
            RESTORE_DATABASE_URL=scratch_database,
            RESTORE_SESSION_DIR=str(tmp_path / "restored-sessions"),
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
            MEDIA_ROOT=str(tmp_path / "media"),
        )
        outputs = []
        for block in blocks("sh"):
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
            )
            assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
            outputs.append(result)

    with psycopg.connect(scratch_database) as conn:
        (welcome,) = conn.execute("SELECT welcome_text FROM botapp_botsettings").fetchone()
    assert welcome == "Restored welcome"
    assert (tmp_path / "restored-sessions" / "bot.session").read_bytes() == b"runbot's update position"
    assert any("appendonly\nyes" in r.stdout for r in outputs)  # persistence turned on, and read back
    json_lines = [json.loads(line) for r in outputs for line in r.stderr.splitlines() if line.startswith("{")]
    assert {"level": "WARNING", "logger": "courier", "message": "hello"}.items() <= json_lines[0].items()


def unit_command(unit: Path) -> list[str]:
    """The unit's ExecStart as it runs from this checkout (the units expect /opt/courier)."""
    (line,) = re.findall(r"^ExecStart=(.+)$", unit.read_text(), flags=re.M)
    line = line.replace("/opt/courier/.venv/bin/", f"{BIN}/").replace("%i", "1").replace("%%h", "%h")
    return shlex.split(line)


DRY_RUN = {"gunicorn": ["--check-config"], "celery": ["--help"], "runbot": ["--help"], "stream": ["--help"]}


@pytest.mark.slow
@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_each_systemd_units_command_runs(unit, db):
    command = unit_command(unit)
    text = unit.read_text()
    assert "WorkingDirectory=/opt/courier" in text and "EnvironmentFile=/etc/courier/courier.env" in text
    long_running = next((flags for name, flags in DRY_RUN.items() if name in (Path(command[0]).name, *command[1:3])), [])

    result = subprocess.run(command + long_running, cwd=ROOT, env=manage_env(), capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stdout + result.stderr
    if not long_running:  # courier-release: the migration itself, nothing left to apply
        assert "No migrations to apply." in result.stdout


def test_the_target_starts_every_unit_and_one_worker():
    wanted = re.search(r"^Wants=(.+)$", (ROOT / "deploy" / "systemd" / "courier.target").read_text(), flags=re.M).group(1)
    assert sorted(wanted.split()) == sorted(u.name.replace("@.", "@1.") for u in UNITS)


@pytest.mark.slow
def test_the_procfiles_release_phase_migrates(db):
    procfile = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip())
    assert set(procfile) == {"release", "web", "bot", "worker", "beat", "stream"}

    result = subprocess.run(
        shlex.split(procfile["release"]),
        cwd=ROOT,
        env=manage_env(PATH=f"{BIN}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert "No migrations to apply." in result.stdout
