"""/results of a public channel the bot is not in (shared/seeds/002's @wazirforexalerts, which the
drip bot read through a Telethon user session): the operator logs their own account in once
(`manage.py login_user_session`), and runbot reads the channel's history through that session,
never the bot's (Telegram refuses a bot any channel's history)."""

import functools
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from pyrogram import raw

from botapp import clock
from botapp.bot.router import Router
from botapp.management.commands import login_user_session
from botapp.models import PostsCommand
from botapp.services.doctor import _user_session
from botapp.services.posts_commands import UNAVAILABLE_TEXT
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import BadRequest
from botapp.telegram.user_session import UserHistory, user_client_build, user_session_account
from offline.telegram.clients import API_HASH, API_ID, OfflineBot
from tests.conftest import ADMIN, STORAGE

pytestmark = pytest.mark.django_db

PUBLIC = -1003300000001
USERNAME = "wazirforexalerts"
PHONE = "+91 78470 41321"
OPERATOR = 4242  # the operator's own Telegram account
TITLE = "Latest results"


@pytest.fixture
def sessions(settings, telegram, tmp_path):
    """The sessions folder, with Courier's processes on the in-memory Telegram (TELEGRAM_OFFLINE):
    where login_user_session writes and runbot reads."""
    settings.TELEGRAM_SESSION_DIR = tmp_path
    settings.TELEGRAM_OFFLINE = True
    settings.TELEGRAM_OFFLINE_SOCKET = telegram
    return tmp_path / "offline"


@pytest.fixture
def bot(telegram, db, shortener, sessions):
    """runbot with its reader of public channels (the user session, connected on first use)."""
    history = UserHistory(
        functools.partial(user_client_build, api_id=API_ID, api_hash=API_HASH, offline=telegram), workdir=sessions
    )
    offline = OfflineBot(
        telegram,
        lambda gw: Router(
            gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener, user_history=history
        ),
        peers=user_access_hash,
    )
    yield offline
    offline.stop()
    history.stop()


@pytest.fixture
def channel(telegram):
    """The public channel the bot is not in."""
    telegram.create_channel(PUBLIC, title="Wazir Forex", username=USERNAME, bot_is_admin=False)
    telegram.account_add(PHONE, OPERATOR, first_name="Operator")


@pytest.fixture
def results(channel):
    return PostsCommand.objects.create(name="results", channel_username=USERNAME, word="position", count=2, cache_minutes=60)


def login(monkeypatch, telegram, *, code=None, password=""):
    """login_user_session as the operator answers it: the code their Telegram app shows."""
    monkeypatch.setattr(login_user_session, "ask", lambda prompt: code or telegram.login_code(PHONE))
    monkeypatch.setattr(login_user_session, "ask_secret", lambda prompt: password)
    return call_command("login_user_session", phone=PHONE)


def answer_of(chat, user, command="/results"):
    (reply,) = chat(user, command)
    return reply.text


def test_results_of_a_public_channel_reads_it_through_the_user_session_and_keeps_the_answer_its_time(
    results, monkeypatch, telegram, sessions, chat, alice
):
    assert "Logged in as Operator (4242)" in login(monkeypatch, telegram)
    telegram.post(PUBLIC, "EURUSD position opened at 1.0850")
    second = telegram.post(PUBLIC, "Position closed: +40 pips")
    telegram.post(PUBLIC, "Good morning, traders")
    third = telegram.post(PUBLIC, "GBPUSD POSITION opened")

    assert answer_of(chat, alice) == f"{TITLE}\n• GBPUSD POSITION opened »\n• Position closed: +40 pips »"
    reply = telegram.bot_messages(alice.id)[-1]
    assert [e.url for e in reply.entities if hasattr(e, "url")] == [
        f"https://t.me/{USERNAME}/{third}",
        f"https://t.me/{USERNAME}/{second}",
    ]
    assert telegram.count("messages.GetHistory") == 1

    telegram.post(PUBLIC, "USDJPY position opened")
    clock.clock_advance(timedelta(minutes=59))
    assert answer_of(chat, alice).endswith("• Position closed: +40 pips »")  # the kept answer
    assert telegram.count("messages.GetHistory") == 1
    clock.clock_advance(timedelta(minutes=2))
    assert answer_of(chat, alice) == f"{TITLE}\n• USDJPY position opened »\n• GBPUSD POSITION opened »"
    assert telegram.count("messages.GetHistory") == 2
    assert telegram.count("contacts.ResolveUsername") == 1  # resolved once (Telegram rations it)


def test_without_a_logged_in_user_session_results_says_it_cannot_be_read_and_doctor_says_how(
    results, monkeypatch, telegram, sessions, chat, alice
):
    telegram.post(PUBLIC, "EURUSD position opened")
    assert answer_of(chat, alice) == UNAVAILABLE_TEXT
    assert list(sessions.glob("user*")) == []  # nothing made: the operator logs in
    (finding,) = _user_session(sessions)
    assert not finding.ok and "/results (@wazirforexalerts)" in finding.text and "login_user_session" in finding.text

    login(monkeypatch, telegram)

    assert answer_of(chat, alice) == f"{TITLE}\n• EURUSD position opened »"  # nothing unavailable was kept
    (finding,) = _user_session(sessions)
    assert finding.ok and f"user {OPERATOR}" in finding.text


def test_doctor_says_nothing_of_a_user_session_no_command_needs(sessions, db):
    PostsCommand.objects.create(name="results", channel_id=-1003232270001, word="position")
    assert _user_session(sessions) == []


def test_a_wrong_code_is_one_line_and_keeps_nothing(channel, monkeypatch, telegram, sessions):
    with pytest.raises(CommandError) as refused:
        login(monkeypatch, telegram, code="00000")

    assert str(refused.value) == "not logged in: the code is wrong: run the command again for a new one"
    assert list(sessions.glob("user*")) == []
    assert user_session_account(sessions) is None


def test_an_account_with_two_step_verification_gives_its_password_and_a_wrong_one_is_refused(monkeypatch, telegram, sessions):
    telegram.account_add("+15550001111", 5151, first_name="Secure", password="correct horse")
    monkeypatch.setattr(login_user_session, "ask", lambda prompt: telegram.login_code("+15550001111"))
    monkeypatch.setattr(login_user_session, "ask_secret", lambda prompt: "wrong horse")
    with pytest.raises(CommandError, match="^not logged in: the two-step verification password is wrong$"):
        call_command("login_user_session", phone="+15550001111")
    assert list(sessions.glob("user*")) == []

    monkeypatch.setattr(login_user_session, "ask_secret", lambda prompt: "correct horse")
    assert "Logged in as Secure (5151)" in call_command("login_user_session", phone="+15550001111")
    assert user_session_account(sessions) == 5151


def test_nothing_typed_for_the_code_is_one_line(channel, monkeypatch, telegram, sessions):
    with pytest.raises(CommandError, match="^not logged in: nothing given for “The code Telegram sent to your Telegram apps”$"):
        login(monkeypatch, telegram, code=" ")
    assert list(sessions.glob("user*")) == []


def test_the_bot_may_not_read_a_channels_history_as_telegram_refuses_it(channel, gateway, telegram):
    public = telegram.channels[-PUBLIC - 10**12]
    peer = raw.types.InputPeerChannel(channel_id=public.raw_id, access_hash=public.access_hash)
    history = raw.functions.messages.GetHistory(
        peer=peer, offset_id=0, offset_date=0, add_offset=0, limit=10, max_id=0, min_id=0, hash=0
    )

    with pytest.raises(BadRequest, match="BOT_METHOD_INVALID"):
        gateway._run(gateway.client.invoke(history))


def test_the_operator_gives_a_channel_id_or_a_public_channels_username_on_the_commands_page(admin_client, plain_http):
    url = reverse("admin:botapp_postscommand_add")
    data = {"name": "results", "word": "position", "count": "5", "cache_minutes": "60", "title": TITLE,
            "empty_text": "Nothing yet.", "enabled": "on"}  # fmt: skip
    for wrong in ({}, {"channel_id": "-1003232270001", "channel_username": USERNAME}, {"channel_username": "@wazir"}):
        form = admin_client.post(url, data | wrong).context["adminform"].form
        assert form.errors, wrong
    assert admin_client.post(url, data | {"channel_username": USERNAME}).status_code == 302
    assert PostsCommand.objects.get().channel_username == USERNAME
