"""Users and files in the console: @username search, the filters, ban/unban/reset/export actions,
a user's page listing what they got, and stored files leading with their link."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.models import AuditEntry, BotSettings, StoredFile, TelegramUser, UserBan
from botapp.services.moderation import ban_in_force, ban_notice, user_ban
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
def operator(admin_client, plain_http):
    return admin_client


def listed(response):
    return {u.username for u in response.context["cl"].result_list}


def banned_column(response) -> list[str]:
    """Each row's "banned" cell: "banned" (a red label) or "-" (nothing to say)."""
    cells = response.content.decode().split('class="field-banned')[1:]
    return [re.sub(r"<[^>]+>|\s+", " ", cell.split("</td>")[0].split(">", 1)[1]).strip() for cell in cells]


def test_searching_at_username_finds_the_user(operator):
    TelegramUserFactory(username="alice")
    TelegramUserFactory(username="bob")
    assert listed(operator.get(reverse(USERS), {"q": "@alice"})) == {"alice"}


def test_filters_for_banned_verified_last_seen_and_payload(operator):
    now = clock.now()
    TelegramUserFactory(username="banned", banned_until=now + timedelta(days=1))
    TelegramUserFactory(username="was_banned", banned_until=now - timedelta(days=1))
    user_ban(user=TelegramUserFactory(username="admin_banned"), duration=timedelta(days=1))
    ended = TelegramUserFactory(username="ban_ended", admin_banned=True)  # the flag stays until /unban
    UserBan.objects.create(user=ended, created_at=now - timedelta(days=2), until=now - timedelta(days=1))
    TelegramUserFactory(username="verified", verified_until=now + timedelta(hours=1))
    TelegramUserFactory(username="away", last_seen_at=now - timedelta(days=40), start_payload="promo-autumn")
    url = reverse(USERS)
    assert listed(operator.get(url, {"banned": "yes"})) == {"banned", "admin_banned"}
    assert listed(operator.get(url, {"banned": "admin"})) == {"admin_banned"}
    assert listed(operator.get(url, {"banned": "bypass"})) == {"banned"}
    assert listed(operator.get(url, {"banned": "no"})) == {"was_banned", "ban_ended", "verified", "away"}
    assert banned_column(operator.get(url, {"banned": "yes"})) == ["banned", "banned"]
    assert banned_column(operator.get(url, {"banned": "no"})) == ["-"] * 4
    assert listed(operator.get(url, {"verified": "yes"})) == {"verified"}
    assert listed(operator.get(url, {"seen": "old"})) == {"away"}
    assert listed(operator.get(url, {"start_payload__icontains": "autumn"})) == {"away"}


def test_ban_is_the_bots_ban_and_unban_lifts_both_kinds(operator, admin_user):
    alice = TelegramUserFactory(verified_until=clock.now() + timedelta(hours=3))
    bob = TelegramUserFactory(banned_until=clock.now() + timedelta(hours=6))  # a verification bypass
    carol = TelegramUserFactory()
    url = reverse(USERS)
    response = operator.post(url, {"action": "ban", "_selected_action": [alice.pk]}, follow=True)
    assert "Banned 1 user(s) for 30 days." in response.content.decode()
    ban = ban_in_force(user=TelegramUser.objects.get(pk=alice.pk))  # what the delivery gate asks
    assert ban is not None and ban.until - clock.now() > timedelta(days=29)
    assert ban.reason == "" and ban.banned_by is None
    assert admin_user.get_username() not in ban_notice(ban=ban)  # what alice is told: no operator's name
    entry = AuditEntry.objects.get(action="user.ban")
    assert (entry.actor, entry.via) == (admin_user.get_username(), "console")  # who banned her: on the trail
    assert ban_in_force(user=TelegramUser.objects.get(pk=carol.pk)) is None

    response = operator.post(url, {"action": "unban", "_selected_action": [alice.pk, bob.pk, carol.pk]}, follow=True)
    assert "Unbanned 2 user(s)." in response.content.decode()
    assert ban_in_force(user=TelegramUser.objects.get(pk=alice.pk)) is None
    assert TelegramUser.objects.get(pk=bob.pk).banned_until is None
    operator.post(url, {"action": "reset_verification", "_selected_action": [alice.pk]})
    assert TelegramUser.objects.get(pk=alice.pk).verified_until is None


def test_a_longer_ban_is_not_cut_down_by_the_consoles(operator):
    forever, week = TelegramUserFactory(), TelegramUserFactory()
    user_ban(user=forever, duration=None, reason="spam")  # /ban until /unban
    user_ban(user=week, duration=timedelta(days=7))
    response = operator.post(reverse(USERS), {"action": "ban", "_selected_action": [forever.pk, week.pk]}, follow=True)
    page = response.content.decode()
    assert (
        "Banned 1 user(s) for 30 days." in page and f"Already banned for longer: {forever.telegram_id} left as they were." in page
    )
    assert ban_in_force(user=TelegramUser.objects.get(pk=forever.pk)).until is None
    assert ban_in_force(user=TelegramUser.objects.get(pk=week.pk)).until - clock.now() > timedelta(days=29)


def test_staff_who_may_only_view_users_cannot_ban_or_reset_them(client, plain_http, django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_telegramuser"))
    client.force_login(viewer)
    mallory = TelegramUserFactory(verified_until=clock.now() + timedelta(hours=1))
    for name in ("ban", "unban", "reset_verification"):
        client.post(reverse(USERS), {"action": name, "_selected_action": [mallory.pk]})
    assert ban_in_force(user=TelegramUser.objects.get(pk=mallory.pk)) is None
    assert TelegramUser.objects.get(pk=mallory.pk).verified_until is not None
    page = client.get(reverse(USERS)).content.decode()
    assert "Ban for 30 days" not in page and "Export as CSV" in page  # what they may see, they may export


def test_admins_are_not_banned_from_the_console_either(operator, settings):
    settings.ADMIN_IDS = "1000"
    admin = TelegramUserFactory(telegram_id=1000)
    dave = TelegramUserFactory()
    response = operator.post(reverse(USERS), {"action": "ban", "_selected_action": [admin.pk, dave.pk]}, follow=True)
    page = response.content.decode()
    assert "Banned 1 user(s) for 30 days." in page and "Admins cannot be banned (ADMIN_IDS): 1000" in page
    assert ban_in_force(user=TelegramUser.objects.get(pk=admin.pk)) is None
    assert ban_in_force(user=TelegramUser.objects.get(pk=dave.pk)) is not None


def test_csv_export_has_one_row_per_selected_user(operator):
    users = [TelegramUserFactory(username=f"u{i}") for i in range(3)]
    response = operator.post(reverse(USERS), {"action": "export_csv", "_selected_action": [u.pk for u in users[:2]]})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:2] == ["telegram_id", "username"]
    assert sorted(r[1] for r in rows[1:]) == ["u0", "u1"]


def test_csv_export_defuses_names_a_spreadsheet_would_run(operator):
    user = TelegramUserFactory(username="mallory", first_name='=HYPERLINK("http://evil")', last_name="-1+2", start_payload="@cmd")
    response = operator.post(reverse(USERS), {"action": "export_csv", "_selected_action": [user.pk]})
    header, row = list(csv.reader(io.StringIO(response.content.decode())))
    cells = dict(zip(header, row, strict=True))
    assert cells["first_name"] == '\'=HYPERLINK("http://evil")' and cells["last_name"] == "'-1+2"
    assert cells["start_payload"] == "'@cmd" and cells["username"] == "mallory"
    assert cells["telegram_id"] == str(user.telegram_id)


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


def test_ban_and_unban_on_a_users_page_answer_404_for_no_such_user(operator):
    user = TelegramUserFactory()
    assert operator.get(f"/botapp/telegramuser/{user.pk}/ban/").status_code == 200
    for path in (
        "/botapp/telegramuser/999999/ban/",
        f"/botapp/telegramuser/{user.pk}/change/ban/",
        "/botapp/telegramuser/x/unban/",
    ):
        assert operator.get(path).status_code == 404, path
    assert operator.post(f"/botapp/telegramuser/{user.pk}/ban/", {"days": "7", "reason": ""}).status_code == 200  # the form again
    assert not UserBan.objects.exists()
