"""Redeem codes: admins make codes (`/gencode`, the console, the API) that give premium; a user
redeems one with `/redeem <code>`.

Guarantees:
- a code has 80 random bits (16 characters of a 32-letter alphabet, shown as XXXX-XXXX-XXXX-XXXX);
  only its SHA-256 is stored, so it is shown once, when made, and a copy of the database gives
  none away;
- a code gives premium at most once per user, to at most `uses_max` users, until it expires:
  decided under the code's row lock, whatever races;
- a user's wrong codes are counted in PostgreSQL (RedeemThrottle); after `redeem_max_failures` of
  them the user may not redeem (not even a right code) for `redeem_cooloff_minutes`, so guessing
  is no way in; an expired or used-up code is a real code and does not count as a guess. The
  refusal in a cool-off costs one query and no hashing.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F

from botapp import clock
from botapp.models import BotSettings, PremiumPlan, RedeemCode, RedeemThrottle, Redemption, TelegramUser
from botapp.services.audit import audit_record
from botapp.services.growth_stats import growth_count
from botapp.services.premium import premium_grant

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # 32 letters, none mistaken for another (no I, O, 0, 1)
CODE_CHARS = 16  # 80 bits
CODES_MAX = 100  # codes per request
USES_MAX = 100_000
HINT = 4


class RedeemError(ValueError):
    """Input an admin can fix (a count or a use count out of range)."""


def code_normal(*, text: str) -> str:
    """A code as typed (any case, with or without dashes and spaces), as stored before hashing."""
    return "".join(ch for ch in text.upper() if ch not in "- \t")


def code_hash(*, code: str) -> str:
    """The SHA-256 (hex) of the code as typed, normalised: what is stored, and looked up."""
    return hashlib.sha256(code_normal(text=code).encode()).hexdigest()


def code_new() -> str:
    """A new code: CODE_CHARS random letters of ALPHABET (secrets), in groups of four."""
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_CHARS))
    return "-".join(raw[i : i + 4] for i in range(0, CODE_CHARS, 4))


@dataclass(frozen=True)
class MadeCode:
    code: str  # shown this once
    row: RedeemCode


def codes_generate(
    *, premium: timedelta, count: int = 1, uses: int = 1, valid_for: timedelta | None = None, by: str = ""
) -> list[MadeCode]:
    """`count` new codes, each giving `premium` to up to `uses` users until `valid_for` from now
    (default: Bot settings' `redeem_code_days`). RedeemError for a count or use count out of range."""
    if not 1 <= count <= CODES_MAX:
        raise RedeemError(f"Make 1 to {CODES_MAX} codes at a time.")
    if not 1 <= uses <= USES_MAX:
        raise RedeemError(f"A code can be used 1 to {USES_MAX} times.")
    if premium <= timedelta(0):
        raise RedeemError("The premium time must be more than nothing.")
    now = clock.now()
    expires = now + (valid_for or timedelta(days=BotSettings.load().redeem_code_days))
    made = []
    with transaction.atomic():
        for _ in range(count):
            code = code_new()
            row = RedeemCode.objects.create(
                code_hash=code_hash(code=code), hint=code[:HINT], premium=premium, uses_max=uses, expires_at=expires,
                created_at=now, created_by=by[:64],
            )  # fmt: skip
            made.append(MadeCode(code, row))
        audit_record(action="redeem.generate", detail=f"{count} code(s), {premium} of premium, {uses} use(s) each")
    return made


class Redeem(enum.Enum):
    REDEEMED = "redeemed"
    WRONG = "wrong"  # no such code (counted as a guess)
    COOLING = "cooling"  # too many wrong codes: not even a right one until the cool-off ends
    EXPIRED = "expired"
    USED_UP = "used_up"
    ALREADY = "already"  # this user redeemed this code before


@dataclass(frozen=True)
class Redeemed:
    result: Redeem
    plan: PremiumPlan | None = None
    code: RedeemCode | None = None
    until: datetime | None = None  # the cool-off's end
    tries_left: int | None = None


def code_redeem(*, user: TelegramUser, text: str, conf: BotSettings | None = None) -> Redeemed:
    """The user sent `text` to /redeem: the outcome (see Redeem)."""
    conf = conf or BotSettings.load()
    now = clock.now()
    throttle = RedeemThrottle.objects.filter(user=user).first()
    if throttle is not None and throttle.blocked_until is not None and throttle.blocked_until > now:
        return Redeemed(Redeem.COOLING, until=throttle.blocked_until)
    with transaction.atomic():
        code = RedeemCode.objects.select_for_update().filter(code_hash=code_hash(code=text)).first()
        if code is None:
            return _wrong(user, conf, now)
        if code.expires_at <= now:
            return Redeemed(Redeem.EXPIRED, code=code)
        if Redemption.objects.filter(code=code, user=user).exists():
            return Redeemed(Redeem.ALREADY, code=code)
        if code.uses >= code.uses_max:
            return Redeemed(Redeem.USED_UP, code=code)
        plan = premium_grant(user=user, duration=code.premium)
        try:
            with transaction.atomic():
                Redemption.objects.create(code=code, user=user, redeemed_at=now, plan=plan)
        except IntegrityError:  # cannot happen under the code's lock; refused rather than granted twice
            transaction.set_rollback(True)
            return Redeemed(Redeem.ALREADY, code=code)
        RedeemCode.objects.filter(pk=code.pk).update(uses=F("uses") + 1)
        growth_count(kind="redeem")
    return Redeemed(Redeem.REDEEMED, plan=plan, code=code)


def _wrong(user: TelegramUser, conf: BotSettings, now: datetime) -> Redeemed:
    """One more wrong code for the user (a fresh count once a cool-off has passed): one upsert
    under the throttle row's lock; past the limit, the cool-off starts."""
    throttle, _ = RedeemThrottle.objects.select_for_update().get_or_create(user=user, defaults={"window_started_at": now})
    if throttle.blocked_until is not None and throttle.blocked_until <= now:
        throttle.failures, throttle.window_started_at, throttle.blocked_until = 0, now, None
    throttle.failures += 1
    left = conf.redeem_max_failures - throttle.failures
    if left <= 0:
        throttle.blocked_until = now + timedelta(minutes=conf.redeem_cooloff_minutes)
        audit_record(action="redeem.cooloff", target=user, detail=f"{throttle.failures} wrong codes")
    throttle.save()
    if throttle.blocked_until is not None:
        return Redeemed(Redeem.COOLING, until=throttle.blocked_until, tries_left=0)
    return Redeemed(Redeem.WRONG, tries_left=left)


def codes_listing(*, limit: int = 50) -> list[RedeemCode]:
    """The newest codes with who redeemed them (prefetched)."""
    return list(RedeemCode.objects.prefetch_related("redemptions__user").order_by("-created_at")[:limit])
