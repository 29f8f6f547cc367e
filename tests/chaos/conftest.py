"""The chaos suite's processes (one set for each module: starting Celery workers costs seconds) and
the table of figures it prints at the end (`make chaos`; docs/reliability.md holds a copy).

`make chaos` runs the modules side by side in pytest-xdist workers (`--dist loadfile`): each
module its own processes, logs (var/chaos/<module>/) and test database (pytest-django's suffix
_gw0, ...). A scenario's figures travel with its test report, so the process that prints the
tables (xdist's controller, or the only one with `-n 0`) has every worker's."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from botapp import clock
from tests.chaos.cluster import DEPLOYMENT_DB_APP, TABLE, UPDATES_TABLE, Figures, RedisServer, UpdateFigures, Workers
from tests.chaos.streams import STREAM_TABLE, StreamFigures
from tests.conftest import ADMIN, STORAGE

RATE = 300  # TELEGRAM_RATE of the workers: quick scenarios on a shared 2-core machine


REPORTED = "chaos figures"  # the name of a scenario's figures among its report's user_properties
PRINTED: list[Figures] = []  # what reports brought, in the order the scenarios ended
PRINTED_UPDATES: list[UpdateFigures] = []
PRINTED_STREAMS: list[StreamFigures] = []
KINDS = {"rows": (Figures, PRINTED), "updates": (UpdateFigures, PRINTED_UPDATES), "streams": (StreamFigures, PRINTED_STREAMS)}


@pytest.fixture(autouse=True)
def _figures_reported(request):
    """The lines this scenario added to the tables (cluster.py) go with its teardown's report."""
    tables = {"rows": TABLE, "updates": UPDATES_TABLE, "streams": STREAM_TABLE}
    before = {kind: len(table) for kind, table in tables.items()}
    yield
    for kind, table in tables.items():
        for f in table[before[kind] :]:
            request.node.user_properties.append((REPORTED, (kind, dataclasses.asdict(f))))


def pytest_runtest_logreport(report):
    if report.when != "teardown":
        return
    for name, value in report.user_properties:
        if name == REPORTED:
            kind, fields = value
            figures, printed = KINDS[kind]
            printed.append(figures(**fields))


def pytest_terminal_summary(terminalreporter):
    write = terminalreporter.write_line
    if PRINTED_STREAMS:
        write("")
        write("| scenario | bytes | received | wrong | repeated | recovered in | notes |")
        write("|---|--:|--:|--:|--:|--:|---|")
        for f in PRINTED_STREAMS:
            write(f"| {f.scenario} | {f.size:,} | {f.received:,} | {f.wrong:,} | {f.repeated:,} | {f.recover:.1f} s | {f.note} |")
    if PRINTED_UPDATES:
        write("")
        write("| scenario | updates | handled | replayed | handled twice | lost | recovered in | notes |")
        write("|---|--:|--:|--:|--:|--:|--:|---|")
        for f in PRINTED_UPDATES:
            write(
                f"| {f.scenario} | {f.updates} | {f.handled} | {f.replayed} | {f.twice} | {f.lost} | {f.recover:.1f} s | {f.note} |"
            )
        for f in PRINTED_UPDATES:
            for problem in f.problems:
                write(f"{f.scenario}: {problem}")
    if not PRINTED:
        return
    write("")
    write("| scenario | rows | sends | duplicates | lost | interrupted | recovered in | notes |")
    write("|---|--:|--:|--:|--:|--:|--:|---|")
    for f in PRINTED:
        write(
            f"| {f.scenario} | {f.rows:,} | {f.sends:,} | {f.duplicates} | {f.lost} | {f.interrupted} "
            f"| {f.recover:.1f} s | {f.note} |"
        )
    for f in PRINTED:
        for problem in f.problems:
            write(f"{f.scenario}: {problem}")


@dataclass
class Cluster:
    redis: RedisServer
    remote: object  # RemoteTelegram
    workers: Workers
    database: str


@pytest.fixture(scope="module")
def cluster(request, django_db_setup, django_db_blocker):
    from django.conf import settings
    from django.db import connection

    from config.celery import app
    from offline.telegram.remote import RemoteTelegram, server_process

    db = connection.settings_dict
    credentials = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    # The processes' logs, kept for a look after a failure: one folder per module (each has its processes).
    logs = Path(settings.BASE_DIR) / "var" / "chaos" / request.module.__name__.rsplit(".", 1)[-1]
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="chaos") as directory:  # short: socket paths are limited to ~100 bytes
        directory = Path(directory)
        redis_server = RedisServer(directory, logs)
        redis_server.start()
        broker = app.conf.broker_url
        app.conf.broker_url = redis_server.url  # wake-ups, "Run now" and the suite's own runs reach these workers
        app.close()  # no connection to the old broker is reused
        socket_path = directory / "telegram.sock"
        server_log = open(logs / "telegram_server.log", "a")  # noqa: SIM115
        try:
            with server_process(socket_path, "--no-rates", "--channel", str(STORAGE), stdout=server_log):
                remote = RemoteTelegram(socket_path, timeout=60)
                env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "CACHE_URL")}
                env.update(
                    DATABASE_URL=f"postgres://{credentials}@{db['HOST']}:{db['PORT']}/{db['NAME']}?application_name={DEPLOYMENT_DB_APP}",
                    REDIS_URL=redis_server.url,
                    TELEGRAM_OFFLINE="1",
                    TELEGRAM_OFFLINE_SOCKET=str(socket_path),
                    TELEGRAM_SESSION_DIR=str(directory / "sessions"),
                    STORAGE_CHANNEL_ID=str(STORAGE),
                    ADMIN_IDS=str(ADMIN),
                    TELEGRAM_RATE=str(RATE),
                    LOG_LEVEL="INFO",  # to var/chaos/<module>/w*.log
                )
                workers = Workers(env, logs)
                try:
                    # runbot first (start returns once it listens), then the workers; a module that
                    # starts its own (another release's: test_upgrade.py) names none.
                    for name in getattr(request.module, "CLUSTER_PROCESSES", ("bot", "w1", "w2")):
                        workers.start(name)
                    yield Cluster(redis_server, remote, workers, db["NAME"])
                finally:
                    workers.stop()
                    remote.close()
        finally:
            app.conf.broker_url = broker
            app.close()
            if redis_server.proc.poll() is None:
                redis_server.proc.terminate()
                redis_server.proc.wait(10)
            server_log.close()


@pytest.fixture(autouse=True)
def _real_clock(_clock_and_cache):
    """Workers run on the real clock: so do the rows this test makes (the shared fixture moved it)."""
    clock.clock_reset()
    yield
    clock.clock_reset()
