"""Every update handled once (services/updates.py, botapp/telegram/updates.py): after a restart
runbot asks Telegram for what came after its stored position; what it had handled already comes
again and is recognised, what was sent while it was down is answered, and an admin command is
never run twice, even one it was killed in the middle of."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.bot.router import INTERRUPTED, Router
from botapp.models import AdminCommand, HandledUpdate, PremiumPlan, UpdatePosition
from botapp.services.updates import (
    HANDLED_RETENTION,
    Kind,
    UpdatePositions,
    handled_updates_prune,
    update_claim,
    update_done,
    update_run,
)
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import TgUser
from botapp.telegram.position import PositionState
from offline.telegram.clients import MemoryPositions, OfflineBot
from tests.conftest import ADMIN, STORAGE

pytestmark = pytest.mark.django_db

BOSS = TgUser(id=ADMIN, first_name="Boss")


@pytest.fixture
def restart(telegram, shortener):
    """restart() starts runbot (the one before must have stopped): one position store for all."""
    positions = MemoryPositions()
    bots = []

    def start() -> OfflineBot:
        bot = OfflineBot(
            telegram,
            lambda gw: Router(gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener),
            peers=user_access_hash,
            positions=positions,
        )
        bots.append(bot)
        return bot

    start.positions = positions
    yield start
    for bot in bots:
        bot.stop()


def texts(telegram, user) -> list[str]:
    return [m.text for m in telegram.bot_messages(user.id)]


def test_messages_handled_before_a_crash_come_again_and_are_not_answered_twice(telegram, restart, alice):
    bot = restart()
    telegram.user_sends(alice, "/help")
    bot.pump.process()
    bot.position_store()
    before_crash = restart.positions.state  # what runbot had stored before its last second of work
    telegram.user_sends(alice, "/about")
    bot.pump.process()
    bot.stop()
    restart.positions.save(before_crash)  # killed before the position moved past /about
    bob = TgUser(id=1002, first_name="Bob")

    telegram.user_sends(bob, "/help")  # while runbot is down
    bot = restart()
    bot.pump.process(expect=2)  # /about again (fetched from the old position), and Bob's /help

    assert len(texts(telegram, alice)) == 2  # /help and /about, once each
    assert len(texts(telegram, bob)) == 1
    about = HandledUpdate.objects.get(chat_id=alice.id, update_id__gt=1)
    assert about.attempts == 2 and about.done_at is not None


def test_an_admin_command_that_comes_again_is_not_run_again(telegram, restart, alice):
    bot = restart()
    telegram.user_sends(alice, "/help")
    bot.pump.process()
    bot.position_store()
    before = restart.positions.state
    telegram.user_sends(BOSS, f"/addpremium {alice.id} 30d")
    bot.pump.process()
    bot.stop()
    restart.positions.save(before)  # the kill came before the position was stored

    restart().pump.process()

    (plan,) = PremiumPlan.objects.all()
    assert plan.ends_at - plan.starts_at == timedelta(days=30)  # not extended a second month
    assert AdminCommand.objects.filter(command="addpremium").count() == 1
    assert len([t for t in texts(telegram, alice) if t.startswith("⭐")]) == 1  # told once


def test_a_command_runbot_died_in_the_middle_of_is_not_run_again_and_the_admin_is_told(telegram, restart, alice):
    bot = restart()
    telegram.user_sends(alice, "/help")
    bot.pump.process()
    bot.stop()
    # runbot claimed the command and died before it was done: Telegram hands it back at the next start.
    message_id = telegram.user_sends(BOSS, f"/addpremium {alice.id} 30d")
    update_claim(kind=Kind.MESSAGE, chat_id=ADMIN, update_id=message_id, once=True, run="dead")

    restart().pump.process()

    assert not PremiumPlan.objects.exists()
    assert texts(telegram, BOSS)[-1] == INTERRUPTED.format(text=f"/addpremium {alice.id} 30d")
    assert HandledUpdate.objects.get(update_id=message_id).done_at is not None


def test_a_users_message_runbot_died_in_the_middle_of_is_handled_again(telegram, restart, alice):
    bot = restart()
    bot.stop()
    message_id = telegram.user_sends(alice, "/help")
    update_claim(kind=Kind.MESSAGE, chat_id=alice.id, update_id=message_id, once=False, run="dead")

    restart().pump.process()

    assert len(texts(telegram, alice)) == 1  # handled again: answered


def test_a_claim_knows_new_repeated_in_flight_and_abandoned_updates():
    run, other = update_run(), update_run()
    new = update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=7, once=False, run=run)
    assert (new.handle, new.again, new.attempts) == (True, False, 1)
    in_flight = update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=7, once=False, run=run)
    assert not in_flight.handle  # this run is handling it now
    taken_over = update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=7, once=False, run=other)
    assert (taken_over.handle, taken_over.again, taken_over.attempts) == (True, True, 3)
    update_done(claim=new)  # the first claim's token no longer holds it: its "done" changes nothing
    assert HandledUpdate.objects.get().done_at is None
    update_done(claim=taken_over)
    assert not update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=7, once=False, run=update_run()).handle

    first = update_claim(kind=Kind.MESSAGE, chat_id=ADMIN, update_id=8, once=True, run=run)
    abandoned = update_claim(kind=Kind.MESSAGE, chat_id=ADMIN, update_id=8, once=True, run=other)
    assert first.handle and (abandoned.handle, abandoned.interrupted) == (False, True)
    # The same ids in another kind are another update.
    assert update_claim(kind=Kind.CALLBACK, chat_id=ADMIN, update_id=8, once=True, run=run).handle


def test_the_stored_position_comes_back_as_it_was_written():
    positions = UpdatePositions()
    assert positions.load() is None
    state = PositionState(pts=120, qts=7, date=1_700_000_000, seq=0, channels={STORAGE: 55})
    positions.save(state)
    positions.save(PositionState(pts=130, qts=7, date=1_700_000_100, channels={STORAGE: 56}))
    assert positions.load() == PositionState(pts=130, qts=7, date=1_700_000_100, channels={STORAGE: 56})
    assert UpdatePosition.objects.count() == 2


def test_claims_older_than_a_week_are_pruned():
    old = update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=1, once=False, run="r")
    HandledUpdate.objects.filter(pk=old.pk).update(claimed_at=clock.now() - HANDLED_RETENTION - timedelta(minutes=1))
    update_claim(kind=Kind.MESSAGE, chat_id=1001, update_id=2, once=False, run="r")
    assert handled_updates_prune() == 1
    assert list(HandledUpdate.objects.values_list("update_id", flat=True)) == [2]
