"""Redeem codes (issue 45, scope 5): made by admins and shown once (only hashes kept), premium once
per user, expiring, listed with who redeemed them; wrong guesses end in a cool-off that even a
right code does not pass."""

import re
import threading
from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import AdminCommand, BotSettings, PremiumPlan, RedeemCode, RedeemThrottle, Redemption
from botapp.services.redeem import Redeem, code_hash, code_redeem, codes_generate
from tests.concurrency import run_in_threads
from tests.factories import TelegramUserFactory
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway):
    return sandbox(telegram, bot, gateway)


def codes_in(text):
    return re.findall(r"[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}", text)


def test_a_code_is_redeemed_once_refused_the_second_time_and_after_expiry(box, conf):
    out = said(box, "1000: /gencode 7d 2")
    (text,) = out.texts(1000)
    first, second = codes_in(text)
    assert text.startswith("🎟 2 code(s), each 7 days of premium for 1 user(s), valid until ")
    assert "Shown this once: only their hashes are kept." in text

    out = said(box, f"1001: /redeem {first.lower()}")  # any case, dashes or not
    assert out.texts(1001)[0].startswith("⭐ Code redeemed: 7 days of premium. You are premium until ")
    out = said(box, f"1001: /redeem {first}")
    assert out.texts(1001) == ["You have redeemed this code already: each code gives premium once per user."]
    out = said(box, f"1002: /redeem {first}")
    assert out.texts(1002) == ["This code has been used as many times as it may be."]
    assert PremiumPlan.objects.get(user__telegram_id=1001).ends_at - clock.now() <= timedelta(days=7)

    out = said(box, "wait 30d1m", f"1002: /redeem {second}")  # codes last 30 days (Bot settings)
    assert out.texts(1002) == ["This code has expired."]
    assert not PremiumPlan.objects.filter(user__telegram_id=1002).exists()

    # Only hashes are kept, and the record of the command names the codes by their first characters.
    assert {c.code_hash for c in RedeemCode.objects.all()} == {code_hash(code=first), code_hash(code=second)}
    record = AdminCommand.objects.get(command="gencode")
    assert first not in record.result and second not in record.result and f"{first[:4]}…" in record.result
    assert [r.user.telegram_id for r in Redemption.objects.all()] == [1001]


def test_gencode_refuses_bad_input_and_non_admins(box, conf):
    assert said(box, "1000: /gencode").texts(1000)[0].startswith("Usage: /gencode")
    assert said(box, "1000: /gencode 7x").texts(1000)[0].startswith("7x is not a duration.")
    assert said(box, "1000: /gencode 7d ten").texts(1000)[0].startswith("Usage: /gencode")
    assert said(box, "1000: /gencode 7d 101").texts(1000) == ["Make 1 to 100 codes at a time."]
    assert said(box, "1000: /gencode 7d 1 0").texts(1000) == ["A code can be used 1 to 100000 times."]
    assert said(box, "1001: /gencode 7d").texts(1001) == ["I did not understand that. Send /help to see what I can do."]
    assert said(box, "1001: /redeem").texts(1001) == ["Send the code after the command, like /redeem ABCD-EFGH-JKLM-NPQR."]
    assert RedeemCode.objects.count() == 0


def test_a_code_for_many_users_gives_each_premium_once(box, conf):
    (code,) = codes_in(said(box, "1000: /gencode 1d 1 3").texts(1000)[0])
    for user in (1001, 1002, 1003, 1004):
        said(box, f"{user}: /redeem {code}")
    assert sorted(Redemption.objects.values_list("user__telegram_id", flat=True)) == [1001, 1002, 1003]
    assert RedeemCode.objects.get().uses == 3


def test_ten_thousand_wrong_codes_are_refused_after_the_limit_and_a_right_one_waits_for_the_cool_off(conf):
    conf.redeem_max_failures = 5
    conf.redeem_cooloff_minutes = 60
    conf.save()
    conf = BotSettings.load()
    (right,) = codes_generate(premium=timedelta(days=1))
    user = TelegramUserFactory()
    results = [code_redeem(user=user, text=f"WRONG-{n:05d}", conf=conf).result for n in range(10_000)]
    assert results[:4] == [Redeem.WRONG] * 4 and set(results[4:]) == {Redeem.COOLING}
    assert RedeemThrottle.objects.get(user=user).failures == 5  # refusals in the cool-off are not even looked up

    refused = code_redeem(user=user, text=right.code, conf=conf)
    assert refused.result is Redeem.COOLING and not Redemption.objects.exists()
    assert refused.until - clock.now() <= timedelta(minutes=60)

    clock.clock_advance(timedelta(minutes=59))
    assert code_redeem(user=user, text=right.code, conf=conf).result is Redeem.COOLING
    clock.clock_advance(timedelta(minutes=1, seconds=1))
    assert code_redeem(user=user, text=right.code, conf=conf).result is Redeem.REDEEMED
    other = TelegramUserFactory()  # another user was never held back
    assert code_redeem(user=other, text="WRONG-00000", conf=conf).result is Redeem.WRONG


def test_the_cool_off_is_told_plainly_in_the_bot_and_survives_a_restart(box, conf):
    conf.redeem_max_failures = 2
    conf.save()
    out = said(box, "1001: /redeem AAAA-AAAA-AAAA-AAAA")
    assert out.texts(1001) == ["This code is not valid. Check it and try again (1 more wrong codes allowed)."]
    out = said(box, "1001: /redeem AAAA-AAAA-AAAA-AAAB")
    assert out.texts(1001) == ["Too many wrong codes. Try again in 1 h."]
    box.bot.stop()  # the count is in PostgreSQL: nothing of it was in runbot
    assert RedeemThrottle.objects.get(user__telegram_id=1001).blocked_until > clock.now()


@pytest.mark.django_db(transaction=True)
def test_racing_redemptions_of_a_one_use_code_give_it_once(conf):
    (made,) = codes_generate(premium=timedelta(days=1))
    users = iter([TelegramUserFactory() for _ in range(6)])
    lock = threading.Lock()

    def redeem():
        with lock:
            user = next(users)
        return code_redeem(user=user, text=made.code).result

    results = run_in_threads(redeem, n=6)
    assert results.count(Redeem.REDEEMED) == 1 and results.count(Redeem.USED_UP) == 5
    assert PremiumPlan.objects.count() == 1 and RedeemCode.objects.get().uses == 1
