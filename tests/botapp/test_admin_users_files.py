"""Users and files in the console: @username search, the filters, ban/unban/reset/export actions,
a user's page listing what they got, and stored files leading with their link."""

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.models import BotSettings, StoredFile, TelegramUser
from tests.conftest import STORAGE
from tests.factories import (
    BroadcastDeliveryFactory,
    BroadcastFactory,
    ButtonClickFactory,
    TelegramUserFactory,
    VerificationTokenFactory,
)

pytestmark = pytest.mark.django_db
USERS = "admin:botapp_telegramuser_changelist"


@pytest.fixture
def operator(admin_client, settings):
    settings.SECURE_SSL_REDIRECT = False
    return admin_client


def listed(response):
    return {u.username for u in response.context["cl"].result_list}


def test_searching_at_username_finds_the_user(operator):
    TelegramUserFactory(username="alice")
    TelegramUserFactory(username="bob")
    assert listed(operator.get(reverse(USERS), {"q": "@alice"})) == {"alice"}


def test_filters_for_banned_verified_last_seen_and_payload(operator):
    now = clock.now()
    TelegramUserFactory(username="banned", banned_until=now + timedelta(days=1))
    TelegramUserFactory(username="was_banned", banned_until=now - timedelta(days=1))
    TelegramUserFactory(username="verified", verified_until=now + timedelta(hours=1))
    TelegramUserFactory(username="away", last_seen_at=now - timedelta(days=40), start_payload="promo-autumn")
    url = reverse(USERS)
    assert listed(operator.get(url, {"banned": "yes"})) == {"banned"}
    assert listed(operator.get(url, {"verified": "yes"})) == {"verified"}
    assert listed(operator.get(url, {"seen": "old"})) == {"away"}
    assert listed(operator.get(url, {"start_payload__icontains": "autumn"})) == {"away"}


def test_ban_unban_and_reset_verification_act_on_the_selected_users(operator):
    alice = TelegramUserFactory(verified_until=clock.now() + timedelta(hours=3))
    bob = TelegramUserFactory()
    url = reverse(USERS)
    operator.post(url, {"action": "ban", "_selected_action": [alice.pk]})
    alice.refresh_from_db()
    assert alice.banned_until - clock.now() > timedelta(days=29)
    assert TelegramUser.objects.get(pk=bob.pk).banned_until is None

    operator.post(url, {"action": "unban", "_selected_action": [alice.pk, bob.pk]})
    operator.post(url, {"action": "reset_verification", "_selected_action": [alice.pk]})
    alice.refresh_from_db()
    assert alice.banned_until is None and alice.verified_until is None


def test_csv_export_has_one_row_per_selected_user(operator):
    users = [TelegramUserFactory(username=f"u{i}") for i in range(3)]
    response = operator.post(reverse(USERS), {"action": "export_csv", "_selected_action": [u.pk for u in users[:2]]})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:2] == ["telegram_id", "username"]
    assert sorted(r[1] for r in rows[1:]) == ["u0", "u1"]


def test_a_users_page_lists_what_they_received_redeemed_and_clicked(operator):
    user = TelegramUserFactory(username="alice")
    BroadcastDeliveryFactory(user=user, broadcast=BroadcastFactory(title="Autumn sale"), status="sent", sent_at=clock.now())
    VerificationTokenFactory(user=user, status="verified", share_id="abc123")
    ButtonClickFactory(user=user, button="joined", count=3)
    page = operator.get(reverse("admin:botapp_telegramuser_change", args=[user.pk])).content.decode()
    assert "Autumn sale: Sent" in page
    assert "Verified" in page and "for abc123" in page
    assert "joined: 3×" in page
    assert "Sequence messages" in page


def test_a_new_stored_file_lands_on_its_link_with_a_copy_button(operator):
    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.save()
    response = operator.post(
        reverse("admin:botapp_storedfile_add"),
        {"title": "Report", "source_chat_id": STORAGE, "message_ids": "5-7", "_addanother": "1"},
    )
    stored = StoredFile.objects.get()
    assert response.url == reverse("admin:botapp_storedfile_change", args=[stored.pk])
    page = operator.get(response.url).content.decode()
    link = f"https://t.me/CourierBot?start={stored.share_id}"
    assert page.index(link) < page.index('name="title"')  # the link comes first
    assert f'data-link="{link}"' in page
    listing = operator.get(reverse("admin:botapp_storedfile_changelist")).content.decode()
    assert listing.index(link) < listing.index("Report")
