"""Referrals (issue 45, scope 4): a link per user, a new user counted once and only after the
gates, N referrals give premium with the referrer told, bursts of new accounts held for review."""

import re
from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import GrowthCount, PremiumPlan, Referral, TelegramUser
from botapp.services.referrals import referral_decide, referral_gates_passed, referral_record, referrers_top
from botapp.services.users import user_seen
from botapp.telegram.gateway import TgUser
from tests.factories import ForceSubChannelFactory, TelegramUserFactory
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db

CHANNEL = -1002000000001


@pytest.fixture
def box(telegram, bot, gateway):
    return sandbox(telegram, bot, gateway)


@pytest.fixture
def rewards(conf):
    conf.referrals_needed = 2
    conf.referral_premium_hours = 72
    conf.save()
    return conf


def link_of(box, user_id):
    out = said(box, f"{user_id}: /refer")
    (text,) = out.texts(user_id)
    return re.search(r"\?start=(ref_\w+)", text)[1], text


def growth(kind):
    row = GrowthCount.objects.filter(kind=kind).first()
    return row.count if row else 0


def test_a_referral_counts_once_and_two_give_premium_to_the_referrer_who_is_told(box, rewards, stored):
    payload, text = link_of(box, 1001)
    assert f"https://t.me/CourierBot?start={payload}" in text and "Friends counted: 0" in text
    assert "Every 2 friends who join give you 3 days of premium: 2 to go." in text

    out = said(box, f"2001: /start {payload}")
    assert out.texts(2001) == ["Hello User2001! I deliver files shared through my links."]  # the welcome, as for any new user
    out = said(box, "wait 1m")  # the worker tells the referrer
    assert out.texts(1001) == ["🎉 A friend joined through your link: 1 of 2 for 3 days of premium."]

    said(box, f"2001: /start {payload}", "2001: /stop", f"2001: /start {payload}")  # the same friend again
    said(box, f"1001: /start {payload}")  # their own link
    said(box, "1500: /start", f"1500: /start {payload}")  # not new when they came through the link
    assert Referral.objects.count() == 1 and growth("referral") == 1

    out = said(box, f"2002: /start {payload}", "wait 1m")
    assert out.texts(1001) == [
        "🎉 2 friends joined through your link: you get 3 days of premium (file links need no verification)."
    ]
    plan = PremiumPlan.objects.get(user__telegram_id=1001)
    assert plan.ends_at - plan.starts_at == timedelta(hours=72)
    assert "⭐ Premium until" in said(box, "1001: /myplan")
    _, text = link_of(box, 1001)
    assert "Friends counted: 2" in text and "2 to go" in text
    assert len(out.to(1001)) == 1  # told once, however many runs of the job
    assert said(box, "wait 2m").texts(1001) == []

    out = said(box, f"2003: /start {stored.share_id}")  # file links work as before
    assert len(out.to(2003, "copy")) == 2


def test_a_referral_counts_only_after_the_referee_passes_the_gates(box, conf, telegram, shortener):
    conf.verification_enabled = True
    conf.save()
    telegram.create_channel(CHANNEL, title="News")
    ForceSubChannelFactory(chat_id=CHANNEL, title="News", invite_link="https://t.me/+news")
    box.links = shortener.follow
    payload, _ = link_of(box, 1001)

    out = said(box, f"2001: /start {payload}")
    assert out.texts(2001)[1] == "Please join our channel first, then tap Try again."
    said(box, "2001 tap 🔄 Try again")
    assert Referral.objects.get().status == "pending"
    telegram.join(CHANNEL, 2001)
    out = said(box, "2001 tap 🔄 Try again")
    assert out.texts(2001, "send")[0].startswith("To count for the friend who invited you, pass the check below once.")
    assert Referral.objects.get().status == "pending"
    out = said(box, "wait 1m", "2001 tap ✅ Verify")
    assert "✅ You are verified for 1 day." in out
    assert Referral.objects.get().status == "counted" and not TelegramUser.objects.get(telegram_id=2001).referral_pending


def test_a_later_file_link_counts_a_referee_who_skipped_the_prompt(box, conf, stored, shortener):
    conf.verification_enabled = True
    conf.save()
    box.links = shortener.follow
    payload, _ = link_of(box, 1001)
    said(box, f"2001: /start {payload}")  # the Verify prompt, ignored
    said(box, "wait 2h", f"2001: /start {stored.share_id}", "wait 1m", "2001 tap ✅ Verify")
    assert Referral.objects.get().status == "counted"


def test_imported_users_and_bots_never_count(box, conf):
    payload, _ = link_of(box, 1001)
    TelegramUserFactory(telegram_id=2001)  # imported from a previous bot: known already
    said(box, f"2001: /start {payload}")
    assert Referral.objects.count() == 0

    referrer = TelegramUser.objects.get(telegram_id=1001)
    bot_user, created = user_seen(tg=TgUser(id=2002, first_name="Bot", is_bot=True))
    assert created and referral_record(referee=bot_user, code=payload[4:], is_bot=True) is None
    assert referral_record(referee=referrer, code=payload[4:], is_bot=False) is None  # their own code
    assert Referral.objects.count() == 0


def test_a_referral_payload_that_is_no_ones_is_a_campaign_tag(box, conf):
    out = said(box, "2001: /start ref_ABCDEFGHJK")
    assert out.texts(2001) == ["Hello User2001! I deliver files shared through my links."]
    assert TelegramUser.objects.get(telegram_id=2001).start_payload == "ref_ABCDEFGHJK"
    assert Referral.objects.count() == 0


def test_a_burst_of_new_accounts_is_held_for_review_then_approved_or_rejected(box, rewards):
    rewards.referral_hold_count = 3
    rewards.referral_hold_minutes = 10
    rewards.save()
    payload, _ = link_of(box, 1001)
    for n in range(4):  # four new accounts within four minutes
        said(box, f"{2001 + n}: /start {payload}", "wait 1m")
    statuses = dict(Referral.objects.values_list("referee__telegram_id", "status"))
    assert statuses == {2001: "counted", 2002: "counted", 2003: "held", 2004: "held"}
    assert growth("referral_held") == 2 and growth("referral") == 2
    said(box, "wait 30m", f"2005: /start {payload}")  # apart from the burst: counted
    assert Referral.objects.get(referee__telegram_id=2005).status == "counted"

    held = list(Referral.objects.filter(status="held").order_by("pk"))
    assert referral_decide(referral_id=held[0].pk, approve=True, by="operator").status == "counted"
    assert referral_decide(referral_id=held[1].pk, approve=False, by="operator").status == "rejected"
    assert referral_decide(referral_id=held[1].pk, approve=True, by="operator") is None  # decided already
    assert Referral.objects.filter(status="counted").count() == 4
    assert PremiumPlan.objects.get(user__telegram_id=1001).ends_at - clock.now() > timedelta(hours=143)  # two rewards
    ((top, counted, held_now),) = referrers_top()
    assert (top.telegram_id, counted, held_now) == (1001, 4, 0)


def test_the_gates_check_costs_no_query_for_a_user_never_referred(django_assert_num_queries, conf):
    user = TelegramUserFactory()
    with django_assert_num_queries(0):
        assert referral_gates_passed(user=user, conf=conf) is None
