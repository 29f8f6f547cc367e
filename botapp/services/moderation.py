"""Admin bans (`/ban`, `/unban`, `/banlist`) and the record of every admin command in the bot.

Guarantees: a banned user gets no deliveries until the ban's end (or until an admin lifts it);
a user has at most one ban in force (banning again replaces it); users who were never banned cost
the delivery gate no query (`TelegramUser.admin_banned`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils.html import escape

from botapp import clock
from botapp.config import admin_ids_load
from botapp.models import AdminCommand, TelegramUser, UserBan
from botapp.services.audit import audit_record
from botapp.services.growth_stats import growth_count
from botapp.services.notices import notice_log
from botapp.services.premium import moment_text


def ban_in_force_q(*, now: datetime) -> Q:
    """UserBan rows in force at `now`."""
    return Q(lifted_at__isnull=True) & (Q(until__isnull=True) | Q(until__gt=now))


def user_ban(*, user: TelegramUser, duration: timedelta | None, reason: str = "", banned_by: int | None = None) -> UserBan:
    """Ban the user from deliveries for `duration` (None: until lifted), replacing a ban in force."""
    now = clock.now()
    with transaction.atomic():
        UserBan.objects.filter(user=user, lifted_at__isnull=True).update(lifted_at=now, lifted_by=banned_by)
        ban = UserBan.objects.create(
            user=user, reason=reason[:255], banned_by=banned_by, created_at=now, until=now + duration if duration else None
        )
        TelegramUser.objects.filter(pk=user.pk).update(admin_banned=True)
        until = f"until {ban.until:%Y-%m-%d %H:%M %Z}" if ban.until else "until lifted"
        audit_record(action="user.ban", target=user, detail=f"{until}; reason: {reason}" if reason else until)
        growth_count(kind="ban")  # the verification log and its counts carry every ban
        who = f"{user.telegram_id} (@{escape(user.username)})" if user.username else str(user.telegram_id)
        notice_log(text=f"🚫 ban: {who} {until}" + (f"; reason: {escape(reason[:100])}" if reason else ""))
    user.admin_banned = True
    return ban


def user_unban(*, user: TelegramUser, lifted_by: int | None = None) -> bool:
    """Lift the user's ban now. Returns whether a ban was in force."""
    now = clock.now()
    with transaction.atomic():
        lifted = UserBan.objects.filter(ban_in_force_q(now=now), user=user).update(lifted_at=now, lifted_by=lifted_by)
        UserBan.objects.filter(user=user, lifted_at__isnull=True).update(lifted_at=now, lifted_by=lifted_by)  # expired ones
        TelegramUser.objects.filter(pk=user.pk).update(admin_banned=False)
        if lifted:
            audit_record(action="user.unban", target=user)
    user.admin_banned = False
    return bool(lifted)


def users_ban(
    *, users: Iterable[TelegramUser], duration: timedelta | None, reason: str
) -> tuple[int, list[TelegramUser], list[TelegramUser]]:
    """The console's *Ban*: each user banned as `/ban` would (`user_ban`; `duration` None: until
    lifted), except admins (ADMIN_IDS), whom the bot refuses to ban too, and users whose ban in
    force lasts longer (a /ban until /unban is not cut down to `duration`). Returns how many were
    banned, the admins left alone, and the users already banned for longer."""
    admins = admin_ids_load()
    ends = clock.now() + duration if duration else None
    banned, skipped, longer = 0, [], []
    for user in users:
        if user.telegram_id in admins:
            skipped.append(user)
            continue
        ban = ban_in_force(user=user)
        if ban is not None and ends is not None and (ban.until is None or ban.until >= ends):
            longer.append(user)
            continue
        user_ban(user=user, duration=duration, reason=reason)
        banned += 1
    return banned, skipped, longer


def users_unban(*, users: Iterable[TelegramUser]) -> int:
    """The console's *Unban*: lift the admin ban (`/ban`) and the verification-bypass ban of each
    user. Returns how many had either in force."""
    now = clock.now()
    lifted = 0
    for user in users:
        bypass = TelegramUser.objects.filter(pk=user.pk, banned_until__gt=now).update(banned_until=None)
        if bypass:
            audit_record(action="user.unban", target=user, detail="verification-bypass ban lifted")
        admin = user.admin_banned and user_unban(user=user)
        lifted += bool(bypass or admin)
    return lifted


def ban_in_force(*, user: TelegramUser, now: datetime | None = None) -> UserBan | None:
    """The admin ban holding the user back at `now`, or None. No query for a user never banned."""
    if not user.admin_banned:
        return None
    return UserBan.objects.filter(ban_in_force_q(now=now or clock.now()), user=user).order_by("-created_at").first()


def bans_in_force(*, limit: int = 50) -> tuple[list[UserBan], int]:
    """Bans in force (newest first, at most `limit`) and how many there are in all."""
    bans = UserBan.objects.filter(ban_in_force_q(now=clock.now())).select_related("user").order_by("-created_at")
    return list(bans[:limit]), bans.count()


def admin_command_record(*, admin_id: int, command: str, arguments: str, ok: bool, result: str) -> AdminCommand:
    """Keep what an admin asked of the bot and what came of it, for the operator console."""
    return AdminCommand.objects.create(
        admin_id=admin_id, command=command[:32], arguments=arguments[:255], ok=ok, result=result[:255]
    )


def ban_notice(*, ban: UserBan) -> str:
    """What a banned user is told when they open a file link."""
    until = f"until {moment_text(moment=ban.until)}" if ban.until else "by an admin"
    reason = f" Reason: {escape(ban.reason)}" if ban.reason else ""
    return f"🚫 You are banned {until}: files cannot be sent to you.{reason}"
