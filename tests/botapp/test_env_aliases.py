"""The environment names of the systems Courier replaces (shared/seeds/) read as Courier's own, each
with a one-line notice naming Courier's; the others named by `doctor`, with where each lives now."""

import pytest
from django.core.management import call_command

from botapp.config import ENV_ALIASES, bot_config_load
from botapp.management.commands import runbot
from botapp.services.doctor import doctor_settings
from tests.botapp.test_runbot import manage

TOKEN = "8557282195:AAEabcdefghijklmnopqrstuvwxyz0123456"
HASH = "d4ef9bf420939c1a0123456789abcdef"
OLD_NAMES = [alias for aliases in ENV_ALIASES.values() for alias in aliases]


@pytest.fixture
def bare(settings, monkeypatch):
    """Courier's own credentials unset, and none of the old names in the environment."""
    settings.TELEGRAM_OFFLINE = False
    settings.BOT_TOKEN = settings.API_ID = settings.API_HASH = settings.ADMIN_IDS = ""
    for name in OLD_NAMES:
        monkeypatch.delenv(name, raising=False)
    return settings


@pytest.mark.parametrize(
    "alias,value,field,read",
    [
        ("TELEGRAM_BOT_TOKEN", TOKEN, "bot_token", TOKEN),
        ("TELEGRAM_API_ID", "27436879", "api_id", 27436879),
        ("TELEGRAM_API_HASH", HASH, "api_hash", HASH),
        ("ADMIN_USER_ID", "1977988206", "admin_ids", frozenset({1977988206})),
    ],
)
def test_each_old_name_is_read_as_courier_s_with_a_notice(bare, monkeypatch, alias, value, field, read):
    own = {"TELEGRAM_BOT_TOKEN": "BOT_TOKEN", "TELEGRAM_API_ID": "API_ID", "TELEGRAM_API_HASH": "API_HASH"}
    for name, fill in (("BOT_TOKEN", TOKEN), ("API_ID", "1"), ("API_HASH", "0" * 32)):
        if own.get(alias) != name:
            setattr(bare, name, fill)
    monkeypatch.setenv(alias, value)

    config = bot_config_load()

    assert getattr(config, field) == read
    name = {**own, "ADMIN_USER_ID": "ADMIN_IDS"}[alias]
    assert config.notices == (f"{alias} is read as {name}, Courier's name for it: rename it in .env when you can",)


def test_courier_s_own_name_wins_and_then_no_notice(bare, monkeypatch):
    bare.BOT_TOKEN, bare.API_ID, bare.API_HASH = TOKEN, "1", "0" * 32
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1234567:" + "x" * 35)
    config = bot_config_load()
    assert (config.bot_token, config.notices) == (TOKEN, ())


@pytest.mark.slow
def test_the_scheduled_message_system_s_base_url_is_public_url():
    shown = "from django.conf import settings; from botapp.config import env_aliases_found as f; print(settings.PUBLIC_URL, f())"
    env = {"BASE_URL": "https://courier.example", "PUBLIC_URL": ""}
    result = manage("shell", "-c", shown, env=env)
    assert result.stdout.strip().splitlines()[-1] == "https://courier.example [('BASE_URL', 'read as PUBLIC_URL')]"


def test_runbot_with_only_telegram_bot_token_starts_with_one_line_naming_bot_token(bare, monkeypatch, capsys):
    bare.API_ID, bare.API_HASH, bare.ADMIN_IDS = "27436879", HASH, "1000"
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    served = []

    async def serve(self, config, threads, **options):
        served.append(config.bot_token)

    monkeypatch.setattr(runbot.Command, "serve", serve)
    call_command("runbot")

    assert served == [TOKEN]
    assert capsys.readouterr().err.splitlines() == [
        "runbot: TELEGRAM_BOT_TOKEN is read as BOT_TOKEN, Courier's name for it: rename it in .env when you can"
    ]


def test_doctor_lists_every_old_name_it_finds_with_what_courier_does_with_it(bare, monkeypatch):
    bare.BOT_TOKEN = TOKEN
    env = {"TELEGRAM_BOT_TOKEN": "1234567:" + "x" * 35, "ADMIN_USER_ID": "1977988206", "SOURCE_CHANNEL_ID": "-1003232273065",
           "TOKEN_EXPIRY_DAYS": "2"}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    found = {f.name: (f.status, f.text) for f in doctor_settings() if f.name in env}

    assert found == {
        "TELEGRAM_BOT_TOKEN": ("warn", "ignored: BOT_TOKEN is set"),
        "ADMIN_USER_ID": ("warn", "read as ADMIN_IDS"),
        "SOURCE_CHANNEL_ID": ("warn", "not read: Bot settings' posts channel id (import_campaign sets it)"),
        "TOKEN_EXPIRY_DAYS": ("warn", "not read: Bot settings' verification hours (days x 24)"),
    }
