"""`runbot` serving: real pyrogram dispatcher, the shared limiter in Redis, a clean stop on SIGTERM.
Only the network is replaced (the recording client from the gateway tests)."""

import asyncio
import os
import signal

import pytest
from pyrogram import types

from botapp.config import BotConfig
from botapp.management.commands.runbot import Command
from botapp.models import BotSettings, TelegramUser
from tests.botapp.telegram.test_handlers import UpdatesClient, new_message


class ServingClient(UpdatesClient):
    async def start(self):
        self.me = types.User(id=42, is_self=True, is_bot=True, first_name="Courier", username="CourierBot")
        await self.dispatcher.start()
        return self

    async def stop(self, block=True):
        await self.dispatcher.stop()
        self.stopped = True
        return self


@pytest.mark.django_db(transaction=True)
def test_runbot_answers_and_stops_cleanly_on_sigterm(monkeypatch, tmp_path):
    client = ServingClient()
    monkeypatch.setattr("botapp.telegram.pyrogram_gateway.client_build", lambda **kwargs: client)
    config = BotConfig(
        bot_token="1:x", api_id=1, api_hash="0" * 32, admin_ids=frozenset(), storage_channel_id=None, session_dir=tmp_path
    )

    async def scenario():
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, lambda: client.dispatcher.updates_queue.put_nowait(new_message(1, "/start")))
        loop.call_later(2.0, os.kill, os.getpid(), signal.SIGTERM)
        await Command().serve(config, threads=2)

    asyncio.run(asyncio.wait_for(scenario(), timeout=20))

    assert client.stopped
    assert client.names() == ["SendMessage"]
    assert client.requests[0].message.startswith("Hello Alice!")
    assert TelegramUser.objects.filter(telegram_id=1001).exists()
    assert BotSettings.load().bot_username == "CourierBot"
