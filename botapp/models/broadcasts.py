"""Broadcasts and their per-user deliveries."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.files import TELEGRAM_DELETE_WINDOW_MINUTES
from botapp.models.outgoing import OutgoingSend, SendStatus, send_statuses
from botapp.models.users import TelegramUser


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
    skipped = models.PositiveIntegerField(default=0, help_text="Users who stopped or became unreachable after it was queued.")
    interrupted = models.PositiveIntegerField(
        default=0, help_text="Sends whose outcome is unknown (a worker died mid-call, or no answer came): never re-sent."
    )
    # The last "Send a test": when it was asked for, and what each admin's send gave
    # ([{"chat_id", "ok", "error", "at"}], written by the worker that sent it).
    test_requested_at = models.DateTimeField(null=True, blank=True)
    test_results = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The sender's check for scheduled broadcasts that came due.
            models.Index(fields=["scheduled_at"], name="broadcast_scheduled", condition=Q(status="scheduled")),
        ]

    def __str__(self) -> str:
        return self.title


class BroadcastDelivery(OutgoingSend):
    """One broadcast to one user. Sent rows of a broadcast with a lifetime carry `delete_at`, when
    the broadcast deleter removes them from the chat."""

    Status = send_statuses(
        "Status",
        SendStatus.PENDING,
        SendStatus.SENDING,
        SendStatus.SENT,
        SendStatus.SKIPPED,
        SendStatus.FAILED,
        SendStatus.BLOCKED,
        SendStatus.INTERRUPTED,
        SendStatus.DELETED,
    )

    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="deliveries")
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="broadcast_deliveries")
    delete_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "broadcast deliveries"
        constraints = [models.UniqueConstraint(fields=["broadcast", "user"], name="delivery_broadcast_user")]
        indexes = [
            # The broadcast sender's claim.
            models.Index(fields=["broadcast", "id"], name="delivery_pending", condition=Q(status="pending")),
            # "Is the broadcast done?": no pending (above) and no sending row, without a scan of all its rows.
            models.Index(fields=["broadcast"], name="delivery_sending", condition=Q(status="sending")),
            # The broadcast deleter's claim: sent messages whose lifetime is over.
            models.Index(fields=["delete_at"], name="delivery_delete_due", condition=Q(status="sent", delete_at__isnull=False)),
            # The reaper: sends that crashed mid-call.
            models.Index(fields=["lease_until"], name="delivery_lease", condition=Q(status="sending")),
        ]

    def __str__(self) -> str:
        return f"broadcast {self.broadcast_id} -> {self.chat_id}: {self.status}"
