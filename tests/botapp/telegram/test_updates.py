"""runbot's UpdatePump as production runs it: kurigram's dispatcher hands parsed updates to the
router on a thread pool (hence `transactional_db`: handler threads have their own connections)."""

import threading
import time

import pytest

from botapp import clock
from botapp.bot.router import Router
from botapp.models import TelegramUser
from botapp.telegram.gateway import Button, TgUser
from botapp.telegram.updates import UpdatePump
from inmemory_telegram.server import TelegramServer
from offline.telegram.clients import offline_gateway

ALICE = TgUser(id=1001, first_name="Alice", username="alice", language_code="en")


@pytest.fixture
def running(transactional_db):
    from botapp.services.users import user_access_hash

    telegram = TelegramServer(now=clock.now, enforce_rates=False)
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


# --- runbot's place in the update stream, stored as it handles updates ------------------------------


def keeping_start(telegram, router_class=Router):
    """runbot's pump with its position in PostgreSQL (services/updates.py), started."""
    from botapp.services.updates import UpdatePositions
    from botapp.services.users import user_access_hash

    gateway = offline_gateway(telegram, name="bot", no_updates=False, start=False, peers=user_access_hash)
    pump = UpdatePump(router_class(gateway, admin_ids=frozenset()), threads=2, positions=UpdatePositions())
    gateway.start(before_start=pump.register, after_start=pump.resume)
    return gateway, pump


def stored_pts() -> int:
    from botapp.models import UpdatePosition

    row = UpdatePosition.objects.filter(box=UpdatePosition.ACCOUNT).first()
    return row.pts if row is not None else -1


def test_the_position_is_stored_as_updates_are_handled_not_only_at_a_stop(transactional_db):
    telegram = TelegramServer(now=clock.now, enforce_rates=False)
    gateway, pump = keeping_start(telegram)
    try:
        users = [TgUser(id=2001 + i, first_name=f"U{i}") for i in range(5)]
        for user in users:
            telegram.user_sends(user, "/help")
        last = telegram.pts  # the pts of the last user's message (runbot has not answered yet)
        assert wait_for(lambda: all(telegram.bot_messages(u.id) for u in users))
        # Without a stop: the stored position passes the last message within about a second (the
        # replies' own numbers are holes closed after HOLE_WAIT).
        assert wait_for(lambda: stored_pts() >= last)
    finally:
        gateway.stop(after_stop=pump.close)


def test_an_update_still_being_handled_holds_the_stored_position_back(transactional_db):
    release = threading.Event()

    class Slow(Router):
        def handle_message(self, msg):
            if msg.text == "/slow":
                release.wait(60)
            super().handle_message(msg)

    telegram = TelegramServer(now=clock.now, enforce_rates=False)
    gateway, pump = keeping_start(telegram, Slow)
    try:
        telegram.user_sends(ALICE, "/slow")
        slow = telegram.pts
        bob = TgUser(id=1002, first_name="Bob")
        telegram.user_sends(bob, "/help")
        assert wait_for(lambda: telegram.bot_messages(bob.id))
        from botapp.models import UpdatePosition

        answered = telegram.bot_messages(bob.id)[0].date
        # A write after Bob was answered (the position moved: it is written within a second).
        assert wait_for(lambda: UpdatePosition.objects.filter(box=0, updated_at__gt=answered).exists())
        assert stored_pts() == slow - 1  # a restart now would ask for /slow again
        release.set()
        assert wait_for(lambda: telegram.bot_messages(ALICE.id))
        assert wait_for(lambda: stored_pts() >= slow + 1)
    finally:
        release.set()
        gateway.stop(after_stop=pump.close)


def crashed_after_alices_help(telegram) -> TgUser:
    """runbot answers Alice's /help and stores its position past it, then its position is set back
    before it, as if runbot had been killed before storing it; Bob writes /help while runbot is
    down (a user it never met). Returns Bob."""
    from botapp.models import UpdatePosition

    gateway, pump = keeping_start(telegram)
    try:
        start = telegram.pts
        telegram.user_sends(ALICE, "/help")
        assert wait_for(lambda: telegram.bot_messages(ALICE.id))
        assert wait_for(lambda: stored_pts() > start)
    finally:
        gateway.stop(after_stop=pump.close)
    UpdatePosition.objects.filter(box=0).update(pts=start)
    bob = TgUser(id=1002, first_name="Bob")
    telegram.user_sends(bob, "/help")
    return bob


def test_after_a_crash_what_came_meanwhile_is_answered_and_what_was_handled_is_not_again(transactional_db):
    from botapp.models import HandledUpdate

    telegram = TelegramServer(now=clock.now, enforce_rates=False)
    bob = crashed_after_alices_help(telegram)
    gateway, pump = keeping_start(telegram)
    try:
        assert wait_for(lambda: telegram.bot_messages(bob.id))
        assert wait_for(lambda: HandledUpdate.objects.filter(chat_id=ALICE.id, attempts=2).exists())
        # Alice's /help again, the bot's answer to it (its own message: Telegram hands it back too,
        # and runbot's handlers take incoming messages only), and Bob's /help.
        assert pump.recovered == 3
    finally:
        gateway.stop(after_stop=pump.close)
    assert len(telegram.bot_messages(ALICE.id)) == 1
    assert len(telegram.bot_messages(bob.id)) == 1


def test_a_position_that_is_not_this_bots_is_forgotten_with_its_claims(transactional_db):
    """BOT_TOKEN now names another bot, or Telegram's numbers are below the stored ones (a test
    server started afresh): asking from there would fetch nothing, and the old claims would take
    new messages (numbered from 1 again) for repeats."""
    from botapp.models import HandledUpdate, UpdatePosition
    from botapp.services.updates import Kind, UpdatePositions, update_claim
    from botapp.telegram.position import PositionState

    telegram = TelegramServer(now=clock.now, enforce_rates=False)
    UpdatePositions().save(PositionState(pts=5000, qts=40, date=0, bot_id=telegram.bot.id))
    update_claim(kind=Kind.MESSAGE, chat_id=ALICE.id, update_id=1, once=False, run="old")  # the next message's ids
    gateway, pump = keeping_start(telegram)
    try:
        telegram.user_sends(ALICE, "/help")
        assert wait_for(lambda: telegram.bot_messages(ALICE.id))  # not taken for a repeat
        assert wait_for(lambda: 0 < stored_pts() <= telegram.pts)
        assert HandledUpdate.objects.get(chat_id=ALICE.id).attempts == 1
    finally:
        gateway.stop(after_stop=pump.close)

    UpdatePosition.objects.update(bot_id=telegram.bot.id + 1)  # another bot's
    gateway, pump = keeping_start(telegram)
    gateway.stop(after_stop=pump.close)
    assert not HandledUpdate.objects.exists()
    assert UpdatePosition.objects.get(box=0).bot_id == telegram.bot.id


def test_a_message_handled_before_a_crash_does_not_count_again_toward_fair_use(transactional_db, prefix, monkeypatch):
    """Without the check, Alice's /help fetched again after the restart counted a second time in
    her one message a minute, and she was told she was sending too fast."""
    from botapp.models import BotSettings, HandledUpdate
    from botapp.telegram import quotas as quotas_module

    monkeypatch.setattr(quotas_module.quotas(), "prefix", prefix)
    conf = BotSettings.load()
    conf.fair_use_enabled, conf.fair_use_commands_per_minute = True, 1
    conf.save()
    telegram = TelegramServer(now=clock.now, enforce_rates=False)
    bob = crashed_after_alices_help(telegram)  # Bob's /help: new, counted, and answered
    gateway, pump = keeping_start(telegram)
    try:
        assert wait_for(lambda: telegram.bot_messages(bob.id))
        # Her /help again: recognised as handled (a second claim attempt), or refused and told.
        assert wait_for(
            lambda: (
                HandledUpdate.objects.filter(chat_id=ALICE.id, attempts=2).exists() or len(telegram.bot_messages(ALICE.id)) > 1
            )
        )
    finally:
        gateway.stop(after_stop=pump.close)
    told = [m.text for m in telegram.bot_messages(ALICE.id)]
    assert len(told) == 1 and "faster" not in told[0], told  # only the answer to her /help
    assert not pump.replayable  # every private message fetched was dispatched
