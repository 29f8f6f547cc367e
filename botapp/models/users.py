"""Telegram users and the buttons they clicked."""

from django.db import models

from botapp import clock


class TelegramUser(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        STOPPED = "stopped", "Stopped (/stop)"
        BLOCKED = "blocked", "Blocked the bot"
        DEACTIVATED = "deactivated", "Account deleted"

    telegram_id = models.BigIntegerField(unique=True)
    access_hash = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="This bot's key to the user, from Telegram's updates: workers send with it.",
    )
    username = models.CharField(max_length=64, blank=True)
    first_name = models.CharField(max_length=128, blank=True)
    last_name = models.CharField(max_length=128, blank=True)
    language_code = models.CharField(max_length=16, blank=True)
    start_payload = models.CharField(max_length=64, blank=True, help_text="The /start payload that first brought the user.")
    last_start_payload = models.CharField(
        "latest start payload",
        max_length=64,
        blank=True,
        help_text="The campaign payload the user last came back through; until then, the one that first brought them.",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    joined_at = models.DateTimeField(default=clock.now)
    last_seen_at = models.DateTimeField(default=clock.now)
    verified_until = models.DateTimeField(null=True, blank=True)
    verification_count = models.PositiveIntegerField(default=0)
    bypass_count = models.PositiveIntegerField(default=0)
    banned_until = models.DateTimeField(null=True, blank=True, help_text="Temporarily banned for bypassing verification.")
    premium_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Premium (no verification) until then: the active plan's end."
    )
    admin_banned = models.BooleanField(default=False, editable=False, help_text="An admin ban (/ban) is on record.")
    referral_pending = models.BooleanField(
        default=False, db_default=False, editable=False, help_text="Came through a referral link; not counted yet."
    )

    class Meta:
        verbose_name = "Telegram user"
        indexes = [
            # Broadcast fan-out and /stats: active users, in id order.
            models.Index(fields=["state", "id"], name="tguser_state_id"),
            models.Index(fields=["joined_at"], name="tguser_joined"),
        ]

    def __str__(self) -> str:
        name = f"@{self.username}" if self.username else " ".join(filter(None, [self.first_name, self.last_name]))
        return f"{name or 'user'} ({self.telegram_id})"


class ButtonClick(models.Model):
    """A user's click on one tracked button key: one row per user and key, written by the first
    click; opening a link again (a replay, a refresh, the message shared on) only moves
    `last_clicked_at`. `count` is the user's clicks on the key: every tap of a callback button,
    one per tracked link, and the clicks an import carried."""

    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="clicks")
    button = models.CharField(max_length=64, help_text="The tracked button's key.")
    clicked_at = models.DateTimeField(default=clock.now, help_text="First click.")
    last_clicked_at = models.DateTimeField(default=clock.now)
    count = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "button"], name="click_user_button_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} clicked {self.button}"
