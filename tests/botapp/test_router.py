"""The conversation as a Telegram user sees it (fake Telegram, real PostgreSQL)."""

import pytest

from botapp.models import BotSettings, TelegramUser
from botapp.telegram.gateway import TgUser
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db


def test_start_registers_the_user_and_welcomes_them(say, alice):
    replies = say(alice, "/start")

    assert [e.action for e in replies] == ["send"]
    assert replies[0].text == "Hello Alice! I deliver files shared through my links."
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.username, user.first_name, user.state) == ("alice", "Alice", "active")


def test_start_payload_is_recorded_for_new_users_only(say, alice):
    say(alice, "/start campaign42")
    say(alice, "/start other")

    assert TelegramUser.objects.get(telegram_id=alice.id).start_payload == "campaign42"
    assert TelegramUser.objects.count() == 1


def test_returning_user_gets_updated_names(say, alice):
    say(alice, "/start")
    say(TgUser(id=alice.id, first_name="Alicia", username="alicia"), "/start")

    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.first_name, user.username) == ("Alicia", "alicia")


def test_welcome_text_comes_from_settings_and_escapes_names(say):
    conf = BotSettings.load()
    conf.welcome_text = "Hi {first_name}, {unknown} stays"
    conf.save()

    replies = say(TgUser(id=7, first_name="<b>Eve</b>"), "/start")

    assert replies[0].text == "Hi &lt;b&gt;Eve&lt;/b&gt;, {unknown} stays"


@pytest.mark.parametrize("command,field", [("/help", "help_text"), ("/about", "about_text"), ("/faq", "faq_text")])
def test_info_commands_answer_with_the_operator_text(say, alice, command, field):
    conf = BotSettings.load()
    setattr(conf, field, f"text for {command}")
    conf.save()

    assert say(alice, command)[0].text == f"text for {command}"


def test_stop_opts_out_and_start_opts_back_in(say, alice):
    say(alice, "/start")
    assert "no more messages" in say(alice, "/stop")[0].text
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
    assert "already stopped" in say(alice, "/stop")[0].text

    say(alice, "/start")
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


def test_stats_is_for_admins_only(say, alice):
    say(alice, "/start")
    assert "did not understand" in say(alice, "/stats")[0].text

    text = say(TgUser(id=ADMIN, first_name="Op"), "/stats")[0].text
    assert "<b>Users</b>: 2 (new today: 2)" in text
    assert "Active: 2" in text


def test_unknown_text_gets_a_hint(say, alice):
    assert say(alice, "what is this")[0].text.startswith("I did not understand")
    assert say(alice, "/nonsense")[0].text.startswith("I did not understand")


def test_command_addressed_to_the_bot_by_name(say, alice):
    assert say(alice, "/start@CourierBot")[0].text.startswith("Hello Alice")


def test_a_user_who_blocked_the_bot_is_marked_blocked(fake, router, say, alice):
    say(alice, "/start")
    incoming = fake.user_sends(alice, "/help")
    fake.block(alice.id)  # blocks right after writing: the reply fails

    router.handle_message(incoming)

    assert TelegramUser.objects.get(telegram_id=alice.id).state == "blocked"
    say(alice, "/help")  # writing again unblocks
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


def test_an_unexpected_error_gets_an_apology_not_silence(fake, router, alice, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr("botapp.telegram.router.BotSettings.load", boom)
    router.handle_message(fake.user_sends(alice, "/start"))

    assert fake.events[-1].text.startswith("Sorry, something went wrong")


def test_close_button_deletes_the_message(fake, router, alice):
    from botapp.telegram.gateway import Button

    sent = fake.send_text(alice.id, "closable", buttons=[[Button("Close", callback_data="close")]])
    msg = fake.message(alice.id, sent.message_id)

    router.handle_callback(fake.callback_query(alice, msg, "close"))

    assert fake.message(alice.id, sent.message_id).deleted


def test_stale_callback_is_answered(fake, router, alice):
    sent = fake.send_text(alice.id, "old")
    router.handle_callback(fake.callback_query(alice, fake.message(alice.id, sent.message_id), "gone:1"))

    assert fake.callback_answers[-1][1] == "This button is no longer available."


def test_block_updates_keep_a_stop_choice(say, alice, router):
    say(alice, "/start")
    say(alice, "/stop")
    router.handle_bot_stopped(user_id=alice.id, stopped=True)
    router.handle_bot_stopped(user_id=alice.id, stopped=False)
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
