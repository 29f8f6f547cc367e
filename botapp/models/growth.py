"""Verification in steps, the verification log (an outbox of notices), referrals and redeem codes
(issue 45, scopes 3 to 6). Every state here is a row: nothing of it lives in a process's memory."""

from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.premium import PremiumPlan
from botapp.models.users import TelegramUser


class VerificationProgress(models.Model):
    """Where a user is in the current verification period (services/verify_steps.py): the period
    starts with step 1 and lasts Bot settings' `verification_hours`; step 2 and 3 come due a set
    gap after the step before. Kept apart from the tokens, which the cleanup job deletes."""

    user = models.OneToOneField(TelegramUser, on_delete=models.CASCADE, primary_key=True, related_name="verify_progress")
    period_started_at = models.DateTimeField()
    step = models.PositiveSmallIntegerField(default=1)  # the last step passed in the period
    last_verified_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user_id}: step {self.step} since {self.period_started_at:%Y-%m-%d %H:%M}"


class GrowthCount(models.Model):
    """Day totals of the growth events, one row per day and kind, moved by an upsert in the
    transaction of the event it counts (services/growth_stats.py)."""

    day = models.DateField()  # the operator's calendar day (TIME_ZONE)
    kind = models.CharField(max_length=24)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "kind"], name="growthcount_day_kind")]

    def __str__(self) -> str:
        return f"{self.day} {self.kind}: {self.count}"


class Notice(models.Model):
    """A message waiting to go out from a worker: a line for the verification log channel
    (`chat_id` empty; lines are joined into as few messages as fit, `batch` naming the first row
    of the message a row went into) or a message to one user (a referrer told of their reward).
    Claimed with a lease by the `send_notices` job; its random_id comes from the row (or its
    batch's first row), so a message is sent once however often it is tried."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting"
        CLAIMED = "claimed", "Being sent"
        SENT = "sent", "Sent"
        SKIPPED = "skipped", "Not sent"

    chat_id = models.BigIntegerField(null=True, blank=True, help_text="Empty: the verification log channel.")
    text = models.TextField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=clock.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    batch = models.BigIntegerField(null=True, blank=True)
    result = models.CharField(max_length=255, blank=True)

    class Meta:
        indexes = [
            # The job's claim: rows not sent yet, in id order.
            models.Index(fields=["id"], name="notice_unsent", condition=Q(status__in=["pending", "claimed"])),
        ]

    def __str__(self) -> str:
        return f"notice {self.pk} ({self.status})"


class ReferralCode(models.Model):
    """A user's referral link is `/start ref_<code>`; made by their first /refer."""

    user = models.OneToOneField(TelegramUser, on_delete=models.CASCADE, primary_key=True, related_name="referral_code")
    code = models.CharField(max_length=16, unique=True)
    created_at = models.DateTimeField(default=clock.now)

    def __str__(self) -> str:
        return f"ref_{self.code}"


class Referral(models.Model):
    """A new user who came through a referral link: one row per referee (a user is referred at
    most once). Pending until the referee passes the gates; then counted, or held for review when
    it looks made up (services/referrals.py), until an admin approves or rejects it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for the gates"
        COUNTED = "counted", "Counted"
        HELD = "held", "Held for review"
        REJECTED = "rejected", "Rejected"

    referrer = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="referrals_made")
    referee = models.OneToOneField(TelegramUser, on_delete=models.CASCADE, related_name="referred_by")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=clock.now)
    passed_at = models.DateTimeField(null=True, blank=True, help_text="When the referee passed the gates.")
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=64, blank=True, help_text="Who approved or rejected it.")
    reason = models.CharField(max_length=255, blank=True, help_text="Why it was held.")
    reward = models.ForeignKey(
        PremiumPlan, null=True, blank=True, on_delete=models.SET_NULL, help_text="The plan this referral completed."
    )

    class Meta:
        indexes = [
            # Counting a referrer's referrals, and the console's top referrers.
            models.Index(fields=["referrer", "status"], name="referral_referrer_status"),
            models.Index(fields=["created_at"], name="referral_held", condition=Q(status="held")),
        ]

    def __str__(self) -> str:
        return f"{self.referee_id} referred by {self.referrer_id} ({self.status})"


class RedeemCode(models.Model):
    """A code an admin made that gives premium: stored as its SHA-256 only (the code is shown once,
    when made), usable `uses_max` times by different users, until `expires_at`."""

    code_hash = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=8, editable=False, help_text="The code's first characters, to tell codes apart.")
    premium = models.DurationField(help_text="The premium time the code gives.")
    uses_max = models.PositiveIntegerField(default=1)
    uses = models.PositiveIntegerField(default=0, editable=False)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=clock.now)
    created_by = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.hint}… ({self.uses}/{self.uses_max})"


class Redemption(models.Model):
    code = models.ForeignKey(RedeemCode, on_delete=models.CASCADE, related_name="redemptions")
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="redemptions")
    redeemed_at = models.DateTimeField(default=clock.now)
    plan = models.ForeignKey(PremiumPlan, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["code", "user"], name="redemption_once_per_user")]

    def __str__(self) -> str:
        return f"{self.user_id} redeemed {self.code_id}"


class RedeemThrottle(models.Model):
    """A user's wrong codes: `failures` since `window_started_at`; past the limit they may not
    redeem (not even a right code) until `blocked_until`."""

    user = models.OneToOneField(TelegramUser, on_delete=models.CASCADE, primary_key=True, related_name="redeem_throttle")
    failures = models.PositiveIntegerField(default=0)
    window_started_at = models.DateTimeField(default=clock.now)
    blocked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.failures} wrong codes"
