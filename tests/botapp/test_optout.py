"""The opt-out button (Bot settings): under every broadcast and sequence step; a tap asks to
confirm, "Yes, stop" does what /stop does, "Keep them" changes nothing, forged data does nothing."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import SequenceMessage, TelegramUser
from botapp.services.broadcasts import broadcast_start
from botapp.services.optout import ASK, CONFIRM_TEXT, KEEP_TEXT, KEPT
from botapp.services.users import STOPPED_TEXT
from botapp.telegram.gateway import TgUser
from inmemory_telegram.state import buttons_of
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, SequenceFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored

BOB = TgUser(id=2002, first_name="Bob")
GONE = "This button is no longer available."


@pytest.fixture
def optout(conf):
    conf.optout_enabled = True
    conf.optout_label = "🔕 Unsubscribe"
    conf.save()
    return conf


@pytest.fixture
def drip():
    sequence = SequenceFactory(name="Drip")
    sequence.steps.create(delay_seconds=60, text="Day one", buttons="Shop | https://shop.example")
    sequence.steps.create(delay_seconds=3600, text="Day two")
    return sequence


def labels(message):
    return [[b.text for b in row] for row in buttons_of(message.reply_markup)]


def step_one(chat, user, gateway):
    chat(user, "/start")
    clock.clock_advance(timedelta(minutes=2))
    job_run("send_sequence_messages", trigger="test", gateway=gateway)


def answers(events):
    return [e.text for e in events if e.action == "answer"]


def test_the_opt_out_button_is_under_a_broadcast_and_a_step(chat, alice, telegram, gateway, optout, drip):
    step_one(chat, alice, gateway)
    broadcast_start(broadcast=BroadcastFactory(text="News", buttons="Read | https://news.example"))
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    *_, step, news = telegram.bot_messages(alice.id)
    assert (step.text, labels(step)) == ("Day one", [["Shop"], ["🔕 Unsubscribe"]])
    assert (news.text, labels(news)) == ("News", [["Read"], ["🔕 Unsubscribe"]])


def test_confirming_the_opt_out_does_what_stop_does(chat, alice, telegram, gateway, optout, drip):
    step_one(chat, alice, gateway)
    step, _ = telegram.find_button(alice.id, "🔕 Unsubscribe")

    assert answers(chat.tap(alice, "🔕 Unsubscribe")) == [ASK]
    assert labels(telegram.message(alice.id, step.id)) == [["Shop"], [CONFIRM_TEXT, KEEP_TEXT]]
    events = chat.tap(alice, CONFIRM_TEXT)

    assert [e.text for e in events if e.action == "send"] == [STOPPED_TEXT]
    assert labels(telegram.message(alice.id, step.id)) == [["Shop"]]
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
    assert SequenceMessage.objects.get(step__delay_seconds=3600).error == "cancelled by /stop"
    assert broadcast_start(broadcast=BroadcastFactory(text="Next news")) == 0  # not an active user any more
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert "Next news" not in [m.text for m in telegram.bot_messages(alice.id)]


def test_keeping_them_changes_nothing(chat, alice, telegram, gateway, optout, drip):
    step_one(chat, alice, gateway)
    step, _ = telegram.find_button(alice.id, "🔕 Unsubscribe")
    chat.tap(alice, "🔕 Unsubscribe")

    assert answers(chat.tap(alice, KEEP_TEXT)) == [KEPT]

    assert labels(telegram.message(alice.id, step.id)) == [["Shop"], ["🔕 Unsubscribe"]]
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"
    assert SequenceMessage.objects.get(step__delay_seconds=3600).status == "pending"


def test_a_forged_or_borrowed_opt_out_does_nothing(chat, alice, telegram, gateway, bot, optout, drip):
    step_one(chat, alice, gateway)
    step_one(chat, BOB, gateway)
    chat.tap(BOB, "🔕 Unsubscribe")
    _, bobs_confirm = telegram.find_button(BOB.id, CONFIRM_TEXT)
    step, _ = telegram.find_button(alice.id, "🔕 Unsubscribe")

    for data in ("tap:x.y:AAAAAAAAAAAAAAAAAAAAAA", bobs_confirm.callback_data, "tap:x.z:abc"):
        before = len(telegram.events)
        telegram.tap(alice, step.id, data)
        bot.pump.process()
        assert [(e.action, e.text) for e in telegram.events[before:]] == [("answer", GONE)]
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"
    assert SequenceMessage.objects.get(user__telegram_id=alice.id, step__delay_seconds=3600).status == "pending"


def test_without_the_setting_there_is_no_opt_out_button(chat, alice, telegram, gateway, conf, drip):
    step_one(chat, alice, gateway)
    assert labels(telegram.bot_messages(alice.id)[-1]) == [["Shop"]]
