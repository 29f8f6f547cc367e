"""The conversation as a Telegram user sees it (runbot on the in-memory Telegram, real PostgreSQL)."""

import html

import pytest
from pyrogram import raw

from botapp.models import BotSettings, TelegramUser
from botapp.telegram.gateway import TgUser
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db

TAGS = {
    raw.types.MessageEntityBold: "b",
    raw.types.MessageEntityItalic: "i",
    raw.types.MessageEntityUnderline: "u",
    raw.types.MessageEntityStrike: "s",
    raw.types.MessageEntityCode: "code",
    raw.types.MessageEntityPre: "pre",
}


def html_of(telegram, event):
    """The message an event made, as the HTML the bot sent: Telegram keeps plain text and entities
    (kurigram parsed the HTML), so tags and escapes are put back from the entities here."""
    msg = telegram.message(event.chat_id, event.message_ids[0])
    units = msg.text.encode("utf-16-le")  # entity offsets count UTF-16 code units

    def plain(start, end):
        return html.escape(units[2 * start : 2 * end].decode("utf-16-le"), quote=False)

    marks = []  # (position, closing first, nesting order, tag)
    for e in msg.entities:
        if isinstance(e, raw.types.MessageEntityTextUrl):
            opening, closing = f'<a href="{html.escape(e.url)}">', "</a>"
        else:
            tag = TAGS[type(e)]  # another kind of entity: teach this helper about it
            opening, closing = f"<{tag}>", f"</{tag}>"
        marks.append((e.offset, 1, -e.length, opening))
        marks.append((e.offset + e.length, 0, e.offset, closing))
    out, at = "", 0
    for position, _, _, tag in sorted(marks):
        out += plain(at, position) + tag
        at = position
    return out + plain(at, len(units) // 2)


def test_start_registers_the_user_and_welcomes_them(chat, alice):
    replies = chat(alice, "/start")

    assert [e.action for e in replies] == ["send"]
    assert replies[0].text == "Hello Alice! I deliver files shared through my links."
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.username, user.first_name, user.state) == ("alice", "Alice", "active")


def test_the_first_start_payload_is_kept_and_the_latest_recorded(chat, alice):
    chat(alice, "/start campaign42")
    chat(alice, "/start other")

    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.start_payload, user.last_start_payload) == ("campaign42", "other")
    assert TelegramUser.objects.count() == 1


def test_returning_user_gets_updated_names(chat, alice):
    chat(alice, "/start")
    chat(TgUser(id=alice.id, first_name="Alicia", username="alicia"), "/start")

    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.first_name, user.username) == ("Alicia", "alicia")


def test_welcome_text_comes_from_settings_and_escapes_names(chat, telegram):
    conf = BotSettings.load()
    conf.welcome_text = "Hi {first_name}, {unknown} stays"
    conf.save()

    replies = chat(TgUser(id=7, first_name="<b>Eve</b>"), "/start")

    assert html_of(telegram, replies[0]) == "Hi &lt;b&gt;Eve&lt;/b&gt;, {unknown} stays"


@pytest.mark.parametrize("command,field", [("/help", "help_text"), ("/about", "about_text"), ("/faq", "faq_text")])
def test_info_commands_answer_with_the_operator_text(chat, alice, command, field):
    conf = BotSettings.load()
    setattr(conf, field, f"text for {command}")
    conf.save()

    assert chat(alice, command)[0].text == f"text for {command}"


@pytest.mark.parametrize("command", ["/about", "/faq"])
def test_about_and_faq_carry_the_join_channel_button_of_the_channel_link(chat, alice, command):
    """The drip bot's /faq and /about had a "Join Channel" button to CHANNEL_URL (shared/seeds/002)."""
    assert chat(alice, command)[0].buttons == ()  # no channel link: no button, as before
    conf = BotSettings.load()
    conf.channel_url = "https://t.me/yourchannel"
    conf.save()

    (reply,) = chat(alice, command)
    assert [[(b.text, b.url) for b in row] for row in reply.buttons] == [[("Join Channel", "https://t.me/yourchannel")]]
    assert chat(alice, "/help")[0].buttons == ()


def test_a_channel_link_telegram_would_refuse_is_a_form_error(admin_client, plain_http):
    from django.urls import reverse

    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = admin_client.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    errors = admin_client.post(url, data | {"channel_url": "t.me/yourchannel"}).context["adminform"].form.errors
    assert errors["channel_url"] == [
        "Give a link Telegram accepts on a button: https://t.me/yourchannel (or http(s)://…, tg://…)."
    ]
    assert admin_client.post(url, data | {"channel_url": "https://t.me/yourchannel"}).status_code == 302
    assert BotSettings.load().channel_url == "https://t.me/yourchannel"


def test_stop_opts_out_and_start_opts_back_in(chat, alice):
    chat(alice, "/start")
    assert "no more messages" in chat(alice, "/stop")[0].text
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
    assert "already stopped" in chat(alice, "/stop")[0].text

    chat(alice, "/start")
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


def test_stats_is_for_admins_only(chat, alice, telegram):
    chat(alice, "/start")
    assert "did not understand" in chat(alice, "/stats")[0].text

    text = html_of(telegram, chat(TgUser(id=ADMIN, first_name="Op"), "/stats")[0])
    assert "<b>Users</b>: 2 (new today: 2)" in text
    assert "Active: 2" in text


def test_unknown_text_gets_a_hint(chat, alice):
    assert chat(alice, "what is this")[0].text.startswith("I did not understand")
    assert chat(alice, "/nonsense")[0].text.startswith("I did not understand")


def test_command_addressed_to_the_bot_by_name(chat, alice):
    assert chat(alice, "/start@CourierBot")[0].text.startswith("Hello Alice")


def test_a_user_who_blocked_the_bot_is_marked_blocked(telegram, bot, chat, alice):
    chat(alice, "/start")
    since = len(telegram.calls)
    telegram.user_sends(alice, "/help")
    telegram.block(alice.id)  # blocks right after writing: the reply fails (and Telegram says so, UpdateBotStopped)

    bot.pump.process(expect=2)

    # The reply was tried once and refused: the router knew the error (no apology tried after it).
    assert telegram.count("messages.SendMessage", chat_id=alice.id, since=since) == 1
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "blocked"
    telegram.user_sends(alice, "/help")  # writing again unblocks
    bot.pump.process(expect=2)  # the unblock (UpdateBotStopped) and the message
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


def test_an_unexpected_error_gets_an_apology_not_silence(telegram, chat, alice, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr("botapp.bot.router.BotSettings.load", boom)
    chat(alice, "/start")

    assert telegram.events[-1].text.startswith("Sorry, something went wrong")


def test_close_button_deletes_the_message(telegram, gateway, bot, chat, alice):
    from botapp.telegram.gateway import Button

    chat(alice, "/start")  # a bot reaches only users who wrote to it
    sent = gateway.send_text(alice.id, "closable", buttons=[[Button("Close", callback_data="close")]])

    telegram.tap(alice, sent.message_id, "close")
    bot.pump.process()

    assert telegram.message(alice.id, sent.message_id).deleted


def test_stale_callback_is_answered(telegram, gateway, bot, chat, alice):
    chat(alice, "/start")
    sent = gateway.send_text(alice.id, "old")
    before = len(telegram.events)

    telegram.tap(alice, sent.message_id, "gone:1")
    bot.pump.process()

    assert [(e.action, e.chat_id, e.text) for e in telegram.events[before:]] == [
        ("answer", alice.id, "This button is no longer available.")
    ]


def test_block_updates_keep_a_stop_choice(telegram, bot, chat, alice):
    chat(alice, "/start")
    chat(alice, "/stop")
    telegram.block(alice.id)  # Telegram tells runbot: UpdateBotStopped(stopped=True)
    bot.pump.process()
    telegram.unblock(alice.id)  # ...and stopped=False
    bot.pump.process()
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
    chat(alice, "/help")  # writing is not /start
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "stopped"
    chat(alice, "/start")  # only /start turns messages back on
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


@pytest.mark.parametrize("name,text", [("Ann\x00ie", "/start"), ("Ann", "/start pay\x00load"), ("Ann", "hi\x00")])
def test_nul_and_lone_surrogates_from_telegram_never_break_a_user(chat, conf, name, text):
    from botapp.bot.router import SORRY

    user = TgUser(id=4343, first_name=name)
    for _ in range(2):  # the first message, and every one after it
        events = chat(user, text)
        assert events and all(e.text != SORRY for e in events)
    assert "\x00" not in TelegramUser.objects.get(telegram_id=4343).first_name


def test_cleaning_drops_nul_and_unpaired_surrogates_only():
    """UTF-8 on the wire cannot carry an unpaired surrogate, but kurigram slices texts by UTF-16
    entity offsets, which can split a pair."""
    from botapp.telegram.updates import clean

    assert clean("a\x00b\ud800c😀") == "abc😀"
    assert clean(None) == ""
