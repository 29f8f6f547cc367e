"""Fair use: per-user limits, told once, escalating to a ban; admins never limited; the counts in
Redis, shared by every process."""

import re
from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import UserBan
from botapp.services.growth_stats import growth_counts
from botapp.telegram import quotas as quotas_module
from botapp.telegram.gateway import TgUser
from botapp.telegram.quotas import RedisQuotas, Window
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db

WAIT = re.compile(r"Try again in (\d+) s\b")


@pytest.fixture
def fair(conf, prefix, monkeypatch):
    """Fair use on, with small limits, its counts under this test's own Redis prefix."""
    monkeypatch.setattr(quotas_module.quotas(), "prefix", prefix)
    conf.fair_use_enabled = True
    conf.fair_use_commands_per_minute = 3
    conf.fair_use_deliveries_per_minute = 2
    conf.fair_use_deliveries_per_day = 4
    conf.fair_use_strikes = 2
    conf.save()
    return conf


def sent(events) -> list[str]:
    return [e.text for e in events if e.action in ("send", "copy")]


@pytest.fixture
def slowly(chat):
    """As `chat`, a second after the last message: no faster than a chat is answered (PACE)."""

    def send(user, text):
        clock.clock_advance(timedelta(seconds=1.1))
        return chat(user, text)

    return send


def test_a_user_over_their_messages_a_minute_is_told_once_when_to_come_back_and_answered_after(slowly, alice, fair):
    for _ in range(3):
        assert sent(slowly(alice, "/help"))
    (told,) = sent(slowly(alice, "/help"))
    assert "at most 3 messages a minute" in told
    assert 55 <= int(WAIT.search(told).group(1)) <= 58
    for command in ("/help", "/about", "hello", "/start"):
        assert slowly(alice, command) == []  # not told again in the same window
    assert growth_counts(days=1)[clock.today()]["limit_hit"] == 1  # the dashboard's and /stats' limit hits: once
    clock.clock_advance(timedelta(seconds=61))
    assert sent(slowly(alice, "/help"))


def test_messages_faster_than_a_chat_is_answered_are_dropped_told_once_a_minute_and_never_a_strike(chat, alice, fair):
    fair.fair_use_commands_per_minute = 100
    fair.save()
    assert all(sent(chat(alice, "/help")) for _ in range(2))  # a message and another right after
    (told,) = sent(chat(alice, "/help"))
    assert told.startswith("⏳ One message at a time, please")
    assert chat(alice, "/help") == []
    clock.clock_advance(timedelta(seconds=2))
    assert sent(chat(alice, "/help"))  # one a second again
    for _ in range(10):
        chat(alice, "/help")
    clock.clock_advance(timedelta(seconds=61))
    assert [sent(chat(alice, "/help")) for _ in range(3)][2][0].startswith("⏳ One message")  # a minute on: told again
    assert not UserBan.objects.exists()


def test_admins_are_never_limited(chat, fair):  # neither their pace nor their count
    admin = TgUser(id=ADMIN, first_name="Admin")
    assert all(sent(chat(admin, "/help")) for _ in range(10))


def test_with_fair_use_off_nobody_is_limited(chat, alice, fair):
    fair.fair_use_enabled = False
    fair.save()
    assert all(sent(chat(alice, "/help")) for _ in range(10))


def test_file_deliveries_are_limited_per_minute_and_per_day_each_told_once(slowly, alice, fair, stored):
    chat = slowly
    fair.fair_use_commands_per_minute = 100
    fair.save()
    link = f"/start {stored.share_id}"
    for _ in range(2):
        assert sent(chat(alice, link))[:2] == ["Report", "Read me"]
    (told,) = sent(chat(alice, link))
    assert "2 file links delivered in the last minute" in told and WAIT.search(told)
    assert chat(alice, link) == []
    clock.clock_advance(timedelta(seconds=61))
    for _ in range(2):
        assert sent(chat(alice, link))[:2] == ["Report", "Read me"]
    clock.clock_advance(timedelta(seconds=61))
    (told,) = sent(chat(alice, link))
    assert "4 file links delivered today" in told and "More from midnight" in told
    clock.clock_advance(timedelta(hours=1))
    assert chat(alice, link) == []  # still today: told already
    clock.clock_advance(clock.today_start() + timedelta(days=1, minutes=1) - clock.now())
    assert sent(chat(alice, link))[:2] == ["Report", "Read me"]


def test_being_told_again_and_again_bans_the_user_from_files_for_longer_each_time(chat, slowly, alice, fair, stored):
    def hit_the_limit() -> str:
        for _ in range(3):
            slowly(alice, "/help")
        (told,) = sent(slowly(alice, "/help"))
        clock.clock_advance(timedelta(seconds=61))
        return told

    assert "files cannot be sent" not in hit_the_limit()
    told = hit_the_limit()
    assert "🚫 You kept on after being told: files cannot be sent to you for 1 h." in told
    (ban,) = UserBan.objects.filter(user__telegram_id=alice.id)
    assert ban.reason.startswith("Fair use") and ban.until - ban.created_at == timedelta(hours=1)
    (notice,) = sent(chat(alice, f"/start {stored.share_id}"))
    assert "You are banned" in notice
    clock.clock_advance(timedelta(hours=1, minutes=1))
    assert sent(chat(alice, f"/start {stored.share_id}"))[:2] == ["Report", "Read me"]
    clock.clock_advance(timedelta(seconds=61))
    hit_the_limit()
    assert "for 6 h" in hit_the_limit()
    assert UserBan.objects.filter(user__telegram_id=alice.id).count() == 2


def test_the_counts_are_shared_by_every_process_and_kept_through_restarts(prefix):
    import redis
    from django.conf import settings

    def process() -> RedisQuotas:  # a process of its own: its own connection and script
        return RedisQuotas(redis.Redis.from_url(settings.REDIS_URL), prefix=prefix)

    now = clock.now().timestamp()
    window = [Window("messages", 60, 3)]
    assert [process().take(7, "messages", window, now=now + i) for i in range(3)] == [None] * 3
    refused = process().take(7, "messages", window, now=now + 3)
    assert refused is not None and refused.tell and refused.strikes == 1 and 56 < refused.retry_after <= 57
    again = process().take(7, "messages", window, now=now + 4)
    assert again is not None and not again.tell and again.strikes == 1
    assert process().take(7, "messages", window, now=now + 60.5) is None  # the first count aged out
    assert process().take(8, "messages", window, now=now + 4) is None  # another user's own counts


def test_runbot_handles_admins_first_then_users_it_has_not_heard_from_lately(router, alice):
    from botapp.telegram.gateway import IncomingMessage

    def message(user) -> IncomingMessage:
        return IncomingMessage(message_id=1, chat_id=user.id, user=user, text="/start")

    admin, bob = TgUser(id=ADMIN, first_name="Admin"), TgUser(id=2002, first_name="Bob")
    assert router.update_priority(message(alice)) == 1  # never heard from
    assert router.update_priority(message(alice)) == 2  # again within seconds: behind new users
    assert router.update_priority(message(bob)) == 1
    assert router.update_priority(message(admin)) == router.update_priority(message(admin)) == 0
    assert router.update_priority(None) == 1  # an event that is no user's (a channel post)
