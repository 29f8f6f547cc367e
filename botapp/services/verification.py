"""Token verification: a user proves they are human by passing a shortlink that carries a token.

Guarantees:
- a token has 192 random bits, belongs to one user and expires (`token_ttl_minutes`);
- a user creates at most `daily_token_limit` tokens per calendar day (TIME_ZONE); an unexpired
  pending token is reused rather than counted again;
- redeeming a token faster than `bypass_seconds` after it was issued is a bypass: the token is
  spent, nothing is granted, and repeated bypasses ban the user for longer and longer;
- a redeemed token verifies the user for `verification_hours`, or, with verification in steps
  (services/verify_steps.py), until their next step falls due;
- each verification, bypass and bypass ban is counted by day (services/growth_stats.py) and
  written for the verification log channel (services/notices.py) in the transaction that spends
  the token.
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F
from django.utils.html import escape

from botapp import clock
from botapp.models import BotSettings, DailyTokenCount, TelegramUser, VerificationToken
from botapp.services.growth_stats import growth_count
from botapp.services.notices import notice_log
from botapp.services.stats import stat_increment
from botapp.services.texts import human_span
from botapp.services.verify_steps import STEP_NAMES, step_pass

Status = VerificationToken.Status

# Bans after the 2nd, 3rd, 4th, 5th+ bypass; the first is a warning.
BYPASS_BANS = [timedelta(0), timedelta(hours=1), timedelta(hours=6), timedelta(hours=24), timedelta(days=7)]
TOKEN_PREFIX = "verify-"


def token_new() -> str:
    """A new token: 192 random bits (secrets), 32 URL-safe characters."""
    return secrets.token_urlsafe(24)  # 192 bits, 32 characters


def user_is_verified(*, user: TelegramUser, now: datetime | None = None) -> bool:
    """Whether the user's verification still holds at `now` (default: the clock's now)."""
    return user.verified_until is not None and user.verified_until > (now or clock.now())


def user_ban_remaining(*, user: TelegramUser, now: datetime | None = None) -> timedelta | None:
    """How long the user's bypass ban still lasts at `now` (default: the clock's now); None when
    they are not banned."""
    now = now or clock.now()
    if user.banned_until and user.banned_until > now:
        return user.banned_until - now
    return None


@dataclass
class LimitReached:
    resets_at: datetime  # the next local midnight


def token_issue(
    *,
    user: TelegramUser,
    share_id: str,
    conf: BotSettings,
    link: Callable[[str], str] = lambda token: "",
    new_user: bool = False,
    step: int = 1,
) -> VerificationToken | LimitReached:
    """A token for this user (reusing their unexpired pending one), within the daily limit.

    `link(token)` makes the shortlink stored with a new token; it is called only once the daily
    limit allowed the token, so a user at the limit costs no call to the shortener. A pending token
    is found with one query and no lock. Otherwise the user's row is locked (SELECT ... FOR UPDATE)
    and the pending token looked up again, so requests of one user that race (runbot answers
    updates on many threads) queue there and all get the one token the first of them made: one
    token and one count however many requests race. The lock is held while the shortener answers
    (at most its timeout), so the ones waiting get the token with its shortlink; it holds back only
    that user's other requests. `new_user`: the user's row was created by this very request, so
    only a request racing it can have made a token: the lookup without the lock is skipped.
    `step`: the verification step the token is for (services/verify_steps.py), kept on it.
    """
    current = None if new_user else _pending_token(user=user, share_id=share_id)
    if current is not None:
        return current
    with transaction.atomic():
        # Lock, then look again in a statement of its own: under READ COMMITTED a new statement sees
        # what the request that held the lock before this one committed (a subquery in the locking
        # statement would not: its snapshot predates the wait).
        TelegramUser.objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True).first()
        current = _pending_token(user=user, share_id=share_id)
        if current is not None:
            return current
        if not daily_token_take(user=user, limit=conf.daily_token_limit):
            return LimitReached(resets_at=clock.today_start() + timedelta(days=1))
        now = clock.now()
        token = token_new()
        return VerificationToken.objects.create(
            token=token,
            user=user,
            share_id=share_id,
            short_url=link(token),
            step=step,
            created_at=now,
            expires_at=now + timedelta(minutes=conf.token_ttl_minutes),
        )


def _pending_token(*, user: TelegramUser, share_id: str) -> VerificationToken | None:
    """The user's newest unexpired pending token, now asked for `share_id`."""
    current = (
        VerificationToken.objects.filter(user=user, status=Status.PENDING, expires_at__gt=clock.now())
        .order_by("-created_at")
        .first()
    )
    if current is not None and current.share_id != share_id:
        current.share_id = share_id
        current.save(update_fields=["share_id"])
    return current


def daily_token_take(*, user: TelegramUser, limit: int) -> bool:
    """Count one more token for the user today, unless that would pass `limit`: one statement
    (an upsert whose update applies only below the limit), atomic however many requests race."""
    table = connection.ops.quote_name(DailyTokenCount._meta.db_table)
    user_id, day, count = (
        connection.ops.quote_name(DailyTokenCount._meta.get_field(f).column) for f in ("user", "date", "count")
    )
    sql = (
        f"INSERT INTO {table} ({user_id}, {day}, {count}) VALUES (%s, %s, 1) "
        f"ON CONFLICT ({user_id}, {day}) DO UPDATE SET {count} = {table}.{count} + 1 WHERE {table}.{count} < %s "
        f"RETURNING {count}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user.pk, connection.ops.adapt_datefield_value(clock.today()), limit])
        return cursor.fetchone() is not None


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
    """The user came back through the shortlink with `token`: the outcome (see Redeem), decided
    under the token's row lock so a token is spent once however many times it is opened. A pending,
    unexpired token of theirs verifies them for `verification_hours`, or, redeemed faster than
    `bypass_seconds`, is a bypass (counted, banned from the 2nd on: BYPASS_BANS); today's
    verifications or bypasses are counted in the same transaction."""
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
            outcome = Redeemed(Redeem.BYPASSED, row, ban=ban or None)
            growth_count(kind="bypass")
            notice_log(
                text=f"⚠️ bypass: {_who(user)}, came back {(now - row.created_at).total_seconds():.0f} s after the link", conf=conf
            )
            if ban:
                growth_count(kind="ban")
                notice_log(text=f"🚫 ban: {_who(user)} for {human_span(delta=ban)} (bypass {user.bypass_count})", conf=conf)
        else:
            row.status = Status.VERIFIED
            row.step, user.verified_until = step_pass(user=user, conf=conf, now=now)
            row.save(update_fields=["status", "used_at", "step"])
            TelegramUser.objects.filter(pk=user.pk).update(
                verified_until=user.verified_until, verification_count=F("verification_count") + 1
            )
            outcome = Redeemed(Redeem.VERIFIED, row)
            growth_count(kind=f"verify{row.step}")
            notice_log(text=f"✅ {STEP_NAMES[row.step]} verification: {_who(user)}", conf=conf)
        # Counted in the transaction that spends the token: exactly when it commits.
        stat_increment(field="bypasses" if outcome.result is Redeem.BYPASSED else "verifications")
    return outcome


def _who(user: TelegramUser) -> str:
    """A user as the log channel names them: id, and @username when they have one."""
    return f"{user.telegram_id} (@{escape(user.username)})" if user.username else str(user.telegram_id)
