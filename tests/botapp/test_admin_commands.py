"""Admins' commands in the bot: bans, /users, /genlink, and the one-line refusal of bad input.
Sandbox transcripts through runbot's client (the bot fixture)."""

from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz
from hypothesis import strategies as st

from botapp import clock
from botapp.bot.router import SORRY, UNKNOWN
from botapp.models import AdminCommand, BotSettings, Broadcast, PremiumPlan, StoredFile, UserBan
from tests.factories import PremiumPlanFactory, UserBanFactory
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway, conf):
    return sandbox(telegram, bot, gateway)


def test_ban_stops_deliveries_for_its_duration(box, stored):
    link = f"1001: /start {stored.share_id}"
    said(box, "1001: /start")
    out = said(box, "1000: /ban 1001 2h spamming links")
    until = f"{clock.now() + timedelta(hours=2):%Y-%m-%d %H:%M}"
    assert out.texts(1000) == [f"🚫 1001 (@user1001) is banned until {until} UTC. Reason: spamming links"]

    out = said(box, link)
    assert out.texts(1001) == [f"🚫 You are banned until {until} UTC: files cannot be sent to you. Reason: spamming links"]
    assert out.to(1001, "copy") == []
    assert "1001 (@user1001): until" in said(box, "1000: /banlist")

    out = said(box, "wait 1h59m", link)
    assert out.to(1001, "copy") == []
    out = said(box, "wait 2m", link)
    assert len(out.to(1001, "copy")) == 2
    assert said(box, "1000: /banlist").texts(1000) == ["Nobody is banned."]


def test_a_ban_without_a_duration_lasts_until_unban(box, stored):
    link = f"1001: /start {stored.share_id}"
    said(box, "1001: /start")
    assert said(box, "1000: /ban 1001 rude").texts(1000) == ["🚫 1001 (@user1001) is banned until /unban. Reason: rude"]
    out = said(box, "wait 400d", link)
    assert "You are banned by an admin" in out and out.to(1001, "copy") == []
    assert said(box, "1000: /unban 1001").texts(1000) == ["✅ 1001 (@user1001) is no longer banned."]
    assert len(said(box, link).to(1001, "copy")) == 2
    assert UserBan.objects.get().lifted_by == 1000


def test_banning_again_replaces_the_ban_in_force(box):
    said(box, "1001: /start", "1000: /ban 1001", "1000: /ban 1001 1d")
    assert UserBan.objects.filter(lifted_at__isnull=True).count() == 1
    assert UserBan.objects.get(lifted_at__isnull=True).until is not None


def test_users_counts_by_state_premium_and_banned(box, telegram):
    said(box, "1001: /start", "1002: /start", "1003: /start", "1003: /stop", "1002 blocks")
    PremiumPlanFactory(user__telegram_id=1)
    UserBanFactory(user__telegram_id=2)
    (text,) = said(box, "1000: /users").texts(1000)
    assert text.splitlines() == [
        "Users: 6 (new today: 6)",
        "• Active: 4",
        "• Stopped (/stop): 1",
        "• Blocked the bot: 1",
        "• Account deleted: 0",
        "• Premium: 1",
        "• Banned: 1",
    ]


def test_genlink_makes_a_link_for_a_forwarded_storage_post(box, telegram):
    said(box, "post Chapter 1", "1000 forwards #1")  # forwarding stores it too, as before
    out = said(box, "1000 replies: /genlink")
    stored = StoredFile.objects.latest("id")
    assert (stored.message_ids, stored.title) == ([1], "/genlink")
    assert out.texts(1000) == [f"🔗 https://t.me/CourierBot?start={stored.share_id}"]
    assert len(said(box, "1000 tap Open link").to(1000, "copy")) == 1


REFUSALS = [
    ("/addpremium", "Usage: /addpremium <user id> <duration>, e.g. /addpremium 123456789 30d"),
    ("/addpremium 1001", "Usage: /addpremium <user id> <duration>, e.g. /addpremium 123456789 30d"),
    ("/addpremium abc 30d", "abc is not a Telegram user id (a number, e.g. 123456789)."),
    ("/addpremium 424242 30d", "No user 424242 has used this bot."),
    ("/addpremium 1001 3x", "3x is not a duration. Write a duration like 30d, 12h, 1y or 1d12h (m, h, d, w, y), at most 100y."),
    (
        "/addpremium 1001 500y",
        "500y is not a duration. Write a duration like 30d, 12h, 1y or 1d12h (m, h, d, w, y), at most 100y.",
    ),
    ("/delpremium", "Usage: /delpremium <user id>"),
    ("/delpremium 1001", "1001 (@user1001) has no premium plan."),
    ("/delpremium 424242", "No user 424242 has used this bot."),
    ("/ban", "Usage: /ban <user id> [duration] [reason], e.g. /ban 123456789 7d spam"),
    ("/ban x1", "x1 is not a Telegram user id (a number, e.g. 123456789)."),
    ("/ban 424242 1d", "No user 424242 has used this bot."),
    (
        "/ban 1001 5q spam",
        "5q is not a duration. Write a duration like 30d, 12h, 1y or 1d12h (m, h, d, w, y), at most 100y. "
        "Leave it out to ban until /unban.",
    ),
    ("/ban 1000 1d", "Admins cannot be banned."),
    ("/unban", "Usage: /unban <user id>"),
    ("/unban 1001", "1001 (@user1001) is not banned."),
    ("/broadcast", "Reply to the message you want to broadcast with /broadcast (text, media or an album)."),
    ("/pbroadcast", "Reply to the message you want to broadcast with /pbroadcast (text, media or an album)."),
    ("/genlink", "Reply with /genlink to a message forwarded from the storage channel."),
]


def test_each_command_refuses_bad_input_with_one_line_and_changes_nothing(box):
    said(box, "1001: /start", "1000: /start")
    for command, explanation in REFUSALS:
        assert said(box, f"1000: {command}").texts(1000) == [explanation], command
    out = said(box, "1000: Not from the storage channel", "1000 replies: /genlink")
    assert out.texts(1000)[-1] == (
        "That message was not forwarded from the storage channel: forward one from there, then reply to it."
    )
    assert not PremiumPlan.objects.exists() and not UserBan.objects.exists() and not Broadcast.objects.exists()
    assert not StoredFile.objects.exists()
    refused = list(AdminCommand.objects.order_by("id").values_list("command", "arguments", "ok"))
    assert len(refused) == len(REFUSALS) + 1 and not any(ok for *_, ok in refused)
    assert refused[3] == ("addpremium", "424242 30d", False)


def test_anyone_else_gets_the_usual_hint_and_nothing_is_recorded(box):
    said(box, "1001: /start", "1002: /start")
    for command in ("/addpremium 1001 30d", "/delpremium 1001", "/premiumusers", "/ban 1002", "/unban 1002", "/banlist"):
        assert said(box, f"1001: {command}").texts(1001) == [UNKNOWN], command
    for command in ("/users", "/genlink", "/broadcast", "/pbroadcast"):
        assert said(box, f"1001: {command}").texts(1001) == [UNKNOWN], command
    assert not AdminCommand.objects.exists() and not UserBan.objects.exists() and not PremiumPlan.objects.exists()


def test_the_admin_shows_commands_plans_and_bans(box, admin_client, plain_http):
    said(box, "1001: /start", "1000: /addpremium 1001 30d", "1000: /ban 1001 1d spam", "1000: /ban 1")
    page = admin_client.get(reverse("admin:botapp_admincommand_changelist"), {"ok__exact": "0"}).content.decode()
    assert "No user 1 has used this bot." in page and "spam" not in page
    page = admin_client.get(reverse("admin:botapp_premiumplan_changelist"), {"status__exact": "active"}).content.decode()
    assert "user1001" in page
    assert admin_client.get(reverse("admin:botapp_userban_changelist")).status_code == 200
    assert not site._registry[AdminCommand].has_change_permission(None)

    response = admin_client.post(
        reverse("admin:botapp_userban_changelist"),
        {"action": "lift", "_selected_action": [UserBan.objects.get().pk]},
    )
    assert response.status_code == 302 and UserBan.objects.get().lifted_at is not None


COMMANDS = [
    "addpremium", "delpremium", "premiumusers", "ban", "unban", "banlist", "users", "genlink", "broadcast", "pbroadcast",
    "autodelete",
]  # fmt: skip


@fuzz(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), arguments=st.text(max_size=40))
def test_any_arguments_get_one_reply_and_never_fail(box, command, arguments):
    said(box, "1001: /start")
    line = f"/{command} {arguments}".strip()
    if not line.strip() or "\n" in line or "\r" in line:
        return
    out = said(box, f"1000: {line}")
    (reply,) = out.texts(1000)
    assert reply and SORRY not in reply


def test_bot_settings_refuse_a_bad_channel_post_button_or_marker(admin_client, plain_http):
    from botapp.models import BotSettings

    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = admin_client.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    response = admin_client.post(url, {**data, "channel_post_button": "Join us", "channel_post_marker": "two words"})
    errors = response.context["adminform"].form.errors
    assert "channel_post_button" in errors and "channel_post_marker" in errors
    response = admin_client.post(
        url, {**data, "channel_post_button": "Join | https://t.me/+news", "premium_button_url": "https://x.example/p"}
    )
    assert response.status_code == 302
    conf = BotSettings.load()
    assert (conf.channel_post_button, conf.premium_button_url) == ("Join | https://t.me/+news", "https://x.example/p")


def test_help_lists_the_admin_commands_for_admins_only(box):
    (admin_help,) = said(box, "1000: /help").texts(1000)
    assert admin_help.startswith("Open a file link") and "Admin commands" in admin_help and "/broadcast" in admin_help
    assert "/ban <user id>" in admin_help  # as Telegram shows the HTML
    (user_help,) = said(box, "1001: /help").texts(1001)
    assert "Admin commands" not in user_help and "/ban" not in user_help


def test_an_admins_plain_text_is_told_how_to_broadcast_it(box):
    assert said(box, "1000: Big news today").texts(1000) == [
        "To send this to every active user, reply to it with /broadcast (/pbroadcast pins it). "
        "Files and forwarded storage-channel posts are stored. /help lists the admin commands."
    ]
    assert said(box, "1001: Big news today").texts(1001) == [UNKNOWN]
    assert said(box, "1000: /nosuchcommand").texts(1000) == [UNKNOWN]


def test_autodelete_sets_the_deletion_time_from_the_bot_and_refuses_what_telegram_cannot_do(box, stored):
    """The file-store bot's deletion time was "configurable via admin bot" (shared/seeds/001)."""
    link = f"1001: /start {stored.share_id}"
    said(box, "1001: /start")
    assert said(box, "1000: /autodelete").texts(1000) == [
        "Files are deleted 30 min after delivery. Usage: /autodelete <minutes or duration>, e.g. /autodelete 30, "
        "/autodelete 2h, /autodelete off (never)."
    ]
    for bad, reply in (
        ("soon", "soon is not a time. Usage: /autodelete"),
        ("3d", "At most 48 hours (2880 minutes): Telegram lets a bot delete its messages for 48 hours."),
        ("-5", "-5 is not a time."),
    ):
        assert said(box, f"1000: /autodelete {bad}").texts(1000)[0].startswith(reply), bad
    assert BotSettings.load().auto_delete_minutes == 30
    assert said(box, "1001: /autodelete 1m").texts(1001) == [UNKNOWN]
    assert BotSettings.load().auto_delete_minutes == 30

    assert said(box, "1000: /autodelete 2h").texts(1000) == ["🗑 Files delivered from now on are deleted 2 h after delivery."]
    assert BotSettings.load().auto_delete_minutes == 120
    assert len(said(box, link).to(1001, "copy")) == 2
    assert said(box, "wait 1h59m").to(1001, "delete") == []
    assert said(box, "wait 2m").to(1001, "delete")

    assert said(box, "1000: /autodelete off").texts(1000) == [
        "🗑 Auto-delete is off: files delivered from now on stay in users' chats."
    ]
    assert BotSettings.load().auto_delete_minutes == 0
    assert said(box, "1000: /autodelete 45").texts(1000) == ["🗑 Files delivered from now on are deleted 45 min after delivery."]
    assert list(AdminCommand.objects.filter(command="autodelete").order_by("id").values_list("arguments", "ok")) == [
        ("", True), ("soon", False), ("3d", False), ("-5", False), ("2h", True), ("off", True), ("45", True),
    ]  # fmt: skip
