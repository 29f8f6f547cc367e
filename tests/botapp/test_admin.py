"""Every model has a working admin list with search and filters."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from botapp.models import BotSettings, StoredFile
from tests.factories import StoredFileFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model, plain_http):
    user = django_user_model.objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def our_models():
    return [m for m in apps.get_app_config("botapp").get_models()] + list(apps.get_app_config("scheduler").get_models())


def test_every_model_is_registered():
    missing = [m.__name__ for m in our_models() if m not in admin.site._registry]
    assert missing == []


def test_every_changelist_renders_with_search(operator):
    TelegramUserFactory(username="findme")
    StoredFileFactory()
    for model in our_models():
        if model is BotSettings:
            continue
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = operator.get(url, {"q": "findme"})
        assert response.status_code == 200, url
        model_admin = admin.site._registry[model]
        assert model_admin.search_fields and model_admin.list_filter, model.__name__


def test_user_search_finds_by_username(operator):
    TelegramUserFactory(username="findme", telegram_id=777)
    TelegramUserFactory(username="other")
    response = operator.get(reverse("admin:botapp_telegramuser_changelist"), {"q": "findme"})
    assert b"findme" in response.content
    assert b"other" not in response.content


def test_settings_list_opens_the_single_row(operator):
    response = operator.get(reverse("admin:botapp_botsettings_changelist"))
    assert response.status_code == 302
    assert response.url == reverse("admin:botapp_botsettings_change", args=[1])
    assert operator.get(response.url).status_code == 200


def test_settings_reject_auto_delete_beyond_telegram_window(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data["auto_delete_minutes"] = 2881
    response = operator.post(url, data)
    assert response.status_code == 200
    assert "auto_delete_minutes" in response.context["adminform"].form.errors
    assert BotSettings.load().auto_delete_minutes == 30


def test_settings_refuse_a_caption_template_that_cannot_fit(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data["file_caption"] = "<b>{filename}</b>\n" + "Join our channel! " * 50
    response = operator.post(url, data)
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["file_caption"]
    assert "Telegram allows 1024" in error
    assert BotSettings.load().file_caption == ""

    data["file_caption"] = "<b>{filename}</b> · {filesize}\n{previouscaption}"
    assert operator.post(url, data).status_code == 302
    assert BotSettings.load().file_caption == data["file_caption"]


def test_stored_file_form_takes_the_link_s_own_settings(operator):
    url = reverse("admin:botapp_storedfile_add")
    data = {"title": "x", "source_chat_id": "-1001000000001", "message_ids": "5", "protect_content": "false"}
    response = operator.post(url, {**data, "auto_delete_minutes": "2881"})
    assert "auto_delete_minutes" in response.context["adminform"].form.errors

    data |= {"auto_delete_minutes": "0", "skip_verification": "on", "expires_at_0": "2030-01-01", "expires_at_1": "12:00:00"}
    assert operator.post(url, data).status_code == 302
    stored = StoredFile.objects.get()
    assert (stored.protect_content, stored.auto_delete_minutes, stored.skip_verification) == (False, 0, True)
    assert stored.expires_at.year == 2030


def test_stored_file_shows_its_deep_link(operator):
    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.save()
    stored = StoredFileFactory()
    response = operator.get(reverse("admin:botapp_storedfile_changelist"))
    assert f"https://t.me/CourierBot?start={stored.share_id}".encode() in response.content


def test_force_subscribe_channel_form_explains_bad_ids_and_links(operator):
    response = operator.post(
        reverse("admin:botapp_forcesubchannel_add"),
        {"chat_id": "12345", "title": "News", "invite_link": "https://example.com/join", "enabled": "on", "position": 0},
    )
    errors = response.context["adminform"].form.errors
    assert "chat_id" in errors and "invite_link" in errors


def test_neither_the_storage_nor_the_backup_channel_is_a_force_subscribe_channel(operator, settings):
    """Users who joined either would see every stored file."""
    from botapp.models import BotSettings, ForceSubChannel

    settings.STORAGE_CHANNEL_ID = "-1001000000001"
    conf = BotSettings.load()
    conf.backup_channel_id = -1003000000001
    conf.save()

    def refusal(chat_id):
        data = {"chat_id": chat_id, "title": "Files", "invite_link": "https://t.me/+abc", "enabled": "on", "position": 0}
        return operator.post(reverse("admin:botapp_forcesubchannel_add"), data).context["adminform"].form.errors["chat_id"]

    assert refusal("-1001000000001") == [
        "That is the storage channel (STORAGE_CHANNEL_ID): users who joined it would see every stored file."
    ]
    assert refusal("-1003000000001") == [
        "That is the backup channel (Bot settings): users who joined it would see every stored file."
    ]
    assert not ForceSubChannel.objects.exists()


def test_stored_file_form_wants_a_channel_id(operator):
    response = operator.post(reverse("admin:botapp_storedfile_add"), {"title": "x", "source_chat_id": "777", "message_ids": "5"})
    assert "source_chat_id" in response.context["adminform"].form.errors


def test_changing_an_expiring_channels_lifetime_drops_its_stored_link(operator):
    from tests.factories import ForceSubChannelFactory

    channel = ForceSubChannelFactory(invite_link="", invite_ttl_minutes=30, current_link="https://t.me/+old")
    url = reverse("admin:botapp_forcesubchannel_change", args=[channel.pk])
    data = {"chat_id": channel.chat_id, "title": channel.title, "invite_link": "", "enabled": "on", "position": 0}
    response = operator.post(url, {**data, "invite_ttl_minutes": 60})
    assert response.status_code == 302
    channel.refresh_from_db()
    assert (channel.invite_ttl_minutes, channel.current_link) == (60, "")

    response = operator.post(url, {**data, "invite_ttl_minutes": 0})
    assert "invite_link" in response.context["adminform"].form.errors  # neither a fixed link nor expiring ones


def test_settings_form_wants_a_channel_id_for_legacy_links(operator):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    response = operator.post(url, {**data, "legacy_channel_id": "12345"})
    assert "legacy_channel_id" in response.context["adminform"].form.errors
    response = operator.post(url, {**data, "legacy_channel_id": "-1001777000123", "channel_post_links": "button"})
    assert response.status_code == 302
    conf = BotSettings.load()
    assert (conf.legacy_channel_id, conf.channel_post_links) == (-1001777000123, "button")
