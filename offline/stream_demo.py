"""`make sandbox DEMO=stream`: the demo video stored in the sandbox's in-memory Telegram, and the
streaming process (`manage.py stream`, as deployed) reading it over the in-memory Telegram's
socket, on http://127.0.0.1:STREAM_PORT (8001 unless set). The sandbox prints the player page's
address and a `curl -C -` line that resumes the download."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from django.db import connection
from django.test import override_settings

from botapp.models import BotSettings, StoredFile
from botapp.services.files import file_store
from botapp.services.stream_links import StreamUrls, stream_links_for
from inmemory_telegram.process import served_on_socket
from inmemory_telegram.server import TelegramServer
from inmemory_telegram.state import Media
from offline.demo_video import DEMO_VIDEO

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 60  # the streaming process signs in and answers within this, or the demo says why not


def stream_demo_store(telegram: TelegramServer, *, storage_channel_id: int) -> StoredFile:
    """The demo video posted in the storage channel and stored as a file, stream links on."""
    message_id = telegram.post(
        storage_channel_id, "Courier demo video", media=Media("video", "demo.webm"), content=DEMO_VIDEO.read_bytes()
    )
    stored = file_store(source_chat_id=storage_channel_id, message_ids=[message_id], title="Demo video")
    conf = BotSettings.load()
    conf.stream_links = BotSettings.StreamLinks.ON
    conf.save()
    return stored


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def stream_demo(telegram: TelegramServer, stored: StoredFile, *, port: int) -> Iterator[StreamUrls]:
    """`manage.py stream` on 127.0.0.1:`port` against `telegram`, for as long as the block runs;
    yields the demo video's links. Raises RuntimeError with the process's output when it does not
    start."""
    public = f"http://127.0.0.1:{port}"
    with served_on_socket(telegram, file_dcs=True) as socket_path, tempfile.TemporaryDirectory(prefix="stream") as sessions:
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "TELEGRAM_OFFLINE": "1",
            "TELEGRAM_OFFLINE_SOCKET": str(socket_path),
            "TELEGRAM_SESSION_DIR": sessions,
            "STORAGE_CHANNEL_ID": str(stored.source_chat_id),
            "STREAM_PUBLIC_URL": public,
        }
        log = Path(sessions) / "stream.log"
        with open(log, "w") as out:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "stream", "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
            )
        try:
            deadline = time.monotonic() + START_SECONDS
            while not _answers(f"{public}/assets/player.css"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the streaming process did not start on port {port}:\n{log.read_text()}")
                time.sleep(0.2)
            with override_settings(STREAM_PUBLIC_URL=public):
                (links,) = stream_links_for(stored=stored, conf=BotSettings.load(), user_id=None)
            yield links
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def stream_port() -> int:
    return int(os.environ.get("STREAM_PORT") or 8001)


def stream_demo_lines(links: StreamUrls) -> list[str]:
    """What the sandbox prints: where to watch, and how to download and resume."""
    return [
        f"demo video: open {links.watch} in a browser (the player seeks by range requests)",
        f"download it, cut it (Ctrl-C) and resume: curl -C - -o demo.webm '{links.download}'",
    ]
