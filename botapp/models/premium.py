"""Premium plans, admin bans and the admins' commands in the bot."""

from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.users import TelegramUser


class PremiumPlan(models.Model):
    """A user's premium time: no verification (and, per Bot settings, no force-subscribe) until
    `ends_at`. One active plan per user; `/addpremium` on a premium user extends it. The user's
    `premium_until` mirrors the active plan's end, so the delivery gate reads no other row."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        ENDED = "ended", "Ended (expired)"
        REVOKED = "revoked", "Removed by an admin"

    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="premium_plans")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    starts_at = models.DateTimeField(default=clock.now)
    ends_at = models.DateTimeField()
    granted_by = models.BigIntegerField(null=True, blank=True, help_text="Telegram id of the admin who granted it.")
    ended_at = models.DateTimeField(null=True, blank=True)
    notice = models.CharField(
        max_length=255, blank=True, help_text="How telling the user that the plan ended went (sent, or Telegram's error)."
    )
    # The expiry job's lease on telling the user: set when a run claims the plan (or claims it
    # again), cleared with `notice`. A plan ended with no notice past its lease belongs to a run
    # that died before it recorded one: the next run tells the user (the same random_id).
    notice_lease_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["user"], condition=Q(status="active"), name="premium_one_active_per_user"),
        ]
        indexes = [
            # The expiry job's claim: active plans in end order.
            models.Index(fields=["ends_at"], name="premium_active_ends", condition=Q(status="active")),
            # The expiry job's second claim: notices whose run died (a lease that ran out, no notice).
            models.Index(
                fields=["notice_lease_until"], name="premium_notice_leased", condition=Q(notice_lease_until__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"premium {self.user_id} until {self.ends_at:%Y-%m-%d %H:%M} ({self.status})"


class UserBan(models.Model):
    """An admin's ban (`/ban`): no deliveries while it lasts. `until` empty: until lifted (`/unban`).
    The user's `admin_banned` flag says a ban row exists, so users who were never banned cost the
    delivery gate no query."""

    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="bans")
    reason = models.CharField(max_length=255, blank=True)
    banned_by = models.BigIntegerField(null=True, blank=True, help_text="Telegram id of the admin.")
    created_at = models.DateTimeField(default=clock.now)
    until = models.DateTimeField(null=True, blank=True, help_text="Empty: until an admin lifts it.")
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The gate and /banlist: bans not lifted.
            models.Index(fields=["user"], name="ban_in_force", condition=Q(lifted_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"ban of {self.user_id}"


class AdminCommand(models.Model):
    """One command an admin sent to the bot, with what it did (for the operator console)."""

    admin_id = models.BigIntegerField()
    command = models.CharField(max_length=32)
    arguments = models.CharField(max_length=255, blank=True)
    ok = models.BooleanField(default=True, help_text="False: refused (bad input), nothing done.")
    result = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=clock.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["-created_at"], name="admincommand_created")]

    def __str__(self) -> str:
        return f"/{self.command} by {self.admin_id}"
