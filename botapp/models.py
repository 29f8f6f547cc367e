"""Courier's data. Every future action is a row with a due time and a status (see ARCHITECTURE.md);
each index below names the query it serves."""

import secrets

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock

# Telegram lets a bot delete its messages for 48 hours; any lifetime we schedule must fit in it.
TELEGRAM_DELETE_WINDOW_MINUTES = 48 * 60


def share_id_new() -> str:
    # 72 random bits, 12 URL-safe characters: fits a deep-link payload (max 64 chars of [A-Za-z0-9_-]).
    return secrets.token_urlsafe(9)


class TelegramUser(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        STOPPED = "stopped", "Stopped (/stop)"
        BLOCKED = "blocked", "Blocked the bot"
        DEACTIVATED = "deactivated", "Account deleted"

    telegram_id = models.BigIntegerField(unique=True)
    username = models.CharField(max_length=64, blank=True)
    first_name = models.CharField(max_length=128, blank=True)
    last_name = models.CharField(max_length=128, blank=True)
    language_code = models.CharField(max_length=16, blank=True)
    start_payload = models.CharField(max_length=64, blank=True, help_text="The /start payload that first brought the user.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    joined_at = models.DateTimeField(default=clock.now)
    last_seen_at = models.DateTimeField(default=clock.now)
    verified_until = models.DateTimeField(null=True, blank=True)
    verification_count = models.PositiveIntegerField(default=0)
    bypass_count = models.PositiveIntegerField(default=0)
    banned_until = models.DateTimeField(null=True, blank=True, help_text="Temporarily banned for bypassing verification.")

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


class StoredFile(models.Model):
    """One deep link: one stored message, or a batch of them, in the storage channel."""

    share_id = models.CharField(max_length=32, unique=True, default=share_id_new)
    source_chat_id = models.BigIntegerField(help_text="The storage channel that holds the messages.")
    message_ids = models.JSONField(help_text="Message ids in the storage channel, delivered in this order.")
    title = models.CharField(max_length=255, blank=True)
    protect_content = models.BooleanField(default=False, help_text="Users cannot forward or save the delivered copies.")
    delivery_count = models.PositiveIntegerField(default=0)
    last_delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=clock.now)
    created_by = models.BigIntegerField(null=True, blank=True, help_text="Telegram id of the admin who stored it.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title or f"file {self.share_id}"

    def clean(self):
        if self.source_chat_id is not None and self.source_chat_id >= 0:
            raise ValidationError({"source_chat_id": "A channel id is negative, like -1001234567890."})
        ids = self.message_ids
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and i > 0 for i in ids):
            raise ValidationError({"message_ids": "Give a list of positive message ids, e.g. [12] or [12, 13, 14]."})


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


class ForceSubChannel(models.Model):
    """A channel users must join before they get files."""

    chat_id = models.BigIntegerField(unique=True, help_text="Channel id, like -1001234567890. The bot must be an admin there.")
    title = models.CharField(max_length=128, help_text="Shown on the join button.")
    invite_link = models.URLField(help_text="https://t.me/+... (a join-request link in join-request mode).")
    join_request = models.BooleanField(
        default=False, help_text="Join-request mode: a user who has asked to join counts as subscribed."
    )
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
        if self.invite_link and not self.invite_link.startswith(("https://t.me/", "https://telegram.me/")):
            errors["invite_link"] = "Use the channel's t.me invite link, like https://t.me/+AbCdEf or https://t.me/yourchannel."
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


class PendingBatch(models.Model):
    """An admin in the middle of /batch: the first message is known, the last is awaited."""

    admin_id = models.BigIntegerField(unique=True)
    first_message_id = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=clock.now)

    class Meta:
        verbose_name_plural = "pending batches"

    def __str__(self) -> str:
        return f"/batch by {self.admin_id}"


class ClaimStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    CLAIMED = "claimed", "Claimed by a sweep"


class PendingDeletion(models.Model):
    """Messages to delete from a chat at `delete_at`; survives any restart."""

    chat_id = models.BigIntegerField()
    message_ids = models.JSONField()
    delete_at = models.DateTimeField()
    share_id = models.CharField(max_length=32, blank=True, help_text='Deep link for the "Get files again" button.')
    status = models.CharField(max_length=16, choices=ClaimStatus.choices, default=ClaimStatus.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Failed tries so far; given up after a few.")
    created_at = models.DateTimeField(default=clock.now)

    class Meta:
        indexes = [
            # The message deleter's claim: pending rows in due order.
            models.Index(fields=["delete_at"], name="deletion_due", condition=Q(status="pending")),
            # The reaper: claims whose lease ran out.
            models.Index(fields=["lease_until"], name="deletion_lease", condition=Q(status="claimed")),
        ]

    def __str__(self) -> str:
        return f"delete {len(self.message_ids)} message(s) in {self.chat_id} at {self.delete_at:%Y-%m-%d %H:%M}"


class Broadcast(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SCHEDULED = "scheduled", "Scheduled"
        QUEUED = "queued", "Queued"
        SENDING = "sending", "Sending"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    class MediaKind(models.TextChoices):
        NONE = "", "Text only"
        PHOTO = "photo", "Photo"
        VIDEO = "video", "Video"
        DOCUMENT = "document", "Document"
        ANIMATION = "animation", "Animation"
        AUDIO = "audio", "Audio"

    title = models.CharField(max_length=255, help_text="For operators only; users never see it.")
    text = models.TextField(help_text="Message text, or the caption when there is media. Telegram HTML allowed.")
    media_kind = models.CharField(max_length=16, choices=MediaKind.choices, blank=True)
    media = models.CharField(max_length=512, blank=True, help_text="A Telegram file_id or an https:// URL.")
    buttons = models.TextField(
        blank=True, help_text='One button per line: "Text | https://example.com". Use "||" to put several on one row.'
    )
    protect_content = models.BooleanField(default=False)
    delete_after_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(TELEGRAM_DELETE_WINDOW_MINUTES)],
        help_text="Delete from every chat after this long (at most 48 h, Telegram's limit). Empty: keep.",
    )
    scheduled_at = models.DateTimeField(
        null=True, blank=True, help_text="Send at this time (your time zone). Empty: as soon as you start it."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    created_at = models.DateTimeField(default=clock.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    sent = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    blocked = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The sender's check for scheduled broadcasts that came due.
            models.Index(fields=["scheduled_at"], name="broadcast_scheduled", condition=Q(status="scheduled")),
        ]

    def __str__(self) -> str:
        return self.title


class BroadcastDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"
        BLOCKED = "blocked", "User blocked the bot"
        INTERRUPTED = "interrupted", "Interrupted (not re-sent)"
        DELETED = "deleted", "Deleted after its lifetime"

    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="deliveries")
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="broadcast_deliveries")
    chat_id = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    message_id = models.BigIntegerField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    delete_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=255, blank=True)

    class Meta:
        verbose_name_plural = "broadcast deliveries"
        constraints = [models.UniqueConstraint(fields=["broadcast", "user"], name="delivery_broadcast_user")]
        indexes = [
            # The broadcast sender's claim.
            models.Index(fields=["broadcast", "id"], name="delivery_pending", condition=Q(status="pending")),
            # The broadcast deleter's claim: sent messages whose lifetime is over.
            models.Index(fields=["delete_at"], name="delivery_delete_due", condition=Q(status="sent", delete_at__isnull=False)),
            # The reaper: sends that crashed mid-call.
            models.Index(fields=["lease_until"], name="delivery_lease", condition=Q(status="sending")),
        ]

    def __str__(self) -> str:
        return f"broadcast {self.broadcast_id} -> {self.chat_id}: {self.status}"


class Sequence(models.Model):
    """Onboarding: timed follow-up messages after a new user's first /start."""

    name = models.CharField(max_length=128)
    enabled = models.BooleanField(default=True, help_text="Only new users who start while it is enabled are enrolled.")
    start_payload = models.CharField(
        max_length=64,
        blank=True,
        help_text="Only users who came through this /start payload (e.g. a campaign). Empty: every new user.",
    )
    created_at = models.DateTimeField(default=clock.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SequenceStep(models.Model):
    class Condition(models.TextChoices):
        ALWAYS = "always", "Always"
        NOT_CLICKED = "not_clicked", "Only if the user has NOT clicked the button"
        CLICKED = "clicked", "Only if the user HAS clicked the button"

    sequence = models.ForeignKey(Sequence, on_delete=models.CASCADE, related_name="steps")
    delay_minutes = models.PositiveIntegerField(help_text="Sent this long after the user's first /start.")
    text = models.TextField(help_text="Message text, or the caption with media. Telegram HTML allowed.")
    media_kind = models.CharField(max_length=16, choices=Broadcast.MediaKind.choices, blank=True)
    media = models.CharField(max_length=512, blank=True, help_text="A Telegram file_id or an https:// URL.")
    buttons = models.TextField(blank=True, help_text='"Text | https://url" per line; add "| key" to track clicks.')
    protect_content = models.BooleanField(default=False)
    condition = models.CharField(max_length=16, choices=Condition.choices, default=Condition.ALWAYS)
    condition_button = models.CharField(max_length=64, blank=True, help_text="The click key the condition looks at.")

    class Meta:
        ordering = ["sequence", "delay_minutes", "id"]

    def __str__(self) -> str:
        return f"{self.sequence}: after {self.delay_minutes} min"

    def clean(self):
        if self.condition != self.Condition.ALWAYS and not self.condition_button:
            raise ValidationError({"condition_button": "Name the button key this condition looks at."})
        if bool(self.media_kind) != bool(self.media.strip()):
            raise ValidationError("Choose a media kind and give its file id or URL, or neither.")


class SequenceMessage(models.Model):
    """One step for one user, due at a time: sent at most once."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"
        INTERRUPTED = "interrupted", "Interrupted (not re-sent)"

    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="sequence_messages")
    step = models.ForeignKey(SequenceStep, on_delete=models.CASCADE, related_name="messages")
    chat_id = models.BigIntegerField()
    due_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "step"], name="seqmsg_user_step")]
        indexes = [
            # The sequence sender's claim.
            models.Index(fields=["due_at"], name="seqmsg_due", condition=Q(status="pending")),
            # The reaper: sends that crashed mid-call.
            models.Index(fields=["lease_until"], name="seqmsg_lease", condition=Q(status="sending")),
        ]

    def __str__(self) -> str:
        return f"{self.step} -> {self.chat_id}: {self.status}"


class ButtonClick(models.Model):
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="clicks")
    button = models.CharField(max_length=64, help_text="The button's key (callback data or link name).")
    clicked_at = models.DateTimeField(default=clock.now)

    class Meta:
        indexes = [models.Index(fields=["user", "button"], name="click_user_button")]

    def __str__(self) -> str:
        return f"{self.user_id} clicked {self.button}"


class BotSettings(models.Model):
    """The bot's behaviour, edited in the admin. One row (pk=1); `BotSettings.load()` returns it."""

    bot_username = models.CharField(
        max_length=64, blank=True, help_text="Filled by runbot at start-up; used to build deep links."
    )
    auto_delete_minutes = models.PositiveIntegerField(
        default=30,
        validators=[MaxValueValidator(TELEGRAM_DELETE_WINDOW_MINUTES)],
        help_text="Delete delivered files after this many minutes (0: never). At most 2880 (48 h): Telegram's limit.",
    )
    file_caption = models.TextField(blank=True, help_text="Caption for delivered files; empty keeps the original.")
    protect_content = models.BooleanField(default=False, help_text="Delivered files cannot be forwarded or saved.")
    verification_enabled = models.BooleanField(default=False)
    verification_hours = models.PositiveIntegerField(
        default=24, validators=[MinValueValidator(1)], help_text="How long a verification lasts."
    )
    token_ttl_minutes = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1)], help_text="How long an unused token stays valid."
    )
    daily_token_limit = models.PositiveIntegerField(default=5, validators=[MinValueValidator(1)])
    bypass_seconds = models.PositiveIntegerField(default=20, help_text="Returning with a token faster than this is a bypass.")
    shortener_api_url = models.CharField(
        max_length=255, blank=True, help_text='e.g. https://shortener.example/api, or empty / "none" for the direct link.'
    )
    shortener_api_key = models.CharField(max_length=255, blank=True)
    how_to_verify_url = models.URLField(blank=True)
    welcome_text = models.TextField(default="Hello {first_name}! I deliver files shared through my links.")
    help_text = models.TextField(default="Open a file link to get its files. /about, /faq, /stop to stop messages.")
    about_text = models.TextField(default="Courier delivers files through Telegram links.")
    faq_text = models.TextField(default="Why are files deleted? To keep your chat clean: tap the button to get them again.")
    deleted_notice_text = models.TextField(default="Previous message was deleted.")

    class Meta:
        verbose_name = "bot settings"
        verbose_name_plural = "bot settings"

    def __str__(self) -> str:
        return "Bot settings"

    def save(self, *args, **kwargs):
        from django.core.cache import cache

        self.pk = 1
        super().save(*args, **kwargs)
        cache.delete("courier:bot_username")  # see services.files.bot_username_cached

    @classmethod
    def load(cls) -> "BotSettings":
        obj, _ = cls.objects.get_or_create(pk=1)
        return obj
