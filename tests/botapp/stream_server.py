"""The streaming process's application under uvicorn, in a thread of the test's process, reading
from the test's in-memory Telegram: every line of ours the process runs (uvicorn, Django's ASGI
handler, the views, the reader, the slots in Redis) with only Telegram replaced. And
`stream_command`: `manage.py stream` itself, as its own process."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import uvicorn
from django.conf import settings as django_settings
from django.db import connections

from botapp import clock
from botapp.services.files import file_store
from botapp.services.stream_links import stream_token_make
from botapp.stream.app import StreamApp
from botapp.stream.pool import Serving
from botapp.stream.slots import Slots
from botapp.telegram.download_pool import DownloaderPool
from inmemory_telegram import content
from inmemory_telegram.state import Media
from offline.telegram.clients import offline_downloader
from tests.conftest import STORAGE
from tests.processes import ROOT, free_port, wait_for

STREAM_MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]  # config/settings_stream.py's
# The console's, for a test that also asks the console while the stream server runs.
CONSOLE_SETTINGS = {"ROOT_URLCONF": django_settings.ROOT_URLCONF, "MIDDLEWARE": list(django_settings.MIDDLEWARE)}


@dataclass
class Running:
    port: int
    app: StreamApp

    @property
    def serving(self) -> Serving:
        return self.app.serving

    def request(self, method: str, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body
        finally:
            conn.close()

    def load(self) -> int:
        return sum(d.load for d in self.serving.pool.downloaders)


@contextlib.contextmanager
def stream_server(telegram, settings, **downloader_options) -> Iterator[Running]:
    """uvicorn serving the stream origin's application on a free port until the block ends."""
    settings.ROOT_URLCONF = "botapp.stream.urls"
    settings.MIDDLEWARE = STREAM_MIDDLEWARE
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    # As config/settings_stream.py: each request's thread closes its connection.
    database = connections.settings["default"]
    max_age, database["CONN_MAX_AGE"] = database["CONN_MAX_AGE"], 0

    async def start() -> Serving:
        downloader = offline_downloader(telegram, **downloader_options)
        pool = DownloaderPool([downloader])
        await pool.start()
        return Serving(pool=pool, slots=Slots())

    app = StreamApp(start=start)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, name="stream-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout=30, what="the streaming server to start")
        assert server.started, "the streaming server did not start"
        yield Running(port=port, app=app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        database["CONN_MAX_AGE"] = max_age


def video_file(
    telegram, size: int, name: str = "clip.mp4", kind: str = "video", body: bytes | None = None, dc_id: int | None = None
):
    """A stored file of one message carrying a file of `size` bytes (generated, or `body`), kept
    on data centre `dc_id` (default: the bot's); returns (stored, the file's bytes as a function of
    (offset, length)). `telegram`: a TelegramServer, or a RemoteTelegram steering telegram_server."""
    message_id = telegram.post(STORAGE, "", media=Media(kind, name), file_size=size, content=body, dc_id=dc_id)
    stored = file_store(source_chat_id=STORAGE, message_ids=[message_id])
    info = telegram.file_info(STORAGE, message_id)
    if body is not None:
        return stored, lambda offset, length: body[offset : offset + length]
    return stored, lambda offset, length: content.generated(info["id"], offset, length)


def link(stored, *, hours: float = 1, user_id: int | None = None) -> str:
    return stream_token_make(stored=stored, index=0, expires_at=clock.now() + timedelta(hours=hours), user_id=user_id)


def run_coroutine(coro):
    return asyncio.run(coro)


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", *args], capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def stream_command(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`manage.py stream` on a free port with `env` (tests.processes.manage_env: the test's
    database; TELEGRAM_OFFLINE_SOCKET: the Telegram it reads from), its output in `log_path`;
    yields its URL once it answers, and stops it (SIGTERM) on the way out."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **env,
        "STREAM_PUBLIC_URL": url,
        "SECURE_SSL_REDIRECT": "0",
        "DJANGO_SETTINGS_MODULE": "config.settings",  # config/asgi_stream.py replaces it: the console never serves here
    }
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "stream", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
        )
        try:
            wait_for(
                lambda: (
                    proc.poll() is not None or curl("-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/x").stdout == "404"
                ),
                timeout=60,
                what="the streaming process to answer",
            )
            assert proc.poll() is None, log_path.read_text()
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
