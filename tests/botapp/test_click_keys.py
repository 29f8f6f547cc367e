"""Which click keys some button records (a sequence step's condition must name one), and the
console's ban until lifted."""

from datetime import timedelta

import pytest

from botapp.models import BotSettings, UserBan
from botapp.services.click_keys import click_key_recorded
from botapp.services.moderation import ban_in_force, users_ban
from tests.factories import BroadcastFactory, ButtonClickFactory, SequenceStepFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db


def test_a_key_is_recorded_by_a_steps_broadcasts_or_the_welcomes_button_or_by_stored_clicks(settings):
    settings.PUBLIC_URL = "https://courier.example"
    SequenceStepFactory(buttons="I joined | tap:joined")
    BroadcastFactory(buttons="Shop | https://shop.example | shop")
    conf = BotSettings.load()
    conf.welcome_buttons = "Start | tap:started"
    conf.save()
    ButtonClickFactory(button="imported_key")
    for key in ("joined", "shop", "started", "imported_key"):
        assert click_key_recorded(key=key), key
    assert click_key_recorded(key="fresh", button_texts=["Yes | tap:fresh"])  # on the form being saved
    assert not click_key_recorded(key="join")  # in a button's text ("joined"), but no button's key
    assert not click_key_recorded(key="nosuchkey")


def test_the_consoles_ban_until_lifted_replaces_a_shorter_one():
    user = TelegramUserFactory()
    assert users_ban(users=[user], duration=timedelta(days=1), reason="spam")[0] == 1
    assert users_ban(users=[user], duration=None, reason="abuse")[0] == 1
    ban = ban_in_force(user=user)
    assert ban.until is None and ban.reason == "abuse"
    assert UserBan.objects.filter(user=user).count() == 2  # the first one lifted, kept
    assert users_ban(users=[user], duration=timedelta(days=30), reason="again")[1:] == ([], [user])  # longer kept
