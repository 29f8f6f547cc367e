"""The streaming process's application under uvicorn, in a thread of the test's process, reading
from the test's in-memory Telegram: every line of ours the process runs (uvicorn, Django's ASGI
handler, the views, the reader, the slots in Redis) with only Telegram replaced."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

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
from tests.processes import free_port, wait_for

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


def video_file(telegram, size: int, name: str = "clip.mp4", kind: str = "video", body: bytes | None = None):
    """A stored file of one message carrying a file of `size` bytes (generated, or `body`);
    returns (stored, the file's bytes as a function of (offset, length))."""
    message_id = telegram.post(STORAGE, "", media=Media(kind, name), file_size=size, content=body)
    stored = file_store(source_chat_id=STORAGE, message_ids=[message_id])
    info = telegram.file_info(STORAGE, message_id)
    if body is not None:
        return stored, lambda offset, length: body[offset : offset + length]
    return stored, lambda offset, length: content.generated(info["id"], offset, length)


def link(stored, *, hours: float = 1, user_id: int | None = None) -> str:
    return stream_token_make(stored=stored, index=0, expires_at=clock.now() + timedelta(hours=hours), user_id=user_id)


def run_coroutine(coro):
    return asyncio.run(coro)
