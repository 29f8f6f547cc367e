"""Expiring force-subscribe invite links: made by the bot, reused while valid, replaced near expiry."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from botapp import clock
from botapp.models import ForceSubChannel
from botapp.telegram.gateway import TgUser
from tests.factories import ForceSubChannelFactory

pytestmark = pytest.mark.django_db

NEWS = -1002000000001
BOB = TgUser(id=2002, first_name="Bob")
EXPORT = "messages.ExportChatInvite"


@pytest.fixture
def news(telegram, db):
    telegram.create_channel(NEWS, title="News")
    return ForceSubChannelFactory(chat_id=NEWS, title="News", invite_link="", invite_ttl_minutes=30)


def join_url(telegram, user):
    _, button = telegram.find_button(user.id, "Join News")
    return button.url


def files_in(events):
    return [e.text for e in events if e.action == "copy"]


def test_users_get_one_expiring_link_made_once_and_it_lets_them_in(chat, alice, conf, stored, news, telegram):
    chat(alice, f"/start {stored.share_id}")
    chat(BOB, f"/start {stored.share_id}")

    link = join_url(telegram, alice)
    assert link.startswith("https://t.me/+") and join_url(telegram, BOB) == link
    assert telegram.count(EXPORT) == 1  # stored and reused, not made per user
    (invite,) = telegram.channels[-1_000_000_000_000 - NEWS].invites.values()
    assert abs(invite.expire_date - (clock.now() + timedelta(minutes=30))) < timedelta(seconds=2)
    assert not invite.request_needed

    assert telegram.open_invite(link, alice) == "joined"
    assert files_in(chat.tap(alice, "🔄 Try again")) == ["Report", "Read me"]


def test_a_link_near_its_expiry_is_replaced_and_the_old_one_stops_working(chat, alice, conf, stored, news, telegram):
    chat(alice, f"/start {stored.share_id}")
    first = join_url(telegram, alice)

    clock.clock_advance(timedelta(minutes=20))  # 10 of 30 minutes left: still shown
    chat(BOB, f"/start {stored.share_id}")
    assert join_url(telegram, BOB) == first

    clock.clock_advance(timedelta(minutes=3))  # 7 minutes left, under a quarter: a new one
    chat(BOB, f"/start {stored.share_id}")
    second = join_url(telegram, BOB)
    assert second != first and telegram.count(EXPORT) == 2
    news.refresh_from_db()
    assert news.current_link == second

    clock.clock_advance(timedelta(minutes=8))
    assert telegram.open_invite(first, alice) == "expired"
    assert telegram.open_invite(second, alice) == "joined"


def test_join_request_mode_makes_links_that_ask_to_join(chat, alice, conf, stored, news, telegram, bot):
    news.join_request = True
    news.save()
    chat(alice, f"/start {stored.share_id}")
    link = join_url(telegram, alice)
    assert telegram.channels[-1_000_000_000_000 - NEWS].invites[link].request_needed

    assert telegram.open_invite(link, alice) == "requested"
    bot.pump.process()  # runbot hears of the join request
    assert files_in(chat.tap(alice, "🔄 Try again")) == ["Report", "Read me"]


def test_when_telegram_refuses_a_link_the_fixed_one_is_shown(chat, alice, conf, stored, news, telegram):
    news.invite_link = "https://t.me/+fixed"
    news.save()
    telegram.fail_next("CHAT_ADMIN_REQUIRED", methods=[EXPORT])
    chat(alice, f"/start {stored.share_id}")
    assert join_url(telegram, alice) == "https://t.me/+fixed"
    assert ForceSubChannel.objects.get().current_link == ""


def test_a_channel_needs_a_fixed_link_or_expiring_ones():
    channel = ForceSubChannel(chat_id=NEWS, title="News", invite_link="", invite_ttl_minutes=0)
    with pytest.raises(ValidationError, match="invite link"):
        channel.full_clean()
    channel.invite_ttl_minutes = 60
    channel.full_clean()
