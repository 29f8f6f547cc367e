"""Faults mid-stream, through the real streaming processes: two `manage.py stream` (uvicorn, each
its own kurigram session) reading from the in-memory Telegram as a process of its own
(`manage.py telegram_server`), on the suite's test database and Redis. A client downloads a
32 MiB file with http.client; when it has a quarter of it, Telegram's file reference expires,
or getFile answers FLOOD_WAIT, or every connection drops, or the streaming process is killed
(kill -9) and the client resumes on the other with a Range from the bytes it has, as
`curl -C -` does. Then: the SHA-256 of what it assembled equals the stored file's, and it was sent
no byte twice (0 wrong, 0 repeated). Each prints a row (conftest: the stream table)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

from botapp import clock
from botapp.models import BotSettings
from botapp.services.files import file_store
from botapp.services.stream_links import stream_token_make
from botapp.telegram.downloads import parts
from inmemory_telegram import content
from inmemory_telegram.state import Media
from tests.chaos.streams import STREAM_TABLE, Download, StreamFigures, StreamProcesses
from tests.conftest import ADMIN, STORAGE

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024
SIZE = 32 * MIB  # several times what a streaming process holds ahead (4 parts in flight, socket buffers)
FAULT_AT = SIZE // 4  # the client's bytes when the fault strikes
GETFILE = "upload.GetFile"
FLOOD_SECONDS = 2


@pytest.fixture(scope="module")
def streaming(django_db_setup, django_db_blocker):
    """The module's processes: telegram_server and the streaming processes "a" and "b"."""
    from django.conf import settings
    from django.db import connection

    from offline.telegram.remote import RemoteTelegram, server_process

    db = connection.settings_dict
    credentials = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    logs = Path(settings.BASE_DIR) / "var" / "chaos-stream"  # kept for a look after a failure
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    with (
        tempfile.TemporaryDirectory(prefix="chaos") as directory,  # short: socket paths are limited
        open(logs / "telegram_server.log", "a") as server_log,
    ):
        socket_path = Path(directory) / "telegram.sock"
        with server_process(socket_path, "--no-rates", "--channel", str(STORAGE), stdout=server_log):
            remote = RemoteTelegram(socket_path, timeout=60)
            env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "CACHE_URL")}
            env.update(
                DATABASE_URL=f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
                REDIS_URL=settings.REDIS_URL,
                TELEGRAM_OFFLINE="1",
                TELEGRAM_OFFLINE_SOCKET=str(socket_path),
                TELEGRAM_SESSION_DIR=str(Path(directory) / "sessions"),
                STORAGE_CHANNEL_ID=str(STORAGE),
                ADMIN_IDS=str(ADMIN),
                SECURE_SSL_REDIRECT="0",
                LOG_LEVEL="INFO",
            )
            processes = StreamProcesses(env, logs)
            try:
                processes.ensure("a", "b")
                yield remote, processes
            finally:
                processes.stop()
                remote.close()


def stored_file(remote) -> tuple[str, str]:
    """A 32 MiB video in the storage channel, stored with a link, stream links on: (its stream
    path, its SHA-256)."""
    conf = BotSettings.load()
    conf.stream_links = BotSettings.StreamLinks.ON
    conf.save()
    message_id = remote.post(STORAGE, "", media=Media("video", "chaos.mp4"), file_size=SIZE)
    stored = file_store(source_chat_id=STORAGE, message_ids=[message_id])
    token = stream_token_make(stored=stored, index=0, expires_at=clock.now() + timedelta(hours=1), user_id=None)
    info = remote.file_info(STORAGE, message_id)
    return f"/f/{token}/chaos.mp4", content.generated_sha256(info["id"], SIZE)


def settle(scenario: str, download: Download, sha256: str, note: str) -> StreamFigures:
    """The scenario's row (recorded whatever the checks then say), checked: 0 wrong, 0 repeated."""
    got = hashlib.sha256(download.data).hexdigest()
    figures = StreamFigures(
        scenario,
        size=download.size,
        received=download.received,
        wrong=0 if got == sha256 else download.size,  # a whole-file checksum tells no count: all of it is suspect
        repeated=download.received - download.size,
        recover=download.stall(),
        note=note,
    )
    STREAM_TABLE.append(figures)
    assert len(download.data) == download.size, f"{len(download.data)} of {download.size} bytes"
    assert figures.repeated == 0, f"{figures.repeated} bytes sent twice"
    assert got == sha256, "the assembled file differs from the stored one"
    return figures


def one_stream(streaming, fault) -> tuple[Download, str, int]:
    """A whole download from process "a" with `fault` struck at FAULT_AT; returns the download,
    the file's SHA-256, and the getFile calls Telegram received for it."""
    remote, processes = streaming
    processes.ensure("a", "b")
    path, sha256 = stored_file(remote)
    download = Download(SIZE)
    since = remote.count()
    assert download.get(processes.ports["a"], path, at=FAULT_AT, fault=fault), "the response ended short"
    return download, sha256, remote.count(GETFILE, since=since)


PARTS = len(list(parts(0, SIZE)))  # getFile calls a whole download takes without a fault (the reader's plan)


def test_a_file_reference_expiring_mid_stream(streaming):
    remote, _ = streaming
    refreshes = {}

    def expire():
        refreshes["since"] = remote.count()
        remote.file_references_expire()

    download, sha256, calls = one_stream(streaming, expire)
    refreshed = remote.count("channels.GetMessages", since=refreshes["since"])
    settle(
        "file reference expired mid-stream (32 MiB)",
        download,
        sha256,
        f"{calls - PARTS} getFile answered FILE_REFERENCE_EXPIRED, asked again from their offsets after "
        f"{refreshed} channels.getMessages (the reference refreshed once)",
    )
    assert calls > PARTS and refreshed >= 1


def test_a_flood_wait_on_getfile_mid_stream(streaming):
    remote, _ = streaming
    download, sha256, calls = one_stream(streaming, lambda: remote.fail_next(f"FLOOD_WAIT_{FLOOD_SECONDS}", methods=[GETFILE]))
    figures = settle(
        f"FLOOD_WAIT_{FLOOD_SECONDS} on getFile mid-stream (32 MiB)",
        download,
        sha256,
        f"{calls - PARTS} getFile answered FLOOD_WAIT_{FLOOD_SECONDS}, waited out and asked again from its offset",
    )
    assert calls == PARTS + 1
    assert figures.recover >= FLOOD_SECONDS / 2  # the wait was kept (what was held ahead covers part of it)


def test_every_connection_dropped_mid_stream(streaming):
    remote, _ = streaming
    dropped = {}
    download, sha256, calls = one_stream(streaming, lambda: dropped.setdefault("n", remote.connections_drop()))
    settle(
        "every connection to Telegram dropped mid-stream (32 MiB)",
        download,
        sha256,
        f"{dropped['n']} connections dropped with their answers; {calls - PARTS} getFile asked again once reconnected",
    )
    assert dropped["n"] >= 1


def test_the_streaming_process_killed_mid_download_resumed_on_another(streaming):
    remote, processes = streaming
    processes.ensure("a", "b")
    path, sha256 = stored_file(remote)
    download = Download(SIZE)
    try:
        whole = download.get(processes.ports["a"], path, at=FAULT_AT, fault=lambda: processes.kill("a"))
        assert not whole, "the killed process's response cannot be whole"
        cut_at = len(download.data)
        assert cut_at < SIZE
        assert download.get(processes.ports["b"], path), "the resumed response ended short"
    finally:
        processes.ensure("a")  # for whatever runs next
    settle(
        "kill -9 of the streaming process mid-download, resumed on another (32 MiB)",
        download,
        sha256,
        f"cut at {cut_at / MIB:.1f} MiB; Range: bytes={cut_at}- on the other process: 206 from that byte",
    )
