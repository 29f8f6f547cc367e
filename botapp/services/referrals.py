"""Referrals: each user's link `/start ref_<code>`; a new user who comes through it counts for its
owner once they pass the gates, and every `referrals_needed` counted referrals give the owner
`referral_premium_hours` of premium (Bot settings), the owner told.

Guarantees:
- a user is referred at most once (one Referral row per referee), and only when genuinely new: the
  /start that brought them created their row (a user seen before, imported or moved in has one
  already, so is never counted), they are not a bot, and the link is not their own;
- a referral counts only once the referee has passed the gates (the force-subscribe channels and,
  when on, verification): `referral_gates_passed` is called where the gates let them through; the
  user's `referral_pending` flag keeps that call free of queries for everyone else;
- a referral whose referee first came to the bot within `referral_hold_minutes` of
  `referral_hold_count` - 1 other referees of the same referrer is held for review instead
  (accounts made in a burst, one person's many accounts; Telegram does not tell a bot when an
  account was made, so the bot's own first sight of it stands in); an admin approves (counted
  then) or rejects it in the console;
- rewards are decided under the referrer's row lock: the Nth counted referral gives one reward,
  whatever races it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, Q

from botapp import clock
from botapp.models import BotSettings, Referral, ReferralCode, TelegramUser
from botapp.services.audit import audit_record
from botapp.services.growth_stats import growth_count
from botapp.services.notices import notice_user
from botapp.services.premium import premium_grant
from botapp.services.texts import human_span

REF_PREFIX = "ref_"
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
# 10 characters: `ref_` + 10 is 14, never the 12 of a share id (botapp/models/files.py: share_id_new).
CODE_LENGTH = 10
Status = Referral.Status


def referral_payload(*, payload: str) -> str | None:
    """The referral code in a /start payload, or None when it is not a referral link (no query)."""
    if not payload.startswith(REF_PREFIX):
        return None
    code = payload[len(REF_PREFIX) :]
    return code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else None


def referral_code_for(*, user: TelegramUser) -> str:
    """The user's referral code, made on first use."""
    existing = ReferralCode.objects.filter(user=user).values_list("code", flat=True).first()
    if existing is not None:
        return existing
    while True:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        try:
            with transaction.atomic():
                return ReferralCode.objects.create(user=user, code=code).code
        except IntegrityError:  # the code was taken, or a racing /refer made theirs first
            existing = ReferralCode.objects.filter(user=user).values_list("code", flat=True).first()
            if existing is not None:
                return existing


def referral_record(*, referee: TelegramUser, code: str, is_bot: bool) -> Referral | None:
    """`referee`, just created by a /start ref_<code>, came through that link: a pending referral,
    or None when the code is no one's, is their own, or they are a bot."""
    if is_bot:
        return None
    referrer_id = ReferralCode.objects.filter(code=code).values_list("user_id", flat=True).first()
    if referrer_id is None or referrer_id == referee.pk:
        return None
    try:
        with transaction.atomic():
            referral = Referral.objects.create(referrer_id=referrer_id, referee=referee, created_at=clock.now())
            TelegramUser.objects.filter(pk=referee.pk).update(referral_pending=True)
    except IntegrityError:  # referred already
        return None
    referee.referral_pending = True
    return referral


def referral_gates_passed(*, user: TelegramUser, conf: BotSettings | None = None) -> Referral | None:
    """The user passed the gates: their pending referral is counted (or held for review). No
    query unless they came through a referral link and were not counted yet."""
    if not user.referral_pending:
        return None
    conf = conf or BotSettings.load()
    now = clock.now()
    with transaction.atomic():
        referral = Referral.objects.select_for_update().filter(referee=user, status=Status.PENDING).first()
        TelegramUser.objects.filter(pk=user.pk).update(referral_pending=False)
        user.referral_pending = False
        if referral is None:
            return None
        TelegramUser.objects.select_for_update().filter(pk=referral.referrer_id).values_list("pk", flat=True).first()
        window = timedelta(minutes=conf.referral_hold_minutes)
        burst = (
            Referral.objects.filter(
                referrer_id=referral.referrer_id,
                referee__joined_at__gt=user.joined_at - window,
                referee__joined_at__lt=user.joined_at + window,
            )
            .exclude(status=Status.REJECTED)
            .count()
        )
        referral.passed_at = now
        if burst >= conf.referral_hold_count:
            referral.status = Status.HELD
            referral.reason = f"{burst} of the referrer's referees first came within {conf.referral_hold_minutes} min"
            referral.save(update_fields=["status", "passed_at", "reason"])
            growth_count(kind="referral_held")
            return referral
        referral.status = Status.COUNTED
        referral.save(update_fields=["status", "passed_at"])
        _counted(referral, conf)
    return referral


def _counted(referral: Referral, conf: BotSettings) -> None:
    """A referral was counted (the referrer's row locked): the count, the reward when due, the referrer told."""
    growth_count(kind="referral")
    counted = Referral.objects.filter(referrer_id=referral.referrer_id, status=Status.COUNTED).count()
    referrer = TelegramUser.objects.get(pk=referral.referrer_id)
    needed = conf.referrals_needed
    if needed and counted % needed == 0:
        duration = timedelta(hours=conf.referral_premium_hours)
        plan = premium_grant(user=referrer, duration=duration)
        Referral.objects.filter(pk=referral.pk).update(reward=plan)
        referral.reward = plan
        text = (
            f"🎉 {counted} friends joined through your link: you get {human_span(delta=duration)} of premium "
            f"(file links need no verification)."
        )
    elif needed:
        text = f"🎉 A friend joined through your link: {counted % needed} of {needed} for {human_span(delta=timedelta(hours=conf.referral_premium_hours))} of premium."
    else:
        text = f"🎉 A friend joined through your link ({counted} so far)."
    notice_user(chat_id=referrer.telegram_id, text=text)


def referral_decide(*, referral_id: int, approve: bool, by: str) -> Referral | None:
    """An admin's decision on a held referral: approved (counted, rewarded when due) or rejected.
    None when it is not held (decided already)."""
    conf = BotSettings.load()
    with transaction.atomic():
        referral = Referral.objects.select_for_update().filter(pk=referral_id, status=Status.HELD).first()
        if referral is None:
            return None
        TelegramUser.objects.select_for_update().filter(pk=referral.referrer_id).values_list("pk", flat=True).first()
        referral.status = Status.COUNTED if approve else Status.REJECTED
        referral.decided_at, referral.decided_by = clock.now(), by[:64]
        referral.save(update_fields=["status", "decided_at", "decided_by"])
        audit_record(action="referral.approve" if approve else "referral.reject", target=referral.referee)
        if approve:
            _counted(referral, conf)
    return referral


@dataclass(frozen=True)
class ReferralCounts:
    counted: int
    held: int
    pending: int


def referral_counts(*, user: TelegramUser) -> ReferralCounts:
    """The user's referrals by state, in one query."""
    c = Referral.objects.filter(referrer=user).aggregate(
        counted=Count("pk", filter=Q(status=Status.COUNTED)),
        held=Count("pk", filter=Q(status=Status.HELD)),
        pending=Count("pk", filter=Q(status=Status.PENDING)),
    )
    return ReferralCounts(**c)


def referrers_top(*, limit: int = 10) -> list[tuple[TelegramUser, int, int]]:
    """The users with the most counted referrals: (user, counted, held), most counted first."""
    rows = (
        Referral.objects.filter(status__in=[Status.COUNTED, Status.HELD])
        .values("referrer")
        .annotate(counted=Count("pk", filter=Q(status=Status.COUNTED)), held=Count("pk", filter=Q(status=Status.HELD)))
        .order_by("-counted", "-held", "referrer")[:limit]
    )
    people = TelegramUser.objects.in_bulk([r["referrer"] for r in rows])
    return [(people[r["referrer"]], r["counted"], r["held"]) for r in rows]
