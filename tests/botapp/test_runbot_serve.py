"""`runbot` serving as in production: its real client over a socket to the in-memory Telegram
(`telegram_server`'s code, in a thread here), the shared limiter in Redis, a clean stop on SIGTERM."""

import asyncio
import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path

import pytest

from botapp import clock
from botapp.config import OFFLINE_BOT_TOKEN, BotConfig
from botapp.management.commands.runbot import Command
from botapp.models import BotSettings, TelegramUser
from botapp.telegram.gateway import TgUser
from inmemory_telegram.process import serve
from inmemory_telegram.server import TelegramServer
from offline.telegram.remote import RemoteTelegram


@pytest.fixture
def telegram_process():
    """The in-memory Telegram on a Unix socket, served from a thread of this process."""
    server = TelegramServer(now=clock.now, username="CourierBot", enforce_rates=False)
    with tempfile.TemporaryDirectory(prefix="tg") as directory:  # short: socket paths are limited to ~100 bytes
        path = Path(directory) / "telegram.sock"
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        task = loop.create_task(serve(server, path, ready=ready.set))

        def run():
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(task)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert ready.wait(5)
        yield server, path
        loop.call_soon_threadsafe(task.cancel)
        thread.join(5)


@pytest.mark.django_db(transaction=True)
def test_runbot_answers_and_stops_cleanly_on_sigterm(settings, tmp_path, telegram_process):
    server, path = telegram_process
    settings.TELEGRAM_OFFLINE = True
    settings.TELEGRAM_OFFLINE_SOCKET = path
    config = BotConfig(
        bot_token=OFFLINE_BOT_TOKEN,
        api_id=1,
        api_hash="0" * 32,
        admin_ids=frozenset(),
        storage_channel_id=None,
        session_dir=tmp_path,
    )
    remote = RemoteTelegram(path)

    listening = []

    async def scenario():
        ready = asyncio.Event()

        async def alice_writes():
            """Once runbot says it listens, Alice writes; once it has answered her, SIGTERM."""
            await ready.wait()
            remote.user_sends(TgUser(id=1001, first_name="Alice"), "/start")
            while not [e for e in server.events if e.chat_id == 1001]:  # the reply, sent from a handler thread
                await asyncio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)

        alice = asyncio.create_task(alice_writes())
        await Command().serve(config, threads=2, ready=lambda username: (listening.append(username), ready.set()))
        await alice

    asyncio.run(asyncio.wait_for(scenario(), timeout=120))  # bounds a failure only
    remote.close()

    assert listening == ["CourierBot"]

    (reply,) = [e for e in server.events if e.chat_id == 1001]
    assert reply.text.startswith("Hello Alice!")
    assert TelegramUser.objects.get(telegram_id=1001).access_hash == server.users[1001].access_hash
    assert BotSettings.load().bot_username == "CourierBot"
    assert server.endpoints == []  # runbot disconnected when it stopped


@pytest.mark.django_db
def test_runbot_records_its_username_when_the_cached_settings_row_is_gone():
    """A database emptied or restored while the cache kept the settings row: runbot still starts
    (it died on an update that affected no row)."""
    from botapp.models import BotSettings
    from botapp.services.files import bot_username_record

    BotSettings.load().save()
    BotSettings.load()  # cached
    BotSettings.objects.all().delete()  # behind the cache's back
    assert bot_username_record(username="CourierBot") == "CourierBot"
    assert BotSettings.objects.get().bot_username == "CourierBot"
