"""Bot settings: texts checked before users see them, the shortener key never shown again."""

import pytest
from django.urls import reverse

from botapp.models import BotSettings

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def form_data(operator, url):
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    return data


def test_unknown_placeholders_bad_braces_and_bad_html_are_refused(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    data = form_data(operator, url) | {
        "welcome_text": "Hi {firstname}! <b>Welcome",
        "help_text": "Use {mention or {username}",
        "deleted_notice_text": "Gone, {first_name}",
    }
    response = operator.post(url, data)
    errors = response.context["adminform"].form.errors
    assert errors["welcome_text"] == [
        "{firstname} is not a placeholder the bot fills (it fills {first_name}, {last_name}, {username}, {mention}, {id}, "
        "{user_id}, {chat_id}).",
        "<b> is never closed.",
    ]
    assert errors["help_text"][0].startswith("Braces do not match")
    assert "deleted_notice_text" not in errors  # sent as written: braces there are text
    assert BotSettings.load().welcome_text.startswith("Hello {first_name}")


def test_a_placeholder_with_a_conversion_or_format_is_refused(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    data = form_data(operator, url) | {"welcome_text": "Hi {first_name!r}", "help_text": "Hi {first_name:d} {mention:>10}"}
    errors = operator.post(url, data).context["adminform"].form.errors
    assert errors["welcome_text"] == ["{first_name!r}: a placeholder takes no conversion or format; write {first_name}."]
    assert errors["help_text"] == [
        "{first_name:d}: a placeholder takes no conversion or format; write {first_name}.",
        "{mention:>10}: a placeholder takes no conversion or format; write {mention}.",
    ]


@pytest.mark.parametrize("address", ["not a url", "ftp://x", "https://"])
def test_a_shortener_address_that_is_not_one_is_refused(operator, address):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    errors = operator.post(url, form_data(operator, url) | {"shortener_api_url": address}).context["adminform"].form.errors
    assert errors["shortener_api_url"] == [
        'Give the shortener\'s API address, like https://shortener.example/api (or leave it empty, or "none", for direct links).'
    ]


def test_a_typed_shortener_key_not_saved_because_of_another_error_says_so(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    data = form_data(operator, url) | {"shortener_api_key": "secret-key", "auto_delete_minutes": 9999}
    errors = operator.post(url, data).context["adminform"].form.errors
    assert "auto_delete_minutes" in errors
    assert errors["shortener_api_key"] == ["Not saved, with the rest (see the errors): type the key again."]
    assert BotSettings.load().shortener_api_key == ""


def test_a_force_subscribe_channel_is_refused_as_the_backup(operator):
    from tests.factories import ForceSubChannelFactory

    ForceSubChannelFactory(chat_id=-1004000000001)
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    errors = operator.post(url, form_data(operator, url) | {"backup_channel_id": -1004000000001}).context["adminform"].form.errors
    assert errors["backup_channel_id"] == [
        "That is a force-subscribe channel: users join it, and would see every stored file there."
    ]


def test_known_placeholders_and_html_are_saved(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    data = form_data(operator, url) | {"welcome_text": "Hi <b>{first_name}</b>, {mention}!"}
    assert operator.post(url, data).status_code == 302
    assert BotSettings.load().welcome_text == "Hi <b>{first_name}</b>, {mention}!"


def test_the_shortener_key_is_never_shown_and_kept_unless_replaced(operator):
    conf = BotSettings.load()
    conf.shortener_api_key = "sekret-key-123"
    conf.save()
    url = reverse("admin:botapp_botsettings_change", args=[conf.pk])
    page = operator.get(url).content.decode()
    assert "sekret-key-123" not in page
    assert "Current settings" in page  # the header: "Bot settings › Current settings", not the name twice
    operator.post(url, form_data(operator, url))
    assert BotSettings.load().shortener_api_key == "sekret-key-123"
    operator.post(url, form_data(operator, url) | {"shortener_api_key": "-"})
    assert BotSettings.load().shortener_api_key == ""


def test_the_send_window_and_the_opt_out_button_are_checked_on_the_settings_page(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    errors = (
        operator.post(url, form_data(operator, url) | {"send_window_start": "08:00", "send_window_tz": "Mars/Olympus"})
        .context["adminform"]
        .form.errors
    )
    assert errors["send_window_tz"] == [
        "Mars/Olympus is not a time zone name: write one like Europe/Berlin, America/New_York or UTC."
    ]
    assert errors["send_window_end"] == ["Give both times of the send window (when it opens and when it closes), or neither."]
    errors = operator.post(url, form_data(operator, url) | {"optout_label": "x" * 65}).context["adminform"].form.errors
    assert "optout_label" in errors

    window = {"send_window_start": "22:00", "send_window_end": "06:00", "send_window_tz": "Europe/Berlin"}
    assert operator.post(url, form_data(operator, url) | window | {"optout_enabled": "on"}).status_code == 302
    conf = BotSettings.load()
    assert (str(conf.send_window_start), str(conf.send_window_end), conf.send_window_tz, conf.optout_enabled) == (
        "22:00:00",
        "06:00:00",
        "Europe/Berlin",
        True,
    )
