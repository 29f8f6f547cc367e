"""runbot's UpdatePump as production runs it: kurigram's dispatcher hands parsed updates to the
router on a thread pool (hence `transactional_db`: handler threads have their own connections)."""

import threading
import time

import pytest

from botapp.bot.router import Router
from botapp.models import TelegramUser
from botapp.telegram.gateway import Button, TgUser
from botapp.telegram.updates import UpdatePump
from offline.telegram.clients import offline_gateway
from offline.telegram.server import TelegramServer

ALICE = TgUser(id=1001, first_name="Alice", username="alice", language_code="en")


@pytest.fixture
def running(transactional_db):
    from botapp.services.users import user_access_hash

    telegram = TelegramServer(enforce_rates=False)
    gateway = offline_gateway(telegram, name="bot", no_updates=False, start=False, peers=user_access_hash)
    pump = UpdatePump(Router(gateway, admin_ids=frozenset()), threads=2)
    gateway.start(before_start=pump.register)
    yield telegram, gateway, pump
    gateway.stop()


def wait_for(condition, timeout=60.0):  # bounds a failure only
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        threading.Event().wait(0.02)
    return False


def test_start_through_the_real_dispatcher_and_pool(running):
    telegram, _, _ = running
    telegram.user_sends(ALICE, "/start ref42")

    assert wait_for(lambda: telegram.bot_messages(ALICE.id))
    assert telegram.bot_messages(ALICE.id)[0].text.startswith("Hello Alice!")  # ref42 is a campaign tag, no file
    user = TelegramUser.objects.get(telegram_id=ALICE.id)
    assert (user.username, user.language_code, user.start_payload) == ("alice", "en", "ref42")
    assert user.access_hash == telegram.users[ALICE.id].access_hash  # kept for workers


def test_callback_through_the_real_dispatcher(running):
    telegram, gateway, _ = running
    telegram.user_sends(ALICE, "/help")
    assert wait_for(lambda: telegram.bot_messages(ALICE.id))
    closable = gateway.send_text(ALICE.id, "closable", buttons=[[Button("Close", callback_data="close")]])
    start = len(telegram.calls)

    telegram.tap(ALICE, closable.message_id, "close")

    assert wait_for(lambda: telegram.message(ALICE.id, closable.message_id).deleted)
    assert wait_for(lambda: "messages.SetBotCallbackAnswer" in telegram.methods_called(start))
    assert telegram.methods_called(start) == ["messages.DeleteMessages", "messages.SetBotCallbackAnswer"]


def test_draining_refuses_new_updates(running):
    telegram, gateway, pump = running
    gateway._run(pump.drain())
    telegram.user_sends(ALICE, "/help")
    threading.Event().wait(0.3)
    assert telegram.bot_messages(ALICE.id) == []


def test_blocking_and_unblocking_the_bot_update_the_user_at_once(running):
    telegram, _, _ = running
    telegram.user_sends(ALICE, "/help")
    assert wait_for(lambda: TelegramUser.objects.filter(telegram_id=ALICE.id).exists())

    telegram.block(ALICE.id)
    assert wait_for(lambda: TelegramUser.objects.get(telegram_id=ALICE.id).state == "blocked")
    telegram.unblock(ALICE.id)
    assert wait_for(lambda: TelegramUser.objects.get(telegram_id=ALICE.id).state == "active")
