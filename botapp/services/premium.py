"""Premium users: no verification (and, per Bot settings, no force-subscribe) until a date.

Guarantees: a user has at most one active plan; granting premium to a premium user extends their
plan from its end; `TelegramUser.premium_until` always equals the active plan's end (or is empty),
so the delivery gate decides from the user's row alone and premium ends at that moment, whether or
not the expiry job has run yet. The job (`end_premium_plans`) marks expired plans ended and tells
their users, each at most once.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from botapp import clock
from botapp.models import BotSettings, PremiumPlan, TelegramUser
from botapp.services.audit import audit_record
from botapp.services.outgoing import send_key
from botapp.services.texts import human_span
from botapp.signals import work_scheduled_announce
from botapp.telegram.gateway import Button

log = logging.getLogger(__name__)

DURATION_RE = re.compile(r"^(?:\d{1,6}[mhdwy])+$")
DURATION_PART_RE = re.compile(r"(\d+)([mhdwy])")
DURATION_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
YEAR = timedelta(days=365)
DURATION_MAX = 100 * YEAR
DURATION_HELP = "Write a duration like 30d, 12h, 1y or 1d12h (m, h, d, w, y), at most 100y."

ENDED_NOTICE = "⭐ Your premium plan has ended. File links ask you to verify again."


def duration_parse(*, text: str) -> timedelta | None:
    """`30d`, `12h`, `1y`, `1d12h` (minutes, hours, days, weeks, years of 365 days) as a timedelta;
    None when `text` is not such a duration, is zero, or is longer than 100 years."""
    text = text.strip().lower()
    if not DURATION_RE.match(text):
        return None
    total = timedelta(0)
    for number, unit in DURATION_PART_RE.findall(text):
        total += int(number) * (YEAR if unit == "y" else DURATION_UNITS[unit])
        if total > DURATION_MAX:
            return None
    return total or None


def moment_text(*, moment: datetime) -> str:
    """A date and time as users read it, in the operator's time zone."""
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


def user_is_premium(*, user: TelegramUser, now: datetime | None = None) -> bool:
    """Whether the user's premium holds at `now` (default: the clock's now)."""
    return user.premium_until is not None and user.premium_until > (now or clock.now())


def premium_grant(*, user: TelegramUser, duration: timedelta, granted_by: int | None = None) -> PremiumPlan:
    """Give the user premium for `duration`: a new plan from now, or, when they are premium
    already, their plan extended by `duration` from its end. Returns the active plan."""
    now = clock.now()
    with transaction.atomic():
        TelegramUser.objects.select_for_update().filter(pk=user.pk).first()  # one grant at a time per user
        plan = PremiumPlan.objects.filter(user=user, status=PremiumPlan.Status.ACTIVE).first()
        if plan is not None and plan.ends_at > now:
            plan.ends_at += duration
            plan.save(update_fields=["ends_at"])
        else:
            if plan is not None:  # expired, the job has not got to it yet: it ends now, unannounced
                PremiumPlan.objects.filter(pk=plan.pk).update(
                    status=PremiumPlan.Status.ENDED, ended_at=now, notice="superseded by a new plan"
                )
            plan = PremiumPlan.objects.create(user=user, starts_at=now, ends_at=now + duration, granted_by=granted_by)
        TelegramUser.objects.filter(pk=user.pk).update(premium_until=plan.ends_at)
        work_scheduled_announce(work="premium", due_at=plan.ends_at)
        audit_record(action="premium.grant", target=user, detail=f"for {duration}, until {plan.ends_at:%Y-%m-%d %H:%M %Z}")
    user.premium_until = plan.ends_at
    return plan


def premium_revoke(*, user: TelegramUser) -> PremiumPlan | None:
    """End the user's premium now (`/delpremium`). Returns the plan ended, or None when they had none."""
    now = clock.now()
    with transaction.atomic():
        plan = PremiumPlan.objects.select_for_update().filter(user=user, status=PremiumPlan.Status.ACTIVE).first()
        if plan is not None:
            PremiumPlan.objects.filter(pk=plan.pk).update(status=PremiumPlan.Status.REVOKED, ended_at=now)
            audit_record(action="premium.revoke", target=user, detail=f"plan {plan.pk} ended")
        TelegramUser.objects.filter(pk=user.pk).update(premium_until=None)
    user.premium_until = None
    if plan is None or plan.ends_at <= now:
        return None
    return plan


def premium_plans_active(*, limit: int | None = None) -> list[PremiumPlan]:
    """Plans that still hold, soonest end first, with their users."""
    plans = PremiumPlan.objects.filter(status=PremiumPlan.Status.ACTIVE, ends_at__gt=clock.now()).select_related("user")
    return list(plans.order_by("ends_at")[:limit] if limit else plans.order_by("ends_at"))


@dataclass(frozen=True, slots=True)
class EndedPlan:
    plan_id: int
    chat_id: int
    access_hash: int | None
    skip: str  # why the user is not told ("" when they are)
    ends_at: datetime | None = None  # when the plan ended (its notice's random_id key: `key`)
    # When its notice was first claimed (the plan's `ended_at`): its repeats stay within
    # TELEGRAM_RANDOM_ID_WINDOW of it. None: now, the first claim.
    first_try: datetime | None = None

    @property
    def key(self) -> str:
        """The random_id key of the plan's end notice (`send_key` kind "p"): the plan and its end,
        the same in every process and attempt (an ended plan's end never moves)."""
        return send_key(kind="p", row_id=self.plan_id, made_at=self.ends_at) if self.ends_at is not None else ""


def premium_plans_end_due(*, limit: int, lease: timedelta) -> list[EndedPlan]:
    """Claim up to `limit` active plans whose end has passed: each is marked ended (so its user is
    told at most once, by whoever claimed it) and its user's premium_until cleared; and, in what
    `limit` leaves, ended plans whose user was never told because the run that claimed them died
    (their `notice_lease_until` ran out with no notice), to be told with the same random_id. Each
    claimed plan's notice is leased for `lease`. One of the latter past TELEGRAM_RANDOM_ID_WINDOW
    of its first claim is not sent again (the user may have it, and Telegram may have forgotten
    its random_id): its `skip` says so. Skips rows another run holds (SKIP LOCKED)."""
    now = clock.now()
    columns = ("id", "user_id", "ends_at", "user__telegram_id", "user__access_hash", "user__state", "ended_at")
    with transaction.atomic():
        rows = list(
            PremiumPlan.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=PremiumPlan.Status.ACTIVE, ends_at__lte=now)
            .order_by("ends_at")
            .values_list(*columns)[:limit]
        )
        lapsed = (
            list(
                PremiumPlan.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=PremiumPlan.Status.ENDED, notice="", notice_lease_until__lte=now)
                .order_by("notice_lease_until")
                .values_list(*columns)[: limit - len(rows)]
            )
            if len(rows) < limit
            else []
        )
        if rows:
            PremiumPlan.objects.filter(id__in=[r[0] for r in rows]).update(
                status=PremiumPlan.Status.ENDED, ended_at=now, notice_lease_until=now + lease
            )
            for _, user_id, ends_at, *_rest in rows:
                TelegramUser.objects.filter(pk=user_id, premium_until__lte=ends_at).update(premium_until=None)
        if lapsed:
            PremiumPlan.objects.filter(id__in=[r[0] for r in lapsed]).update(notice_lease_until=now + lease)
    window = timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
    plans = [
        EndedPlan(
            plan_id, chat_id, access_hash, "" if state == TelegramUser.State.ACTIVE else f"not told: user is {state}", ends_at
        )
        for plan_id, _, ends_at, chat_id, access_hash, state, _ended in rows
    ]
    for plan_id, _, ends_at, chat_id, access_hash, state, ended_at in lapsed:
        first = ended_at or now
        skip = "" if state == TelegramUser.State.ACTIVE else f"not told: user is {state}"
        if not skip and now - first >= window:
            skip = LAPSED_UNTOLD
            log.warning("premium end notice plan=%s user=%s: its run died, and it is too late to tell again", plan_id, chat_id)
        elif not skip:
            log.warning("premium end notice plan=%s user=%s: its run died before telling, told now", plan_id, chat_id)
        plans.append(EndedPlan(plan_id, chat_id, access_hash, skip, ends_at, first))
    return plans


# A plan whose notice's run died and whose first claim is past TELEGRAM_RANDOM_ID_WINDOW.
LAPSED_UNTOLD = "not told: the run telling it stopped, and a repeat now might reach the user twice"


def premium_offer(*, conf: BotSettings) -> tuple[str, list[list[Button]]]:
    """The "Get premium" text and button of Bot settings (either may be empty)."""
    rows = (
        [[Button(conf.premium_button_text or "⭐ Get premium", url=conf.premium_button_url)]] if conf.premium_button_url else []
    )
    return conf.premium_text.strip(), rows


def plan_describe(*, user: TelegramUser, conf: BotSettings) -> tuple[str, list[list[Button]]]:
    """`/myplan`: the user's plan, its end and what is left; free users also see the offer."""
    now = clock.now()
    if user_is_premium(user=user, now=now):
        left = human_span(delta=user.premium_until - now)
        return f"⭐ <b>Premium</b> until {moment_text(moment=user.premium_until)} ({left} left).\nNo verification needed.", []
    text, rows = premium_offer(conf=conf)
    return "\n\n".join(filter(None, ["You are on the <b>free</b> plan.", text])), rows
