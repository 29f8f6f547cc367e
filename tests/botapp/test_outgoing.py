"""Composed messages: button lines, tracked buttons and the click redirect."""

from datetime import timedelta

import pytest
from django.core import signing
from django.core.exceptions import ValidationError
from django.urls import reverse

from botapp import clock
from botapp.models import Broadcast, ButtonClick
from botapp.models.buttons import ButtonSpec, buttons_parse
from botapp.services.outgoing import CLICK_SALT, Outgoing, click_token_of
from botapp.telegram.gateway import Button, TelegramError, TgUser
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


@pytest.mark.parametrize(
    "url", ["mailto:a@example.com", "javascript:alert(1)", "https://", "tg://", "t.me/courier", "ftp://x.example"]
)
def test_a_link_telegram_would_refuse_is_refused_when_composed_naming_its_line(settings, url):
    settings.PUBLIC_URL = "https://courier.example"
    for key in ("", " | k"):
        with pytest.raises(ValidationError, match=r"Line 2: .* is not a link Telegram accepts on a button"):
            buttons_parse(text=f"Fine | https://fine.example\nBad | {url}{key}")


@pytest.mark.django_db
def test_what_composing_accepts_telegram_accepts_and_what_it_refuses_telegram_refuses(telegram, gateway, chat):
    """The in-memory Telegram refuses a link button Telegram would (BUTTON_URL_INVALID): such a
    broadcast would fail for every user, which is why composing refuses it."""
    user = TelegramUserFactory()
    chat(TgUser(id=user.telegram_id, first_name=user.first_name), "/start")
    fine = "A | https://t.me/+abc\nB | tg://resolve?domain=courier\nC | http://example.com/x?y=1"
    Outgoing.compose(text="Hi", media_kind="", media="", buttons=fine, protect=False).send(gateway, user.telegram_id)
    with pytest.raises(TelegramError, match="BUTTON_URL_INVALID"):
        gateway.send_text(user.telegram_id, "Hi", buttons=[[Button("Mail", url="mailto:a@example.com")]])


def test_the_broadcast_form_names_the_line_with_a_refused_link(admin_client, plain_http):
    data = {"title": "x", "text": "hi", "media_kind": "", "media": "", "buttons": "Ok | https://ok.example\nMail | mailto:a@b.c"}
    response = admin_client.post(reverse("admin:botapp_broadcast_add"), data)
    assert "Line 2: mailto:a@b.c is not a link Telegram accepts" in " ".join(response.context["adminform"].form.errors["buttons"])
    assert not Broadcast.objects.exists()


def tracked(telegram, gateway, chat, buttons):
    """A user who wrote to the bot, and the tracked URL of the first button they were sent."""
    user = TelegramUserFactory()
    chat(TgUser(id=user.telegram_id, first_name=user.first_name), "/start")  # a bot reaches only users who wrote to it
    message = Outgoing.compose(text="Hi", media_kind="", media="", buttons=buttons, protect=False)
    sent = message.send(gateway, user.telegram_id, user_id=user.pk)
    return user, telegram.message(user.telegram_id, sent.message_id).buttons[0][0].url


def clicks():
    return list(ButtonClick.objects.values_list("user__telegram_id", "button", "count"))


@pytest.fixture
def web(client, settings, plain_http):
    settings.PUBLIC_URL = "https://courier.example"
    return client


@pytest.mark.django_db
def test_a_tracked_tg_link_opens_telegram_and_counts_the_click(web, telegram, gateway, chat):
    user, url = tracked(telegram, gateway, chat, "Chat | tg://resolve?domain=courier&start=hi | chat")

    response = web.get(f"/go/{click_token_of(url=url)}/")

    page = response.content.decode()
    assert response.status_code == 200  # it was 400: Django will not redirect to tg://
    assert '<meta http-equiv="refresh" content="0;url=tg://resolve?domain=courier&amp;start=hi">' in page
    assert 'href="tg://resolve?domain=courier&amp;start=hi"' in page and "Open in Telegram" in page
    assert clicks() == [(user.telegram_id, "chat", 1)]


@pytest.mark.django_db
def test_a_click_link_counts_one_click_per_user_and_key_however_often_it_is_opened(web, telegram, gateway, chat):
    user, url = tracked(telegram, gateway, chat, "Join | https://t.me/+abc | joined")
    other, other_url = tracked(telegram, gateway, chat, "Join | https://t.me/+abc | joined")
    later = Outgoing.compose(text="Still?", media_kind="", media="", buttons="Join | https://t.me/+abc | joined", protect=False)
    sent = later.send(gateway, user.telegram_id, user_id=user.pk)  # the same key in a later message
    later_url = telegram.message(user.telegram_id, sent.message_id).buttons[0][0].url

    for _ in range(3):  # opened again, refreshed, replayed
        response = web.get(f"/go/{click_token_of(url=url)}/")
        assert response.status_code == 302 and response["Location"] == "https://t.me/+abc"
    first = ButtonClick.objects.get(user=user).clicked_at
    clock.clock_advance(timedelta(hours=1))
    web.get(f"/go/{click_token_of(url=later_url)}/")
    web.get(f"/go/{click_token_of(url=other_url)}/")

    assert sorted(clicks()) == sorted([(user.telegram_id, "joined", 1), (other.telegram_id, "joined", 1)])
    row = ButtonClick.objects.get(user=user)
    assert row.clicked_at == first and row.last_clicked_at >= first + timedelta(hours=1)  # opened last an hour later


@pytest.mark.django_db
def test_click_links_expire_after_click_link_days_with_a_page_saying_so(web, telegram, gateway, chat, conf, settings):
    settings.CLICK_LINK_DAYS = 30
    user, url = tracked(telegram, gateway, chat, "Join | https://t.me/+abc | joined")
    token = click_token_of(url=url)

    clock.clock_advance(timedelta(days=30) - timedelta(minutes=1))
    assert web.get(f"/go/{token}/").status_code == 302
    ButtonClick.objects.all().delete()
    clock.clock_advance(timedelta(minutes=2))
    response = web.get(f"/go/{token}/")

    page = response.content.decode()
    assert response.status_code == 410
    assert "This button has expired" in page and "work for 30 days after the message was sent" in page
    assert 'href="https://t.me/CourierBot"' in page  # the way back to the bot
    assert not ButtonClick.objects.exists()

    settings.CLICK_LINK_DAYS = 90  # configurable: a longer life covers it again
    assert web.get(f"/go/{token}/").status_code == 302


@pytest.mark.django_db
def test_a_click_link_made_before_links_carried_their_time_still_works(web, telegram, gateway, chat):
    user = TelegramUserFactory()
    token = signing.dumps({"u": user.pk, "k": "joined", "l": "https://t.me/+abc"}, salt=CLICK_SALT, compress=True)

    response = web.get(f"/go/{token}/")

    assert response.status_code == 302 and response["Location"] == "https://t.me/+abc"
    assert clicks() == [(user.telegram_id, "joined", 1)]


@pytest.mark.django_db
def test_a_tracked_button_records_the_click_and_redirects(client, settings, telegram, gateway, chat, plain_http):
    settings.PUBLIC_URL = "https://courier.example"
    user = TelegramUserFactory()
    chat(TgUser(id=user.telegram_id, first_name=user.first_name), "/start")  # a bot reaches only users who wrote to it
    message = Outgoing.compose(text="Hi", media_kind="", media="", buttons="Join | https://t.me/+abc | joined", protect=False)
    sent = message.send(gateway, user.telegram_id, user_id=user.pk)

    url = telegram.message(user.telegram_id, sent.message_id).buttons[0][0].url
    assert url.startswith("https://courier.example/go/")
    response = client.get(f"/go/{click_token_of(url=url)}/")

    assert response.status_code == 302 and response["Location"] == "https://t.me/+abc"
    assert list(ButtonClick.objects.values_list("user_id", "button", "count")) == [(user.pk, "joined", 1)]


@pytest.mark.django_db
def test_a_forged_click_link_is_refused(client, plain_http):
    response = client.get("/go/not-a-real-token/")
    assert response.status_code == 404 and "This link is not valid" in response.content.decode()
    assert not ButtonClick.objects.exists()
