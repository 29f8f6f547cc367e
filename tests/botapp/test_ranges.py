"""Every setting, duration and id has a range, checked where it comes in with a clear message: a
refused value changes nothing and cannot break what comes after it."""

import io
import logging
import time
from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.config import ConfigError, bot_config_load
from botapp.models import BotSettings, UserBan
from botapp.models.ranges import VERIFICATION_HOURS_MAX
from offline.sandbox import setting_edit
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway, conf):
    return sandbox(telegram, bot, gateway)


def test_a_negative_ban_duration_is_refused_and_the_ban_in_force_stays(box):
    said(box, "1001: /start", "1000: /ban 1001 1h")
    until = UserBan.objects.get().until
    for word in ("-5h", "+2d", "10", "0h"):
        out = said(box, f"1000: /ban 1001 {word} spam")
        assert out.texts(1000)[0].startswith(f"{word} is not a duration."), word
    ban = UserBan.objects.get(lifted_at__isnull=True)
    assert ban.until == until  # not replaced by a ban "until /unban"


@pytest.mark.parametrize(
    "field, too_big, most",
    [
        ("verification_hours", 2147483647, VERIFICATION_HOURS_MAX),
        ("token_ttl_minutes", 10081, 10080),
        ("daily_token_limit", 1001, 1000),
        ("bypass_seconds", 3601, 3600),
    ],
)
def test_each_setting_has_a_range_the_sandbox_and_the_admin_enforce(field, too_big, most, admin_client, settings, plain_http):
    before = getattr(BotSettings.load(), field)
    assert setting_edit(field=field, value=str(too_big)) == f"Ensure this value is less than or equal to {most}."
    assert getattr(BotSettings.load(), field) == before
    assert setting_edit(field=field, value=str(most)) == ""

    url = reverse("admin:botapp_botsettings_change", args=[1])
    form = admin_client.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    response = admin_client.post(url, data | {field: str(too_big)})
    assert response.context["adminform"].form.errors[field] == [f"Ensure this value is less than or equal to {most}."]


def test_the_longest_verification_still_verifies(box, conf, stored, shortener):
    setting_edit(field="verification_enabled", value="yes")
    assert setting_edit(field="verification_hours", value=str(VERIFICATION_HOURS_MAX)) == ""
    box.links = shortener.follow
    out = said(box, f"1001: /start {stored.share_id}", "wait 30s", "1001 tap Verify")
    assert "✅ You are verified for 365 days." in out.texts(1001)


@pytest.mark.parametrize(
    "field, value",
    [("backup_channel_id", "-1"), ("backup_channel_id", "-9999999999999999"), ("legacy_channel_id", "-5000000000000")],
)
def test_channel_ids_out_of_telegrams_range_are_refused(field, value):
    assert "A channel id looks like -1001234567890: from -1997852516352 to -1000000000001" in setting_edit(
        field=field, value=value
    )


@pytest.mark.parametrize(
    "variables, problem",
    [
        ({"STORAGE_CHANNEL_ID": "-1"}, "STORAGE_CHANNEL_ID must be a channel id like -1001234567890"),
        ({"BROADCAST_CHANNEL_ID": "-99999999999999999999"}, "BROADCAST_CHANNEL_ID must be a channel id"),
        ({"ADMIN_IDS": "1001,0"}, "ADMIN_IDS: 0 is not a Telegram user id"),
        ({"ADMIN_IDS": "99999999999999999999"}, "ADMIN_IDS: 99999999999999999999 is not a Telegram user id"),
    ],
)
def test_ids_in_the_environment_are_checked_at_start(settings, variables, problem):
    settings.TELEGRAM_OFFLINE = True
    for name, value in variables.items():
        setattr(settings, name, value)
    with pytest.raises(ConfigError) as refused:
        bot_config_load()
    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems


# --- the sandbox -----------------------------------------------------------------------------------------


def test_a_refused_wait_changes_nothing_and_later_lines_still_work(box):
    start = clock.now()
    for line in ("wait 2920000d", "wait 2910000d", "wait 36500d"):
        assert not box.feed(line)
        assert "that is too far" in box.out.getvalue().splitlines()[-1]
        assert abs(clock.now() - start) < timedelta(seconds=5)
    assert said(box, "wait 3000d", "1001: /start").texts(1001)[0].startswith("Hello User1001!")
    assert said(box, "1000: /addpremium 1001 100y").texts(1000)[0].startswith("⭐ 1001")
    assert not box.feed("wait 800d")  # past 2037: Telegram's dates end in 2038
    assert said(box, "1001: /start").texts(1001)[0].startswith("Welcome back, User1001!")  # known by now


def test_a_clock_move_past_the_calendar_leaves_the_clock_alone():
    before = clock.now()
    with pytest.raises(OverflowError):
        clock.clock_advance(timedelta(days=999_999_999))
    assert abs(clock.now() - before) < timedelta(seconds=5)


def test_an_album_of_eleven_is_refused_not_turned_into_a_caption(box, telegram):
    items = " ".join(f"photo:{c}.jpg" for c in "abcdefghijk")
    assert not box.feed(f"1000 sends album {items} Holiday")
    assert "an album holds at most 10 media" in box.out.getvalue()
    assert telegram.messages(1000) == []


def test_sandbox_logs_carry_the_sandbox_clock(monkeypatch, caplog):
    import sys

    from django.core.management import call_command

    monkeypatch.setattr(sys, "stdin", io.StringIO("wait 400d\n1001: /start\n"))
    logging.getLogger().addHandler(caplog.handler)  # as the console handler: the command stamps root's handlers
    try:
        with caplog.at_level(logging.INFO):
            call_command("sandbox", verbosity=2, stdout=io.StringIO())
    finally:
        logging.getLogger().removeHandler(caplog.handler)
    jobs = [r for r in caplog.records if r.name == "scheduler.jobs.registry"]  # they ran on `wait 400d`
    assert jobs and all(r.created > time.time() + timedelta(days=390).total_seconds() for r in jobs)
