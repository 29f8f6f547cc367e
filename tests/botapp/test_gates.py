"""Access gates: forced subscription and token verification."""

import time
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from botapp import clock
from botapp.models import ChannelJoinRequest, DailyStat, DailyTokenCount, TelegramUser, VerificationToken
from botapp.services.stats import counters_flush
from botapp.telegram.gateway import TgUser
from tests.factories import ForceSubChannelFactory

pytestmark = pytest.mark.django_db

CHANNEL = -1002000000001
BOB = TgUser(id=2002, first_name="Bob")


@pytest.fixture
def channel(telegram, db):
    telegram.create_channel(CHANNEL, title="News")
    return ForceSubChannelFactory(chat_id=CHANNEL, title="News", invite_link="https://t.me/+news")


@pytest.fixture
def verify_on(conf):
    conf.verification_enabled = True
    conf.how_to_verify_url = "https://example.com/how"
    conf.save()
    return conf


def files_in(events):
    return [e.text for e in events if e.action == "copy"]


def token_from(telegram, shortener, user_id):
    _, button = telegram.find_button(user_id, "✅ Verify")
    link = shortener.follow(button.url)
    return parse_qs(urlparse(link).query)["start"][0].removeprefix("verify-")


def callback_answers(telegram):
    """(query id, text, alert) of every callback answer the bot sends, read from the request Telegram
    receives (the server's events do not say whether an answer is an alert)."""
    answers = []
    answer = telegram.methods["messages.SetBotCallbackAnswer"]

    def spy(server, query):
        answers.append((query.query_id, query.message or "", bool(query.alert)))
        return answer(server, query)

    telegram.methods = {**telegram.methods, "messages.SetBotCallbackAnswer": spy}
    return answers


# --- force-subscribe ----------------------------------------------------------------------------


def test_non_member_gets_join_buttons_and_try_again_rechecks_for_real(chat, alice, conf, stored, channel, telegram):
    answers = callback_answers(telegram)
    (prompt,) = chat(alice, f"/start {stored.share_id}")
    assert prompt.text.startswith("Please join our channel first")
    assert [[(b.text, b.url or b.callback_data) for b in row] for row in prompt.buttons] == [
        [("Join News", "https://t.me/+news")],
        [("🔄 Try again", f"retry:{stored.share_id}")],
    ]

    events = chat.tap(alice, "🔄 Try again")  # still not a member: an alert, no message
    assert [(e.action, e.chat_id, e.text) for e in events] == [("answer", alice.id, "You have not joined News yet.")]
    assert answers[-1][2] is True

    telegram.join(CHANNEL, alice.id)
    events = chat.tap(alice, "🔄 Try again")
    assert events[0].action == "delete" and events[0].message_ids == prompt.message_ids
    assert files_in(events) == ["Report", "Read me"]


def test_member_goes_straight_through(chat, alice, conf, stored, channel, telegram):
    telegram.join(CHANNEL, alice.id)
    assert files_in(chat(alice, f"/start {stored.share_id}")) == ["Report", "Read me"]


def test_join_request_counts_in_join_request_mode(chat, alice, conf, stored, channel, telegram, bot):
    channel.join_request = True
    channel.save()
    assert "join" in chat(alice, f"/start {stored.share_id}")[0].text

    telegram.request_join(CHANNEL, alice)  # runbot gets UpdateBotChatInviteRequester
    bot.pump.process()

    assert ChannelJoinRequest.objects.filter(user_id=alice.id).exists()
    assert files_in(chat(alice, f"/start {stored.share_id}")) == ["Report", "Read me"]


def test_disabled_or_unreachable_channels_do_not_lock_users_out(chat, alice, conf, stored, channel, telegram):
    telegram.create_channel(-1009000000009, title="Gone", bot_is_admin=False)  # the bot was removed from it
    ForceSubChannelFactory(chat_id=-1009000000009, title="Gone")
    channel.enabled = False
    channel.save()
    assert files_in(chat(alice, f"/start {stored.share_id}")) == ["Report", "Read me"]


# --- verification --------------------------------------------------------------------------------


def test_full_verification_journey(chat, alice, verify_on, stored, telegram, shortener):
    (prompt,) = chat(alice, f"/start {stored.share_id}")
    assert prompt.text.startswith("Verify once to get your files")
    assert [b.text for row in prompt.buttons for b in row] == ["✅ Verify", "ℹ️ How to verify"]
    verify_url = prompt.buttons[0][0].url
    assert verify_url.startswith("https://short.example/")
    target = shortener.follow(verify_url)
    assert target.startswith("https://t.me/CourierBot?start=verify-")
    token = VerificationToken.objects.get()
    assert target.endswith(token.token) and len(token.token) >= 32  # >= 128 bits of randomness, url-safe
    assert token.share_id == stored.share_id and token.status == "pending"

    clock.clock_advance(timedelta(seconds=30))
    events = chat.tap(alice, "✅ Verify")

    assert events[0].text == "✅ You are verified for 1 day."
    assert files_in(events) == ["Report", "Read me"]
    token.refresh_from_db()
    assert token.status == "verified" and token.used_at is not None
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert abs(user.verified_until - clock.now() - timedelta(hours=24)) < timedelta(seconds=5)
    counters_flush()  # the day's counts wait as counter entries until the next flush
    assert user.verification_count == 1 and DailyStat.objects.get().verifications == 1

    # Verified: the next file comes without asking again.
    assert files_in(chat(alice, f"/start {stored.share_id}")) == ["Report", "Read me"]
    # ...until the verification runs out.
    clock.clock_advance(timedelta(hours=24, minutes=1))
    assert chat(alice, f"/start {stored.share_id}")[0].text.startswith("Verify once")


def test_coming_back_too_fast_is_a_bypass_and_repeats_escalate_to_bans(chat, alice, verify_on, stored, telegram, shortener):
    chat(alice, f"/start {stored.share_id}")
    clock.clock_advance(timedelta(seconds=5))
    events = chat.tap(alice, "✅ Verify")

    assert events[0].text.startswith("⚠️ You came back faster")
    assert files_in(events) == []
    assert VerificationToken.objects.get().status == "bypassed"
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert user.bypass_count == 1 and user.banned_until is None and user.verified_until is None
    counters_flush()
    assert DailyStat.objects.get().bypasses == 1

    chat(alice, f"/start {stored.share_id}")  # a new token
    events = chat.tap(alice, "✅ Verify")
    assert events[0].text.endswith("You are blocked for 1 h.")
    assert chat(alice, f"/start {stored.share_id}")[0].text.startswith("You are blocked for")

    verify_on.verification_enabled = False  # the operator turns verification off: bans no longer apply
    verify_on.save()
    assert files_in(chat(alice, f"/start {stored.share_id}")) == ["Report", "Read me"]
    verify_on.verification_enabled = True
    verify_on.save()

    clock.clock_advance(timedelta(hours=1, minutes=1))
    assert chat(alice, f"/start {stored.share_id}")[0].text.startswith("Verify once")


def test_token_refusals(chat, alice, verify_on, stored, telegram, shortener):
    assert chat(alice, "/start verify-")[0].text.startswith("This verification link is incomplete")
    assert chat(alice, "/start verify-nonexistenttoken")[0].text.startswith("This verification link is not valid")

    chat(BOB, f"/start {stored.share_id}")
    bobs = token_from(telegram, shortener, BOB.id)
    clock.clock_advance(timedelta(seconds=30))
    assert chat(alice, f"/start verify-{bobs}")[0].text.startswith("This verification link belongs to someone else")
    assert VerificationToken.objects.get(token=bobs).status == "pending"  # still Bob's to use

    chat(BOB, f"/start verify-{bobs}")
    assert chat(BOB, f"/start verify-{bobs}")[0].text.startswith("This verification link was already used. You are verified for")


def test_expired_unused_token_offers_a_new_one(chat, alice, verify_on, stored, telegram, shortener):
    chat(alice, f"/start {stored.share_id}")
    old = token_from(telegram, shortener, alice.id)
    clock.clock_advance(timedelta(minutes=61))

    (reply,) = chat(alice, f"/start verify-{old}")

    assert reply.text.startswith("This verification link has expired. Here is a new one:")
    new = token_from(telegram, shortener, alice.id)
    assert new != old
    clock.clock_advance(timedelta(seconds=30))
    assert files_in(chat(alice, f"/start verify-{new}")) == ["Report", "Read me"]


def test_a_pending_token_is_reused_not_counted_again(chat, alice, verify_on, stored, telegram, shortener):
    chat(alice, f"/start {stored.share_id}")
    first = token_from(telegram, shortener, alice.id)
    chat(alice, f"/start {stored.share_id}")
    assert token_from(telegram, shortener, alice.id) == first
    assert DailyTokenCount.objects.get().count == 1


def test_daily_token_limit_and_its_reset(chat, alice, verify_on, stored, telegram, settings):
    verify_on.daily_token_limit = 2
    verify_on.save()
    for _ in range(2):
        chat(alice, f"/start {stored.share_id}")
        clock.clock_advance(timedelta(minutes=61))  # the token expires unused

    (reply,) = chat(alice, f"/start {stored.share_id}")
    assert reply.text.startswith("You have used all 2 verification links for today. New ones from midnight, in ")
    assert VerificationToken.objects.count() == 2

    midnight = clock.today_start() + timedelta(days=1)
    clock.clock_advance(midnight - clock.now() + timedelta(minutes=1))
    assert chat(alice, f"/start {stored.share_id}")[0].text.startswith("Verify once")
    assert VerificationToken.objects.count() == 3


def test_admins_skip_the_gates(chat, verify_on, stored, channel):
    from tests.conftest import ADMIN

    assert files_in(chat(TgUser(id=ADMIN, first_name="Op"), f"/start {stored.share_id}")) == ["Report", "Read me"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_token_requests_share_one_pending_token():
    """A user tapping a file link many times at once (runbot answers updates on 16 threads) gets one
    token, counted once: the requests queue on the user's row instead of each finding no pending
    token and taking one of the day's five. The shortener's answer takes a moment, as a real one does."""
    from botapp.models import BotSettings
    from botapp.services.verification import token_issue
    from tests.concurrency import run_in_threads
    from tests.factories import TelegramUserFactory

    user, conf = TelegramUserFactory(), BotSettings.load()
    shortened = []

    def link(token):
        time.sleep(0.05)
        shortened.append(token)
        return f"https://short.example/{token}"

    issued = run_in_threads(lambda: token_issue(user=user, share_id="f1", conf=conf, link=link), n=20)

    assert {t.token for t in issued} == {VerificationToken.objects.get(user=user).token}
    assert {t.short_url for t in issued} == {f"https://short.example/{shortened[0]}"} and len(shortened) == 1
    assert DailyTokenCount.objects.get(user=user).count == 1
