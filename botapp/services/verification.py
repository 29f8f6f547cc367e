"""Token verification: a user proves they are human by passing a shortlink that carries a token.

Guarantees:
- a token has 192 random bits, belongs to one user and expires (`token_ttl_minutes`);
- a user creates at most `daily_token_limit` tokens per calendar day (TIME_ZONE); an unexpired
  pending token is reused rather than counted again;
- redeeming a token faster than `bypass_seconds` after it was issued is a bypass: the token is
  spent, nothing is granted, and repeated bypasses ban the user for longer and longer;
- a redeemed token verifies the user for `verification_hours`.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from botapp import clock
from botapp.models import BotSettings, DailyTokenCount, TelegramUser, VerificationToken
from botapp.services.stats import stat_increment

Status = VerificationToken.Status

# Bans after the 2nd, 3rd, 4th, 5th+ bypass; the first is a warning.
BYPASS_BANS = [timedelta(0), timedelta(hours=1), timedelta(hours=6), timedelta(hours=24), timedelta(days=7)]
TOKEN_PREFIX = "verify-"


def token_new() -> str:
    return secrets.token_urlsafe(24)  # 192 bits, 32 characters


def user_is_verified(user: TelegramUser, *, now: datetime | None = None) -> bool:
    return user.verified_until is not None and user.verified_until > (now or clock.now())


def user_ban_remaining(user: TelegramUser, *, now: datetime | None = None) -> timedelta | None:
    now = now or clock.now()
    if user.banned_until and user.banned_until > now:
        return user.banned_until - now
    return None


@dataclass
class LimitReached:
    resets_at: datetime  # the next local midnight


def token_issue(*, user: TelegramUser, share_id: str, conf: BotSettings) -> VerificationToken | LimitReached:
    """A token for this user (reusing their unexpired pending one), within the daily limit."""
    now = clock.now()
    with transaction.atomic():
        current = (
            VerificationToken.objects.select_for_update()
            .filter(user=user, status=Status.PENDING, expires_at__gt=now)
            .order_by("-created_at")
            .first()
        )
        if current is not None:
            if current.share_id != share_id:
                current.share_id = share_id
                current.save(update_fields=["share_id"])
            return current
        counter, _ = DailyTokenCount.objects.select_for_update().get_or_create(user=user, date=clock.today())
        if counter.count >= conf.daily_token_limit:
            return LimitReached(resets_at=clock.today_start() + timedelta(days=1))
        DailyTokenCount.objects.filter(pk=counter.pk).update(count=F("count") + 1)
        return VerificationToken.objects.create(
            token=token_new(),
            user=user,
            share_id=share_id,
            created_at=now,
            expires_at=now + timedelta(minutes=conf.token_ttl_minutes),
        )


class Redeem(enum.Enum):
    VERIFIED = "verified"
    BYPASSED = "bypassed"
    EMPTY = "empty"
    UNKNOWN = "unknown"
    NOT_YOURS = "not_yours"
    USED = "used"
    EXPIRED = "expired"


@dataclass
class Redeemed:
    result: Redeem
    token: VerificationToken | None = None
    ban: timedelta | None = None


def token_redeem(*, user: TelegramUser, token: str, conf: BotSettings) -> Redeemed:
    """The user came back through the shortlink with `token`."""
    now = clock.now()
    token = token.strip()
    if not token:
        return Redeemed(Redeem.EMPTY)
    with transaction.atomic():
        row = VerificationToken.objects.select_for_update().filter(token=token).first()
        if row is None:
            return Redeemed(Redeem.UNKNOWN)
        if row.user_id != user.pk:
            return Redeemed(Redeem.NOT_YOURS)
        if row.status != Status.PENDING:
            return Redeemed(Redeem.USED, row)
        if row.expires_at <= now:
            return Redeemed(Redeem.EXPIRED, row)
        row.used_at = now
        if now - row.created_at < timedelta(seconds=conf.bypass_seconds):
            row.status = Status.BYPASSED
            row.save(update_fields=["status", "used_at"])
            user.bypass_count += 1
            ban = BYPASS_BANS[min(user.bypass_count - 1, len(BYPASS_BANS) - 1)]
            if ban:
                user.banned_until = now + ban
            TelegramUser.objects.filter(pk=user.pk).update(bypass_count=F("bypass_count") + 1, banned_until=user.banned_until)
            stat_increment("bypasses")
            return Redeemed(Redeem.BYPASSED, row, ban=ban or None)
        row.status = Status.VERIFIED
        row.save(update_fields=["status", "used_at"])
        user.verified_until = now + timedelta(hours=conf.verification_hours)
        TelegramUser.objects.filter(pk=user.pk).update(
            verified_until=user.verified_until, verification_count=F("verification_count") + 1
        )
        stat_increment("verifications")
        return Redeemed(Redeem.VERIFIED, row)
