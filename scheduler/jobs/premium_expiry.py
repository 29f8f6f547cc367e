"""Ending premium plans: plans whose time is over are marked ended and their users told, once.

Premium stops at `ends_at` whatever this job does (the delivery gate reads the user's
`premium_until`); the job closes the plan and sends the notice (with the "Get premium" button of
Bot settings). Never twice: a plan is marked ended when claimed, before its notice is sent, and the
notice carries a random_id derived from the plan (`EndedPlan.key`): one whose outcome is unknown (a
lost answer, -503, 500 INTERNAL) is sent again at once with the same random_id, which Telegram
delivers once (a repeat refused as RANDOM_ID_DUPLICATE means it arrived: told), up to REPEATS
times within TELEGRAM_RANDOM_ID_WINDOW of the first attempt. The notice is leased like any send
(LEASE): a worker killed between the claim and the record leaves the plan ended, its `notice`
empty and its lease running out; a later run claims it again and sends the notice with the same
random_id (Telegram delivers it once), within TELEGRAM_RANDOM_ID_WINDOW of the first claim; past
it the plan is recorded not told (the user may have it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings

from botapp import clock
from botapp.models import BotSettings, PremiumPlan
from botapp.services.premium import ENDED_NOTICE, EndedPlan, premium_offer, premium_plans_end_due
from botapp.services.users import unreachable_state, users_mark_unreachable
from botapp.telegram.gateway import AlreadySent, Gateway, OutcomeUnknown, TelegramError
from scheduler.jobs.bulk import rows_update
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE, sweep_outcome

log = logging.getLogger(__name__)

REPEATS = 3  # a notice of unknown outcome is sent again (same random_id) at most this many times


@dataclass(slots=True)
class Told:
    plan_id: int
    chat_id: int
    notice: str  # "sent", or why not
    unreachable: str = ""
    failed: bool = False  # Telegram refused for a reason other than the user's own


@dataclass
class PremiumExpirySweep:
    gateway: Gateway
    conf: BotSettings = field(default_factory=BotSettings.load)

    def claim(self, n: int) -> list[EndedPlan]:
        plans = premium_plans_end_due(limit=n, lease=LEASE)
        self.gateway.peers_remember({p.chat_id: p.access_hash for p in plans if not p.skip})
        return plans

    def work(self, plan: EndedPlan) -> Told:
        if plan.skip:
            return Told(plan.plan_id, plan.chat_id, plan.skip)
        try:
            self._send(plan)
        except AlreadySent:
            log.info("premium end notice delivered by an earlier attempt plan=%s user=%s", plan.plan_id, plan.chat_id)
            return Told(plan.plan_id, plan.chat_id, f"sent {clock.now():%Y-%m-%d %H:%M} (an earlier attempt arrived)")
        except TelegramError as exc:
            log.info("premium end not told plan=%s user=%s: %s", plan.plan_id, plan.chat_id, exc)
            unreachable = unreachable_state(exc=exc)
            return Told(plan.plan_id, plan.chat_id, f"not told: {exc}"[:255], unreachable, failed=not unreachable)
        return Told(plan.plan_id, plan.chat_id, f"sent {clock.now():%Y-%m-%d %H:%M}")

    def _send(self, plan: EndedPlan) -> None:
        """The notice, with its random_id; sent again when its outcome is unknown (REPEATS)."""
        text, rows = premium_offer(conf=self.conf)
        first, window = plan.first_try or clock.now(), timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
        for repeat in range(REPEATS + 1):
            try:
                self.gateway.send_text(
                    plan.chat_id, "\n\n".join(filter(None, [ENDED_NOTICE, text])), buttons=rows or None, key=plan.key
                )
                return
            except OutcomeUnknown as exc:
                if not exc.repeatable or repeat == REPEATS or clock.now() - first >= window:
                    raise
                log.warning(
                    "premium end notice of unknown outcome plan=%s user=%s, sent again: %s", plan.plan_id, plan.chat_id, exc
                )

    def handback(self, plan: EndedPlan, exc: Exception) -> Told:
        return Told(plan.plan_id, plan.chat_id, f"not told: {exc}"[:255], failed=True)

    def record(self, results: list[Told]) -> tuple[int, int]:
        rows_update(
            PremiumPlan, [{"id": r.plan_id, "notice": r.notice, "notice_lease_until": None} for r in results],
            ["notice", "notice_lease_until"],
        )  # fmt: skip
        users_mark_unreachable(by_telegram_id={r.chat_id: r.unreachable for r in results if r.unreachable})
        return len(results), sum(r.failed for r in results)


def end_premium_plans(*, gateway: Gateway | None = None, dry_run: bool = False, batch_size: int = 200) -> Outcome:
    if dry_run:
        due = PremiumPlan.objects.filter(status=PremiumPlan.Status.ACTIVE, ends_at__lte=clock.now()).count()
        return Outcome(due, detail="premium plans past their end")
    return sweep_outcome(PremiumExpirySweep(gateway), batch_size=batch_size, time_budget=50.0, in_flight=4)


def premium_due_next():
    """When the earliest active plan ends (the partial index `premium_active_ends`), or the
    earliest notice lease runs out (`premium_notice_leased`: its run may have died, and the
    next one must tell the user within TELEGRAM_RANDOM_ID_WINDOW), for the wake-up."""
    active = PremiumPlan.objects.filter(status=PremiumPlan.Status.ACTIVE)
    ends = active.order_by("ends_at").values_list("ends_at", flat=True).first()
    leased = PremiumPlan.objects.filter(notice_lease_until__isnull=False, status=PremiumPlan.Status.ENDED, notice="")
    lease = leased.order_by("notice_lease_until").values_list("notice_lease_until", flat=True).first()
    return min((t for t in (ends, lease) if t is not None), default=None)


job_register(
    Job(
        "end_premium_plans",
        end_premium_plans,
        {"minute": "*/10"},
        "End expired premium plans and tell their users",
        needs_gateway=True,
        wakes_on="premium",
        due_next=premium_due_next,
    )
)
