"""The gates: verification tokens, daily counters and totals (and the counts waiting to be added to
them), force-subscribe channels."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.config import storage_channel_load
from botapp.models.ranges import channel_id_validate
from botapp.models.settings import BotSettings
from botapp.models.users import TelegramUser

# An expiring invite link lives at most this long: a year (inferred bound; Telegram documents none).
INVITE_TTL_MAX_MINUTES = 365 * 24 * 60


class VerificationToken(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        VERIFIED = "verified", "Verified"
        BYPASSED = "bypassed", "Bypassed"

    token = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="tokens")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    share_id = models.CharField(max_length=32, blank=True, help_text="The file the user asked for; delivered once verified.")
    short_url = models.CharField(max_length=512, blank=True, help_text="The shortlink the user was given.")
    created_at = models.DateTimeField(default=clock.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    step = models.PositiveSmallIntegerField(default=1, db_default=1, help_text="The verification step it is for (1 to 3).")

    class Meta:
        indexes = [
            # Token cleanup: used tokens past expiry.
            models.Index(fields=["expires_at"], name="token_used_expiry", condition=~Q(status="pending")),
            models.Index(fields=["expires_at"], name="token_pending_expiry", condition=Q(status="pending")),
        ]

    def __str__(self) -> str:
        return f"token {self.token[:8]}… ({self.status})"


class DailyTokenCount(models.Model):
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="token_counts")
    date = models.DateField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "date"], name="tokencount_user_date")]
        indexes = [models.Index(fields=["date"], name="tokencount_date")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.date}: {self.count}"


class DailyStat(models.Model):
    """Day totals for /stats (kept after tokens are cleaned up)."""

    date = models.DateField(unique=True)
    deliveries = models.PositiveIntegerField(default=0)
    verifications = models.PositiveIntegerField(default=0)
    bypasses = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-date"]

    def __str__(self) -> str:
        return f"{self.date}: {self.deliveries} deliveries"


class CounterEntry(models.Model):
    """One count waiting to be added to DailyStat (and, for a delivery, to its StoredFile): written
    by the delivery or verification it counts, in the same transaction (an INSERT, so deliveries
    never wait for each other on a shared row), folded in and deleted by `counters_flush`
    (botapp/services/stats.py). PostgreSQL keeps it through any restart of Redis or of a process."""

    day = models.DateField()  # the operator's calendar day it happened on
    deliveries = models.PositiveIntegerField(default=0)
    verifications = models.PositiveIntegerField(default=0)
    bypasses = models.PositiveIntegerField(default=0)
    file_id = models.BigIntegerField(null=True)  # the StoredFile a delivery delivered (no foreign key: never waits on it)
    delivered_at = models.DateTimeField(null=True)

    class Meta:
        verbose_name_plural = "counter entries"

    def __str__(self) -> str:
        return f"{self.day}: +{self.deliveries} deliveries, +{self.verifications} verifications, +{self.bypasses} bypasses"


class ForceSubChannel(models.Model):
    """A channel users must join before they get files."""

    chat_id = models.BigIntegerField(
        unique=True,
        validators=[channel_id_validate],
        help_text="Channel id, like -1001234567890. The bot must be an admin there.",
    )
    title = models.CharField(max_length=128, help_text="Shown on the join button.")
    invite_link = models.URLField(
        blank=True,
        help_text="https://t.me/+... (a join-request link in join-request mode). May stay empty when the bot makes expiring links.",
    )
    join_request = models.BooleanField(
        default=False, help_text="Join-request mode: a user who has asked to join counts as subscribed."
    )
    invite_ttl_minutes = models.PositiveIntegerField(
        "expiring links (minutes)",
        default=0,
        validators=[MaxValueValidator(INVITE_TTL_MAX_MINUTES)],
        help_text="The bot makes its own invite links that expire after this long (join-request links in join-request "
        "mode), and reuses one while it is valid. 0: the fixed invite link above.",
    )
    current_link = models.CharField(max_length=255, blank=True, editable=False, help_text="The bot's expiring link in use.")
    current_link_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    enabled = models.BooleanField(default=True)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "force-subscribe channel"

    def __str__(self) -> str:
        return self.title

    def clean(self):
        errors = {}

        if self.chat_id is not None and self.chat_id >= 0:
            errors["chat_id"] = "A channel id is negative, like -1001234567890 (forward a post to @userinfobot to see it)."
        elif self.chat_id is not None and self.chat_id == storage_channel_load():
            errors["chat_id"] = (
                "That is the storage channel (STORAGE_CHANNEL_ID): users who joined it would see every stored file."
            )
        elif self.chat_id is not None and self.chat_id == BotSettings.load().backup_channel_id:
            errors["chat_id"] = "That is the backup channel (Bot settings): users who joined it would see every stored file."
        if self.invite_link and not self.invite_link.startswith(("https://t.me/", "https://telegram.me/")):
            errors["invite_link"] = "Use the channel's t.me invite link, like https://t.me/+AbCdEf or https://t.me/yourchannel."
        if not self.invite_link and not self.invite_ttl_minutes:
            errors["invite_link"] = "Give the channel's invite link, or let the bot make expiring links (minutes below)."
        if errors:
            raise ValidationError(errors)


class ChannelJoinRequest(models.Model):
    channel_id = models.BigIntegerField()
    user_id = models.BigIntegerField()
    requested_at = models.DateTimeField(default=clock.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel_id", "user_id"], name="joinrequest_channel_user")]

    def __str__(self) -> str:
        return f"{self.user_id} asked to join {self.channel_id}"
