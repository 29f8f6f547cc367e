"""Verification in steps: up to three verifications per period, each due a set gap after the one
before (Bot settings: `verify_second_gap_hours`, `verify_third_gap_hours`), each through its own
shortener when one is set.

A period starts with the first verification and lasts `verification_hours`. After step 1 the user
is verified until step 2 falls due (`verify_second_gap_hours` later), after step 2 until step 3
falls due, after the last step until the period ends; then a new period starts with step 1. A gap
that would end after the period ends is cut to the period's end (the next verification is step 1
of a new period). The user's `verified_until` is always the end of the current step, so the
delivery gate decides from the user's row alone, as before; where the user is in the period is a
row of its own (VerificationProgress), read only when steps are on and a Verify prompt is made,
and written under the token's row lock when a token is redeemed. Each step's token counts against
the daily token limit and is checked for bypass like any other (services/verification.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from botapp.models import BotSettings, TelegramUser, VerificationProgress
from botapp.services.shortener import shortener_for

STEP_NAMES = {1: "first", 2: "second", 3: "third"}


def steps_count(*, conf: BotSettings) -> int:
    """How many verifications a period asks for: 1 to 3."""
    if not conf.verify_second_gap_hours:
        return 1
    return 3 if conf.verify_third_gap_hours else 2


def _gap(conf: BotSettings, step: int) -> timedelta:
    """The gap before `step` (2 or 3)."""
    return timedelta(hours=(conf.verify_second_gap_hours if step == 2 else conf.verify_third_gap_hours) or 0)


def step_next(*, user: TelegramUser, conf: BotSettings, now: datetime) -> int:
    """The step the user's next verification is: 1 with steps off (no query), else from their progress."""
    if steps_count(conf=conf) == 1:
        return 1
    progress = VerificationProgress.objects.filter(user=user).first()
    return _next(progress, conf, now)


def _next(progress: VerificationProgress | None, conf: BotSettings, now: datetime) -> int:
    if progress is None or now >= progress.period_started_at + timedelta(hours=conf.verification_hours):
        return 1
    return min(progress.step + 1, steps_count(conf=conf)) if progress.step < steps_count(conf=conf) else 1


def step_pass(*, user: TelegramUser, conf: BotSettings, now: datetime) -> tuple[int, datetime]:
    """The user passed a verification at `now` (inside the redeeming transaction, the user's token
    locked): which step it was, and until when it verifies them. Writes their progress."""
    period = timedelta(hours=conf.verification_hours)
    if steps_count(conf=conf) == 1:  # no progress to keep: switched on later, the next is step 1
        return 1, now + period
    progress = VerificationProgress.objects.select_for_update().filter(user=user).first()
    step = _next(progress, conf, now)
    started = now if step == 1 else progress.period_started_at
    VerificationProgress.objects.update_or_create(
        user=user, defaults={"period_started_at": started, "step": step, "last_verified_at": now}
    )
    ends = started + period
    if step < steps_count(conf=conf):
        return step, min(now + _gap(conf, step + 1), ends)
    return step, ends


def step_shortener(*, conf: BotSettings, step: int, default):
    """The shortener of `step`: its own when Bot settings give it an API URL, else `default`."""
    url, key = {
        2: (conf.verify_second_shortener_url, conf.verify_second_shortener_key),
        3: (conf.verify_third_shortener_url, conf.verify_third_shortener_key),
    }.get(step, ("", ""))
    if url.strip():
        return shortener_for(api_url=url, api_key=key)
    return default
