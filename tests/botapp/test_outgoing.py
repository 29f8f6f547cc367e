"""Composed messages: button lines, tracked buttons and the click redirect."""

import pytest
from django.core.exceptions import ValidationError

from botapp.models import ButtonClick
from botapp.services.outgoing import ButtonSpec, Outgoing, buttons_parse, click_token_of
from botapp.telegram.gateway import TgUser
from tests.factories import TelegramUserFactory


def test_buttons_parse_rows_and_explains_mistakes(settings):
    settings.PUBLIC_URL = "https://courier.example"
    assert buttons_parse(text="Shop | https://s.example\nA | https://a.example || B | tg://resolve?domain=x | b-key") == [
        [ButtonSpec("Shop", "https://s.example")],
        [ButtonSpec("A", "https://a.example"), ButtonSpec("B", "tg://resolve?domain=x", "b-key")],
    ]
    with pytest.raises(ValidationError, match="Line 2"):
        buttons_parse(text="ok | https://ok.example\nno link here")
    with pytest.raises(ValidationError, match="not a link"):
        buttons_parse(text="x | ftp://nope")
    with pytest.raises(ValidationError, match="a-z, 0-9"):
        buttons_parse(text="x | https://x.example | Bad Key")


def test_tracking_needs_a_public_url(settings):
    settings.PUBLIC_URL = ""
    with pytest.raises(ValidationError, match="PUBLIC_URL"):
        buttons_parse(text="Join | https://t.me/+abc | joined")


@pytest.mark.django_db
def test_a_tracked_button_records_the_click_and_redirects(client, settings, telegram, gateway, chat):
    settings.PUBLIC_URL = "https://courier.example"
    settings.SECURE_SSL_REDIRECT = False
    user = TelegramUserFactory()
    chat(TgUser(id=user.telegram_id, first_name=user.first_name), "/start")  # a bot reaches only users who wrote to it
    message = Outgoing.compose(text="Hi", media_kind="", media="", buttons="Join | https://t.me/+abc | joined", protect=False)
    sent = message.send(gateway, user.telegram_id, user_id=user.pk)

    url = telegram.message(user.telegram_id, sent.message_id).buttons[0][0].url
    assert url.startswith("https://courier.example/go/")
    response = client.get(f"/go/{click_token_of(url=url)}/")

    assert response.status_code == 302 and response["Location"] == "https://t.me/+abc"
    assert list(ButtonClick.objects.values_list("user_id", "button", "count")) == [(user.pk, "joined", 1)]
    client.get(f"/go/{click_token_of(url=url)}/")  # clicking again only counts
    assert list(ButtonClick.objects.values_list("user_id", "button", "count")) == [(user.pk, "joined", 2)]


@pytest.mark.django_db
def test_a_forged_click_link_is_refused(client, settings):
    settings.SECURE_SSL_REDIRECT = False
    assert client.get("/go/not-a-real-token/").status_code == 404
    assert not ButtonClick.objects.exists()
