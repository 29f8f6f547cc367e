"""Real pyrogram updates, parsed by kurigram's own dispatcher, reach the router and get answers.

The client is a real `pyrogram.Client`; raw TL updates go into its dispatcher queue as if they came
from Telegram, and its replies go to a recorder. Handler threads use their own database
connections, hence `transactional_db`.
"""

import asyncio
import threading

import pytest
from pyrogram import raw

from botapp.models import TelegramUser
from botapp.telegram.handlers import UpdatePump
from botapp.telegram.pyrogram_gateway import PyrogramGateway
from botapp.telegram.router import Router
from tests.botapp.telegram.test_pyrogram_gateway import RecordingClient, raw_message

USER = 1001


class UpdatesClient(RecordingClient):
    def __init__(self):
        super().__init__()
        self.no_updates = False
        self.skip_updates = True


def raw_user():
    return raw.types.User(id=USER, first_name="Alice", username="alice", lang_code="en", access_hash=5)


def new_message(msg_id, text):
    message = raw.types.Message(
        id=msg_id,
        peer_id=raw.types.PeerUser(user_id=USER),
        from_id=raw.types.PeerUser(user_id=USER),
        date=0,
        message=text,
        restriction_reason=[],
        entities=[raw.types.MessageEntityBotCommand(offset=0, length=len(text.split()[0]))] if text.startswith("/") else [],
    )
    return (raw.types.UpdateNewMessage(message=message, pts=1, pts_count=1), {USER: raw_user()}, {})


def new_callback(data: bytes):
    update = raw.types.UpdateBotCallbackQuery(
        query_id=99, user_id=USER, peer=raw.types.PeerUser(user_id=USER), msg_id=7, chat_instance=1, data=data
    )
    return (update, {USER: raw_user()}, {})


@pytest.fixture
def running():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    client = UpdatesClient()
    gateway = PyrogramGateway(client, loop, username="CourierBot")
    pump = UpdatePump(Router(gateway, admin_ids=frozenset()), threads=2)
    pump.register(client)
    asyncio.run_coroutine_threadsafe(client.dispatcher.start(), loop).result(5)
    yield client, pump, loop
    asyncio.run_coroutine_threadsafe(pump.drain(), loop).result(10)
    asyncio.run_coroutine_threadsafe(client.dispatcher.stop(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def feed_and_wait(client, loop, packet, *, expect_requests):
    loop.call_soon_threadsafe(client.dispatcher.updates_queue.put_nowait, packet)
    for _ in range(200):
        if len(client.requests) >= expect_requests:
            return
        threading.Event().wait(0.02)
    raise AssertionError(f"got {client.names()}")


def test_start_through_the_real_dispatcher(running, transactional_db):
    client, pump, loop = running
    feed_and_wait(client, loop, new_message(1, "/start ref42"), expect_requests=1)

    (request,) = client.requests
    assert isinstance(request, raw.functions.messages.SendMessage)
    assert request.message == "This link does not exist or its files were removed."  # ref42 is no file
    user = TelegramUser.objects.get(telegram_id=USER)
    assert (user.username, user.language_code, user.start_payload) == ("alice", "en", "ref42")


def test_callback_through_the_real_dispatcher(running, transactional_db):
    client, pump, loop = running
    # Parsing a callback fetches the message it belongs to.
    client.answers["GetMessages"] = raw.types.messages.Messages(
        messages=[raw_message(7, peer=raw.types.PeerUser(user_id=USER), text="closable")],
        chats=[],
        users=[raw_user(), raw.types.User(id=42, first_name="Courier", bot=True)],
        topics=[],
    )
    feed_and_wait(client, loop, new_callback(b"close"), expect_requests=3)

    assert client.names() == ["GetMessages", "DeleteMessages", "SetBotCallbackAnswer"]
    assert client.requests[1].id == [7]


def test_draining_refuses_new_updates(running, transactional_db):
    client, pump, loop = running
    asyncio.run_coroutine_threadsafe(pump.drain(), loop).result(10)
    loop.call_soon_threadsafe(client.dispatcher.updates_queue.put_nowait, new_message(2, "/help"))
    threading.Event().wait(0.3)
    assert client.requests == []


def bot_stopped(stopped: bool):
    return (raw.types.UpdateBotStopped(user_id=USER, date=0, stopped=stopped, qts=1), {USER: raw_user()}, {})


def test_blocking_and_unblocking_the_bot_update_the_user_at_once(running, transactional_db):
    client, pump, loop = running
    TelegramUser.objects.create(telegram_id=USER, first_name="Alice")

    def state_after(packet, expected):
        loop.call_soon_threadsafe(client.dispatcher.updates_queue.put_nowait, packet)
        for _ in range(200):
            if TelegramUser.objects.get(telegram_id=USER).state == expected:
                return True
            threading.Event().wait(0.02)
        return False

    assert state_after(bot_stopped(True), "blocked")
    assert state_after(bot_stopped(False), "active")
    assert client.requests == []  # nothing is sent to a user for this
