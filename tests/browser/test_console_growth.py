"""Verifications by step, referrals and redeem codes in the console (issue 45, scopes 4 to 6): the
dashboard's counts and top referrers, held referrals approved and rejected, codes made and shown once."""

import re
from datetime import timedelta

from botapp import clock
from botapp.models import RedeemCode, Referral, TelegramUser
from botapp.services.growth_stats import growth_count
from botapp.services.redeem import Redeem, code_redeem
from botapp.services.referrals import referral_code_for, referral_gates_passed, referral_record
from botapp.services.users import user_seen
from botapp.telegram.gateway import TgUser
from tests.factories import TelegramUserFactory


def referred(referrer, telegram_id):
    user, _ = user_seen(tg=TgUser(id=telegram_id, first_name=f"New{telegram_id}"))
    referral_record(referee=user, code=referral_code_for(user=referrer), is_bot=False)
    return referral_gates_passed(user=user)


def test_the_dashboard_counts_steps_referrals_and_codes_and_held_referrals_are_decided(logged_in):
    page = logged_in
    for kind, n in (("verify1", 5), ("verify2", 3), ("verify3", 1), ("redeem", 2)):
        growth_count(kind=kind, by=n)
    ann = TelegramUserFactory(username="ann", first_name="Ann")
    for n in range(7):  # seven new accounts within minutes: from the 5th on, held for review
        referred(ann, 9000 + n)
    assert Referral.objects.filter(status="held").count() == 3

    page.goto("/")
    today = {
        kind: page.locator(f"[data-growth={kind}] td").nth(1).inner_text()
        for kind in ("verify1", "verify2", "verify3", "referral", "redeem")
    }
    assert today == {"verify1": "5", "verify2": "3", "verify3": "1", "referral": "4", "redeem": "2"}
    assert "4 counted, 3 held" in page.locator(f"[data-referrer='{ann.telegram_id}']").inner_text()
    assert page.locator("[data-growth=limit_hits] td").nth(1).inner_text() == "0"  # none told over a limit today

    page.locator("#referrals-held a").click()
    page.wait_for_url("**/botapp/referral/?status__exact=held")
    rows = page.get_by_role("row").filter(has_text="Held for review")
    rows.first.wait_for()
    assert rows.count() == 3
    rows.nth(0).get_by_role("checkbox").check()
    page.locator("select[name=action]").select_option(label="Approve the selected held referrals (they count)")
    page.get_by_role("button", name="Run").click()
    page.get_by_text("1 referral(s) approved.").wait_for()
    page.get_by_role("row").filter(has_text="Held for review").nth(0).get_by_role("checkbox").check()
    page.locator("select[name=action]").select_option(label="Reject the selected held referrals (they never count)")
    page.get_by_role("button", name="Run").click()
    page.get_by_text("1 referral(s) rejected.").wait_for()
    statuses = sorted(Referral.objects.values_list("status", flat=True))
    assert statuses == ["counted"] * 5 + ["held", "rejected"]


def test_codes_are_made_in_the_console_shown_once_and_listed_with_who_redeemed_them(logged_in):
    page = logged_in
    page.goto("/botapp/redeemcode/")
    page.get_by_role("link", name=re.compile("Make codes")).click()
    page.get_by_label("Premium time").fill("7x")
    page.get_by_role("button", name="Make the codes").click()
    page.get_by_text("Not a duration.").wait_for()
    page.get_by_label("Premium time").fill("14d")
    page.get_by_label("How many codes").fill("3")
    page.get_by_role("button", name="Make the codes").click()
    codes = page.locator("#codes").inner_text().split()
    assert len(codes) == 3 and "shown this once" in page.locator("#codes-note").inner_text()
    assert RedeemCode.objects.count() == 3

    user = TelegramUserFactory(username="redeemer", telegram_id=7777)
    assert code_redeem(user=user, text=codes[0]).result is Redeem.REDEEMED
    page.goto("/botapp/redeemcode/")
    row = page.get_by_role("row").filter(has_text=f"{codes[0][:4]}-…")
    assert "1/1" in row.inner_text() and "7777" in row.inner_text()
    assert all(code not in page.content() for code in codes)  # never shown again
    assert TelegramUser.objects.get(pk=user.pk).premium_until - clock.now() > timedelta(days=13)
