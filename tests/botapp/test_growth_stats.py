"""/stats and the day totals of growth events (issue 45, scope 6): verifications by step,
referrals, redemptions; limit hits once the fair-use code registers where they are read."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.services.growth_stats import growth_count, growth_counts
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway):
    return sandbox(telegram, bot, gateway)


def test_stats_shows_verifications_by_step_referrals_and_redemptions(box, conf):
    for kind, n in (("verify1", 4), ("verify2", 2), ("verify3", 1), ("bypass", 3), ("ban", 1), ("referral", 5)):
        growth_count(kind=kind, by=n)
    growth_count(kind="referral_held")
    growth_count(kind="redeem", by=2)
    (text,) = said(box, "1000: /stats").texts(1000)
    assert "Verifications by step: 1st 4, 2nd 2, 3rd 1 (3 bypasses, 1 bans)" in text
    assert "Referrals: 5 counted, 1 held for review" in text and "Codes redeemed: 2" in text
    assert "Limit hits: 0" in text

    growth_count(kind="limit_hit", by=7)
    assert "Limit hits: 7" in said(box, "1000: /stats").texts(1000)[0]
    assert said(box, "1001: /stats").texts(1001) == ["I did not understand that. Send /help to see what I can do."]


def test_day_totals_are_per_calendar_day_and_unknown_kinds_are_refused(db):
    growth_count(kind="verify1")
    clock.clock_advance(timedelta(days=1))
    growth_count(kind="verify1", by=2)
    days = growth_counts(days=2)
    assert [d["verify1"] for d in days.values()] == [1, 2]
    with pytest.raises(ValueError):
        growth_count(kind="verify4")
