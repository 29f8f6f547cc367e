"""Broadcasts and their per-user deliveries.

A scheduled message (the HTTP API's `/messages/`) is a broadcast too (`kind` message): it has an
audience (every active user, listed Telegram ids, or the users a start payload brought), any number
of attachments, and goes through the same sender, deliveries and counters.
"""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.files import TELEGRAM_DELETE_WINDOW_MINUTES
from botapp.models.outgoing import OutgoingSend, SendStatus, send_statuses
from botapp.models.uploads import attachment_upload_to
from botapp.models.users import TelegramUser


class Broadcast(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SCHEDULED = "scheduled", "Scheduled"
        QUEUED = "queued", "Queued"
        SENDING = "sending", "Sending"
        PAUSED = "paused", "Paused"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    class Kind(models.TextChoices):
        BROADCAST = "broadcast", "Broadcast"
        MESSAGE = "message", "Scheduled message"

    class Audience(models.TextChoices):
        ALL = "all", "Every active user"
        USERS = "users", "Listed users"
        PAYLOAD = "payload", "Users who came through a start payload"

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
    pin = models.BooleanField("pin in chat", default=False, help_text="Pin the message in each chat (without a notification).")
    # A copy of existing message(s) (an admin's /broadcast reply, a marked channel post): sent without
    # the "forwarded from" header; an album stays an album. With `text` set it is sent as composed
    # above instead (a channel post without its marker), the copy's origin kept here.
    copy_chat_id = models.BigIntegerField(null=True, blank=True, editable=False, help_text="Chat of the copied message(s).")
    copy_message_ids = models.JSONField(default=list, blank=True, editable=False, help_text="The copied message(s).")
    origin = models.CharField(
        max_length=16,
        choices=[("admin", "Operator console"), ("command", "/broadcast in the bot"), ("channel", "Channel post")],
        default="admin",
        editable=False,
    )
    created_by = models.BigIntegerField(null=True, blank=True, editable=False, help_text="Telegram id of the admin.")
    # /broadcast's progress message, edited by the sender as it goes.
    report_chat_id = models.BigIntegerField(null=True, blank=True, editable=False)
    report_message_id = models.BigIntegerField(null=True, blank=True, editable=False)
    reported_at = models.DateTimeField(null=True, blank=True, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.BROADCAST)
    audience = models.CharField(max_length=16, choices=Audience.choices, default=Audience.ALL)
    audience_payload = models.CharField(
        max_length=64, blank=True, help_text="With the payload audience: users whose first /start carried it."
    )
    # With the users audience: the Telegram ids listed, in the order given (rows are made when it starts).
    recipient_ids = models.JSONField(default=list, blank=True)
    api_client = models.CharField(max_length=64, blank=True, help_text="The API client that created it (empty: the admin).")
    created_at = models.DateTimeField(default=clock.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A run that hands rows back for an exception that is not Telegram's (a bug) notes it here; the
    # same one in PAUSE_AFTER runs in a row pauses the broadcast (services/broadcasts.py).
    error_last = models.CharField(max_length=255, blank=True, editable=False)
    error_streak = models.PositiveSmallIntegerField(default=0, editable=False)
    paused_reason = models.TextField(blank=True, editable=False)
    # Rows still being made (a large audience: services/broadcasts.py, `broadcast_prepare`): the last
    # user whose row exists (their TelegramUser pk; with listed users, how many of the list are
    # done). None: every row is made.
    prepare_after = models.BigIntegerField(null=True, blank=True, editable=False)
    # While rows are being made: how many recipients it will have, counted when the worker took it
    # up (users who join meanwhile may add a few). Progress: "preparing `total` of `audience_size`".
    audience_size = models.PositiveIntegerField(null=True, blank=True, editable=False)
    total = models.PositiveIntegerField(default=0)
    sent = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    blocked = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0, help_text="Users who stopped or became unreachable after it was queued.")
    interrupted = models.PositiveIntegerField(
        default=0, help_text="Sends whose outcome is unknown (a worker died mid-call, or no answer came): never re-sent."
    )
    not_users = models.PositiveIntegerField(
        default=0, help_text="Recipients who are not users of the bot (unknown, or never wrote to it): nothing was sent."
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
        SendStatus.EXPIRED,
        SendStatus.NOT_USER,
    )

    # No index of its own: the unique (broadcast, user) index starts with it (a second one cost
    # space in every row and an index write per row made).
    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="broadcast_deliveries")
    delete_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "broadcast deliveries"
        constraints = [models.UniqueConstraint(fields=["broadcast", "user"], name="delivery_broadcast_user")]
        indexes = [
            # The broadcast sender's claim.
            models.Index(fields=["broadcast", "id"], name="delivery_pending", condition=Q(status="pending")),
            # Rows being sent, one index for two queries: "is the broadcast done?" (no pending row,
            # above, and none here, without a scan of all its rows) and the reaper's (sends whose
            # lease ran out: a walk of this small index). One index entry per claimed row, not two
            # (migration 0020: a separate (lease_until) index made every claim slower).
            models.Index(fields=["broadcast", "lease_until"], name="delivery_sending", condition=Q(status="sending")),
            # The broadcast deleter's claim: sent messages whose lifetime is over.
            models.Index(fields=["delete_at"], name="delivery_delete_due", condition=Q(status="sent", delete_at__isnull=False)),
            # The dashboard's count of messages left in chats past Telegram's 48 h (a lifetime deletion not made).
            models.Index(fields=["broadcast"], name="delivery_expired", condition=Q(status="expired")),
            # Scheduler statistics: messages sent in the last 24 h.
            models.Index(fields=["sent_at"], name="delivery_sent_at", condition=Q(sent_at__isnull=False)),
            # A broadcast's page: the most common error of its failed sends (services/outcomes.py).
            models.Index(fields=["broadcast", "error"], name="delivery_failed", condition=Q(status="failed")),
        ]

    def __str__(self) -> str:
        return f"broadcast {self.broadcast_id} -> {self.chat_id}: {self.status}"


class BroadcastClaim(models.Model):
    """A sender's lease on the rows of a broadcast with ids in [first_id, last_id]: the pending rows
    of that range when it was claimed, which one worker is sending. The rows stay `pending` while
    claimed: a claim writes one row here, not every delivery (leasing a batch by setting its rows
    `sending` wrote WAL records and an entry into four indexes per row, most of the claim's time;
    scheduler/jobs/broadcast_send.py `deliveries_claim`, which calls migration 0022's function
    `courier_broadcast_claim`). A claim's range never holds another's (a sender's walk stops at
    each live claim), and only one sender walks a broadcast at a time.

    The worker deletes the claim in the transaction that records its last rows. A claim whose lease
    ran out belongs to a worker that died: the reaper gives its rows still pending `retry_from`
    (`claimed_at`, unless an earlier attempt set one), or makes them `interrupted` past
    TELEGRAM_RANDOM_ID_WINDOW, and deletes it; a record that comes after that finds its claim gone
    and writes nothing (the rows are someone else's now)."""

    # No index of its own: (broadcast, first_id) below starts with it.
    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="claims", db_index=False)
    first_id = models.BigIntegerField()
    last_id = models.BigIntegerField()
    claimed_at = models.DateTimeField()
    lease_until = models.DateTimeField()

    class Meta:
        indexes = [
            # A sender's walk: the live claims of its broadcast above where it starts.
            models.Index(fields=["broadcast", "first_id"], name="claim_range"),
            # The reaper's: claims whose lease ran out.
            models.Index(fields=["lease_until"], name="claim_lease"),
        ]

    def __str__(self) -> str:
        return f"broadcast {self.broadcast_id}: rows {self.first_id}-{self.last_id} until {self.lease_until:%H:%M:%S}"


class BroadcastAttachment(models.Model):
    """One file of a scheduled message. An uploaded file is kept in Django's default storage
    (`upload`, under a name of ours: botapp/models/uploads.py; `file_name` is the uploader's) until the sender has uploaded it to Telegram once (`file_id`, from Telegram's
    answer); every recipient then gets it by that file id. A file id given by the caller is used as
    it is. Several attachments go as albums where Telegram allows (botapp/services/attachments.py)."""

    class Kind(models.TextChoices):
        PHOTO = "photo", "Photo"
        VIDEO = "video", "Video"
        DOCUMENT = "document", "Document"
        AUDIO = "audio", "Audio"

    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="attachments")
    position = models.PositiveSmallIntegerField(default=0)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    upload = models.FileField(upload_to=attachment_upload_to, blank=True, max_length=255)
    file_name = models.CharField(max_length=255, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    file_id = models.CharField(max_length=512, blank=True, help_text="Telegram's file id (given, or returned by the upload).")
    uploaded_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=255, blank=True, help_text="Why Telegram refused the upload.")

    class Meta:
        ordering = ["broadcast", "position", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.file_name or self.file_id[:16]}"
