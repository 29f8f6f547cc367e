"""Premium users skip verification (and, if so set, force-subscribe) until their plan ends; the
expiry job tells them. Sandbox transcripts through runbot's client (the bot fixture)."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from botapp import clock
from botapp.models import AdminCommand, PremiumPlan, TelegramUser
from botapp.services.premium import duration_parse, premium_grant
from scheduler.jobs.registry import job_run
from tests.factories import ForceSubChannelFactory, PremiumPlanFactory
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db

CHANNEL = -1002000000001


@pytest.fixture
def box(telegram, bot, gateway):
    return sandbox(telegram, bot, gateway)


@pytest.fixture
def verify_on(conf):
    conf.verification_enabled = True
    conf.premium_text = "Premium members skip verification."
    conf.premium_button_url = "https://example.com/premium"
    conf.save()
    return conf


def copies(out, user_id):
    return out.to(user_id, "copy")


def test_a_premium_user_gets_files_without_verify_and_verify_again_after_expiry(box, telegram, stored, verify_on):
    link = f"1001: /start {stored.share_id}"
    out = said(box, link)
    assert "Verify once to get your files" in out and out.buttons(1001) == [["✅ Verify"], ["⭐ Get premium"]]
    assert "Premium members skip verification." in out
    assert copies(out, 1001) == []

    out = said(box, "1000: /addpremium 1001 30d")
    until = f"{clock.now() + timedelta(days=30):%Y-%m-%d %H:%M}"
    assert f"1001 (@user1001) is premium until {until}" in out
    assert "You are premium until" in out  # the user is told

    out = said(box, link)
    assert len(copies(out, 1001)) == 2 and "Verify" not in out
    out = said(box, "1001: /myplan")
    assert "⭐ Premium until" in out and "(30 days left)" in out

    out = said(box, "wait 30d1m")
    assert [r["text"] for r in out.to(1001, "send") if "premium" in r["text"]] == [
        "⭐ Your premium plan has ended. File links ask you to verify again.\n\nPremium members skip verification."
    ]
    assert "job end_premium_plans: 1 processed, 0 failed" in out
    assert PremiumPlan.objects.get().status == "ended"

    out = said(box, link)
    assert "Verify once to get your files" in out and copies(out, 1001) == []
    assert "You are on the free plan." in said(box, "1001: /myplan")


def test_premium_ends_at_its_time_even_before_the_job_runs(box, stored, verify_on):
    said(box, "1001: /start", "1000: /addpremium 1001 12h")
    clock.clock_advance(timedelta(hours=12, seconds=1))
    assert "Verify once" in said(box, f"1001: /start {stored.share_id}")
    assert PremiumPlan.objects.get().status == "active"  # the job has not run: the gate did not wait for it


def test_adding_premium_to_a_premium_user_extends_the_plan(db):
    user = PremiumPlanFactory().user
    plan = premium_grant(user=user, duration=timedelta(days=10))
    assert PremiumPlan.objects.count() == 1
    assert plan.ends_at - plan.starts_at == timedelta(days=40)
    assert TelegramUser.objects.get(pk=user.pk).premium_until == plan.ends_at


def test_premium_skips_force_subscribe_only_when_bot_settings_say_so(box, telegram, stored, verify_on):
    telegram.create_channel(CHANNEL, title="News")
    ForceSubChannelFactory(chat_id=CHANNEL, title="News", invite_link="https://t.me/+news")
    said(box, "1001: /start", "1000: /addpremium 1001 1y")
    assert "Please join our channel first" in said(box, f"1001: /start {stored.share_id}")

    verify_on.premium_skips_force_subscribe = True
    verify_on.save()
    out = said(box, f"1001: /start {stored.share_id}")
    assert "Please join our channel first" not in out and len(copies(out, 1001)) == 2


def test_delpremium_ends_the_plan_now_and_premiumusers_lists_the_plans(box, stored, verify_on):
    said(box, "1001: /start", "1002: /start", "1000: /addpremium 1001 30d", "1000: /addpremium 1002 2h")
    out = said(box, "1000: /premiumusers")
    assert "Premium users: 2" in out
    (listing,) = [r["text"] for r in out.to(1000)]
    assert listing.index("1002 (@user1002)") < listing.index("1001 (@user1001)")  # soonest end first
    out = said(box, "1000: /delpremium 1001")
    assert "Premium of 1001 (@user1001) ended." in out and "ended by an admin" in out
    assert PremiumPlan.objects.get(user__telegram_id=1001).status == "revoked"
    assert "Verify once" in said(box, f"1001: /start {stored.share_id}")
    assert list(AdminCommand.objects.order_by("id").values_list("command", "ok")) == [
        ("addpremium", True),
        ("addpremium", True),
        ("premiumusers", True),
        ("delpremium", True),
    ]


def test_durations():
    assert duration_parse(text="30d") == timedelta(days=30)
    assert duration_parse(text="12h") == timedelta(hours=12)
    assert duration_parse(text="1y") == timedelta(days=365)
    assert duration_parse(text="1d12h") == timedelta(days=1, hours=12)
    assert duration_parse(text="2W") == timedelta(weeks=2)
    for bad in ("", "30", "d", "3x", "0d", "-1d", "101y", "1.5d", "30 d", "9999999d"):
        assert duration_parse(text=bad) is None, bad


def test_the_expiry_job_tells_each_user_once_and_not_users_who_stopped(telegram, gateway, db):
    from tests.factories import met_user

    told, stopped = met_user(telegram), met_user(telegram, state="stopped")
    for user in (told, stopped):
        PremiumPlanFactory(user=user, ends_at=clock.now() + timedelta(hours=1))
    out = io.StringIO()
    call_command("end_premium_plans", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "end_premium_plans: dry run: 0 processed, 0 failed (premium plans past their end)"
    clock.clock_advance(timedelta(hours=2))

    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)
    assert (outcome.processed, outcome.failed) == (2, 0)
    assert [m.text for m in telegram.bot_messages(told.telegram_id)] == [
        "⭐ Your premium plan has ended. File links ask you to verify again."
    ]
    assert telegram.bot_messages(stopped.telegram_id) == []
    notices = dict(PremiumPlan.objects.values_list("user_id", "notice"))
    assert notices[told.pk].startswith("sent ") and notices[stopped.pk] == "not told: user is stopped"
    assert TelegramUser.objects.filter(premium_until__isnull=False).count() == 0
    assert job_run("end_premium_plans", trigger="test", gateway=gateway).processed == 0


@pytest.fixture
def impatient(monkeypatch):
    """The gateway waits half a second for an answer (less than kurigram's one-second pause before
    its own retry of a 500): a call answered INTERNAL, or whose answer is lost, ends with its
    outcome unknown."""
    from botapp.telegram import retry

    monkeypatch.setattr(retry, "CALL_TIMEOUT", 0.5)


@pytest.mark.parametrize("fault", ["lost answer", "INTERNAL"])
def test_a_premium_end_notice_of_unknown_outcome_is_sent_again_with_its_random_id_and_arrives_once(
    telegram, gateway, db, impatient, fault
):
    from inmemory_telegram.faults import LOSE_ANSWER
    from tests.factories import met_user

    user = met_user(telegram)
    PremiumPlanFactory(user=user, ends_at=clock.now() - timedelta(minutes=1))
    if fault == "lost answer":
        telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"})
    else:  # and again when the gateway asks again at once (botapp/telegram/kurigram.py, ASK_AGAIN_CODES)
        telegram.fail_next(fault, methods={"messages.SendMessage"}, times=2)

    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 0)
    assert [m.text for m in telegram.bot_messages(user.telegram_id)] == [
        "⭐ Your premium plan has ended. File links ask you to verify again."
    ]  # told, once: a lost answer's notice had arrived, and its repeat was refused
    assert PremiumPlan.objects.get().notice.startswith("sent ")


def test_a_premium_end_notice_whose_outcome_stays_unknown_is_given_up_after_its_repeats(telegram, gateway, db, impatient, caplog):
    from scheduler.jobs.premium_expiry import REPEATS
    from tests.factories import met_user

    user = met_user(telegram)
    PremiumPlanFactory(user=user, ends_at=clock.now() - timedelta(minutes=1))
    telegram.fail_next("INTERNAL", methods={"messages.SendMessage"}, times=1000)

    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 1)
    assert caplog.text.count("premium end notice of unknown outcome") == REPEATS  # each with the same random_id
    assert telegram.bot_messages(user.telegram_id) == []
    plan = PremiumPlan.objects.get()
    assert plan.status == "ended" and plan.notice.startswith("not told: ")


def _claimed_by_a_run_that_died(telegram):
    """(user, plan): a plan past its end, claimed by a run of the expiry job that was killed
    before it recorded the notice."""
    from botapp.services.premium import premium_plans_end_due
    from scheduler.jobs.sweep import LEASE
    from tests.factories import met_user

    user = met_user(telegram)
    PremiumPlanFactory(user=user, ends_at=clock.now() - timedelta(minutes=1))
    (plan,) = premium_plans_end_due(limit=10, lease=LEASE)
    return user, plan


def test_a_premium_end_notice_whose_run_died_before_sending_is_sent_by_a_later_run_once(telegram, gateway, db):
    from scheduler.jobs.sweep import LEASE

    user, _ = _claimed_by_a_run_that_died(telegram)
    assert PremiumPlan.objects.get().status == "ended"
    assert job_run("end_premium_plans", trigger="test", gateway=gateway).processed == 0  # its lease holds

    clock.clock_advance(LEASE + timedelta(seconds=1))
    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 0)
    assert [m.text for m in telegram.bot_messages(user.telegram_id)] == [
        "⭐ Your premium plan has ended. File links ask you to verify again."
    ]
    plan = PremiumPlan.objects.get()
    assert plan.notice.startswith("sent ") and plan.notice_lease_until is None
    clock.clock_advance(LEASE + timedelta(seconds=1))
    assert job_run("end_premium_plans", trigger="test", gateway=gateway).processed == 0  # told: never again


def test_a_premium_end_notice_whose_run_died_after_sending_is_not_sent_twice(telegram, gateway, db):
    from botapp.services.premium import ENDED_NOTICE
    from scheduler.jobs.sweep import LEASE

    user, plan = _claimed_by_a_run_that_died(telegram)
    gateway.send_text(user.telegram_id, ENDED_NOTICE, key=plan.key)  # delivered, then the run died

    clock.clock_advance(LEASE + timedelta(seconds=1))
    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 0)
    assert [m.text for m in telegram.bot_messages(user.telegram_id)] == [ENDED_NOTICE]  # refused as a repeat
    assert PremiumPlan.objects.get().notice.endswith("(an earlier attempt arrived)")


def test_a_premium_end_notice_whose_run_died_is_not_sent_past_the_random_id_window(telegram, gateway, db, settings):
    from botapp.services.premium import LAPSED_UNTOLD

    user, _ = _claimed_by_a_run_that_died(telegram)

    clock.clock_advance(timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW + 1))
    outcome = job_run("end_premium_plans", trigger="test", gateway=gateway)

    assert outcome.processed == 1
    assert telegram.bot_messages(user.telegram_id) == []
    assert PremiumPlan.objects.get().notice == LAPSED_UNTOLD


def test_the_expiry_job_wakes_when_a_notice_lease_runs_out(telegram, db):
    from scheduler.jobs.premium_expiry import premium_due_next
    from scheduler.jobs.sweep import LEASE

    _claimed_by_a_run_that_died(telegram)

    assert premium_due_next() == PremiumPlan.objects.get().ended_at + LEASE
