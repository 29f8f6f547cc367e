"""Stored files behind deep links, and the deletions their delivery schedules."""

import secrets

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.ranges import channel_id_validate
from botapp.telegram.limits import DELETE_WINDOW_MINUTES, MESSAGE_ID_MAX

# Telegram lets a bot delete its messages for 48 hours; any lifetime we schedule must fit in it.
TELEGRAM_DELETE_WINDOW_MINUTES = DELETE_WINDOW_MINUTES  # Telegram: bots delete only for 48 h
MAX_BATCH = 200  # messages behind one link; a user receives them in one go
STREAM_LIFETIME_HOURS_MAX = 24 * 365  # a stream link lasts at most a year: a link that must outlive it is re-made


def message_ids_problem(ids) -> str:
    """Why `ids` cannot be a link's messages, or "": a list of 1 to MAX_BATCH message ids, each
    a positive 32-bit number, none twice (a link delivers each message once; Telegram refuses a
    forward that names one message twice)."""
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return "Give a list of positive message ids, e.g. [12] or [12, 13, 14]."
    if len(ids) > MAX_BATCH:
        return f"A link holds at most {MAX_BATCH} messages (got {len(ids):,})."
    if bad := [i for i in ids if not 0 < i <= MESSAGE_ID_MAX]:
        return f"{bad[0]} is not a Telegram message id (they go from 1 to {MESSAGE_ID_MAX:,})."
    seen = set()
    for i in ids:
        if i in seen:
            return f"Message {i} is listed twice: a link delivers each message once."
        seen.add(i)
    return ""


def message_ids_validate(ids) -> None:
    if problem := message_ids_problem(ids):
        raise ValidationError(problem)


def share_id_new() -> str:
    # 72 random bits, 12 URL-safe characters: fits a deep-link payload (max 64 chars of [A-Za-z0-9_-]).
    return secrets.token_urlsafe(9)


class RemovedFile(models.Model):
    """The share id of a stored file an operator removed. Its link answers that the files were
    removed; a payload of the same shape that no file ever had is a campaign tag (an ad's
    `fb_ad_123456`, shared/seeds/002), so the welcome is not refused to the users an ad brings."""

    share_id = models.CharField(max_length=32, unique=True)
    removed_at = models.DateTimeField(default=clock.now)

    def __str__(self) -> str:
        return self.share_id


class StoredFile(models.Model):
    """One deep link: one stored message, or a batch of them, in the storage channel."""

    share_id = models.CharField(max_length=32, unique=True, default=share_id_new)
    source_chat_id = models.BigIntegerField(
        validators=[channel_id_validate], help_text="The storage channel that holds the messages (-100…)."
    )
    message_ids = models.JSONField(
        help_text="Message ids in the storage channel, delivered in this order.", validators=[message_ids_validate]
    )
    title = models.CharField(max_length=255, blank=True)
    # The copy in the backup channel (Bot settings), used when the storage channel's messages are gone.
    backup_chat_id = models.BigIntegerField(null=True, blank=True, help_text="The backup channel holding the copy.")
    backup_message_ids = models.JSONField(
        null=True, blank=True, help_text="The copies' ids in the backup channel, in delivery order."
    )
    # Per-link settings: each overrides Bot settings for this link only (empty / unknown: as Bot settings).
    protect_content = models.BooleanField(
        null=True,
        blank=True,
        default=None,
        help_text="Yes: users cannot forward or save the delivered copies; No: they can; Unknown: as Bot settings.",
    )
    auto_delete_minutes = models.PositiveIntegerField(
        "auto-delete after (minutes)",
        null=True,
        blank=True,
        validators=[MaxValueValidator(TELEGRAM_DELETE_WINDOW_MINUTES)],
        help_text="For this link: delete delivered files after this many minutes (0: never; at most 2880, "
        "Telegram's 48 h). Empty: as Bot settings.",
    )
    skip_verification = models.BooleanField(
        default=False, help_text="Users get this link's files without token verification (force-subscribe still applies)."
    )
    expires_at = models.DateTimeField(
        "link expires at", null=True, blank=True, help_text="From then on the link answers that it has expired. Empty: never."
    )

    class StreamLinks(models.TextChoices):
        SETTINGS = "", "As Bot settings"
        ON = "on", "On: everyone who gets the files"
        PREMIUM = "premium", "Premium users only"
        OFF = "off", "Off"

    stream_links = models.CharField(
        "stream and download links",
        max_length=8,
        choices=StreamLinks.choices,
        default=StreamLinks.SETTINGS,
        db_default=StreamLinks.SETTINGS,  # the previous release's inserts name no such column (docs/operating.md)
        blank=True,
        help_text="For this link: a ▶️ Stream / ⬇️ Download button under the delivered files. Empty: as Bot settings.",
    )
    stream_lifetime_hours = models.PositiveIntegerField(
        "stream links last (hours)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(STREAM_LIFETIME_HOURS_MAX)],
        help_text="For this link: how long a stream or download link works once given. Empty: as Bot settings.",
    )
    # Every stream link carries the generation it was made in; "Revoke stream links" moves it on,
    # so this file's links made before stop working and no other file's do.
    stream_generation = models.PositiveIntegerField(default=0, db_default=0)
    # When the streaming process last found the file's message gone (deleted from the storage
    # channel, no backup copy): the console shows its links as gone.
    stream_gone_at = models.DateTimeField(null=True, blank=True)
    delivery_count = models.PositiveIntegerField(default=0)
    last_delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=clock.now)
    created_by = models.BigIntegerField(null=True, blank=True, help_text="Telegram id of the admin who stored it.")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The backfill: files with no backup copy yet, oldest first.
            models.Index(fields=["created_at"], name="file_no_backup", condition=Q(backup_chat_id__isnull=True)),
        ]

    def __str__(self) -> str:
        return self.title or f"file {self.share_id}"

    # What this link's delivery does, its own settings over Bot settings (`conf`).

    def is_expired(self, now) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def protect_for(self, conf) -> bool:
        return conf.protect_content if self.protect_content is None else self.protect_content

    def auto_delete_minutes_for(self, conf) -> int:
        return conf.auto_delete_minutes if self.auto_delete_minutes is None else self.auto_delete_minutes

    def verification_for(self, conf) -> bool:
        return conf.verification_enabled and not self.skip_verification

    def stream_mode_for(self, conf) -> str:
        """on, premium or off: this link's own choice, else Bot settings'."""
        return self.stream_links or conf.stream_links

    def stream_lifetime_hours_for(self, conf) -> int:
        return conf.stream_lifetime_hours if self.stream_lifetime_hours is None else self.stream_lifetime_hours


class PendingBatch(models.Model):
    """An admin in the middle of /batch: the first message is known, the last is awaited."""

    admin_id = models.BigIntegerField(unique=True)
    first_message_id = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=clock.now)

    class Meta:
        verbose_name_plural = "pending batches"

    def __str__(self) -> str:
        return f"/batch by {self.admin_id}"


class AlbumClaim(models.Model):
    """An album (media group) an admin sent to be stored. Telegram delivers each of its messages
    as an update of its own, handled on any of runbot's threads: the first to insert this row
    stores the whole album as one file; the others find it and stay silent."""

    chat_id = models.BigIntegerField()
    media_group_id = models.BigIntegerField()
    claimed_at = models.DateTimeField(default=clock.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat_id", "media_group_id"], name="album_claim_once")]

    def __str__(self) -> str:
        return f"album {self.media_group_id} from {self.chat_id}"


class ClaimStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    CLAIMED = "claimed", "Claimed by a sweep"
    EXPIRED = "expired", "Expired: not deleted within Telegram's 48 h"
    # Written before runbot copies the files (intent before effect); pending once their ids are.
    DELIVERING = "delivering", "Being delivered: message ids not written yet"


class PendingDeletion(models.Model):
    """Messages to delete from a chat at `delete_at`; survives any restart. A deletion Telegram
    did not make is tried again later (`delete_at` moves on, `attempts` counts the failures) until
    Telegram's 48 h window closes; then the row stays, `expired`: the messages are still in the chat."""

    chat_id = models.BigIntegerField()
    message_ids = models.JSONField()
    delete_at = models.DateTimeField()
    share_id = models.CharField(max_length=32, blank=True, help_text='Deep link for the "Get files again" button.')
    status = models.CharField(max_length=16, choices=ClaimStatus.choices, default=ClaimStatus.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Failed tries so far (each waits longer for the next).")
    # Cleared when the notice is given up: its outcome unknown (a lost answer, a worker that died
    # holding the row) for longer than TELEGRAM_RANDOM_ID_WINDOW (the deletion itself is repeated:
    # harmless).
    notice_due = models.BooleanField(default=True, help_text='Send the "deleted" notice after deleting.')
    # The notice's first attempt of unknown outcome: it is sent again with the same random_id
    # (`send_key` kind "n": the row) until TELEGRAM_RANDOM_ID_WINDOW after this, then given up.
    notice_from = models.DateTimeField(
        null=True, blank=True, help_text='First attempt of the "deleted" notice whose outcome is unknown.'
    )
    created_at = models.DateTimeField(default=clock.now)
    # A file delivery's row, written before the copy (intent before effect): the random_id key
    # of its copy, so the same update handled again (runbot killed mid-delivery) finds this row
    # instead of writing another, and the id of the message that asked for the file (the copy's
    # ids are above it: where to look for a copy whose message ids were never written).
    # db_default: a row inserted without it (raw SQL, a process of the version before, mid-deploy) is fine.
    delivery_key = models.CharField(max_length=96, blank=True, default="", db_default="")
    after_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            # The message deleter's claim: pending rows in due order.
            models.Index(fields=["delete_at"], name="deletion_due", condition=Q(status="pending")),
            # The reaper: claims whose lease ran out.
            models.Index(fields=["lease_until"], name="deletion_lease", condition=Q(status="claimed")),
            # The dashboard's count of expired deletions, and the console's list of them.
            models.Index(fields=["created_at"], name="deletion_expired", condition=Q(status="expired")),
            # The deletion sweep's look for deliveries cut off before their ids were written.
            models.Index(fields=["created_at"], name="deletion_delivering", condition=Q(status="delivering")),
        ]
        constraints = [
            # One row per delivery: a replayed update finds the row its first handling wrote.
            models.UniqueConstraint(fields=["delivery_key"], name="deletion_delivery_key", condition=~Q(delivery_key="")),
        ]

    def __str__(self) -> str:
        return f"delete {len(self.message_ids)} message(s) in {self.chat_id} at {self.delete_at:%Y-%m-%d %H:%M}"
