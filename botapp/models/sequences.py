"""Onboarding sequences: steps, and each user's step messages."""

import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q

from botapp import clock
from botapp.models.broadcasts import Broadcast
from botapp.models.buttons import KEY_RE
from botapp.models.outgoing import OutgoingSend, SendStatus, send_statuses
from botapp.models.ranges import SEQUENCE_DELAY_SECONDS_MAX
from botapp.models.users import TelegramUser
from botapp.telegram.limits import MESSAGE_ID_MAX

# Telegram's deep-link payloads: "up to 64 characters; A-Z, a-z, 0-9, _ and -" (Bot API, deep linking).
START_PAYLOAD_RE = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")


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

    def clean(self):
        if self.start_payload and not START_PAYLOAD_RE.match(self.start_payload):
            raise ValidationError(
                {"start_payload": "A start payload uses A-Z, a-z, 0-9, _ and - only (Telegram's deep links carry no other)."}
            )


class SequenceStep(models.Model):
    class Condition(models.TextChoices):
        ALWAYS = "always", "Always"
        NOT_CLICKED = "not_clicked", "Only if the user has NOT clicked the button"
        CLICKED = "clicked", "Only if the user HAS clicked the button"

    sequence = models.ForeignKey(Sequence, on_delete=models.CASCADE, related_name="steps")
    delay_seconds = models.PositiveIntegerField(
        validators=[MaxValueValidator(SEQUENCE_DELAY_SECONDS_MAX)],
        help_text=f"Sent this many seconds after the user's /start (e.g. 40, 180 for 3 min, 7200 for 2 h): "
        f"0 to {SEQUENCE_DELAY_SECONDS_MAX:,} (a year).",
    )
    text = models.TextField(
        blank=True, help_text="Message text, or the caption with media. Telegram HTML allowed. Empty with a post."
    )
    post_id = models.PositiveIntegerField(
        "post",
        null=True,
        blank=True,
        validators=[MaxValueValidator(MESSAGE_ID_MAX)],
        help_text="A post of the posts channel (Bot settings), by its message id: sent as a copy, with its media "
        "and formatting, and the buttons below. Leave text and media empty.",
    )
    post_chat_id = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="The posts channel the post was chosen from."
    )
    media_kind = models.CharField(max_length=16, choices=Broadcast.MediaKind.choices, blank=True)
    media = models.CharField(max_length=512, blank=True, help_text="A Telegram file_id or an https:// URL.")
    buttons = models.TextField(
        blank=True,
        help_text='"Text | https://url" per line; add "| key" to track clicks; "Text | tap:key" for a button that answers '
        "in the chat and records a click on key.",
    )
    protect_content = models.BooleanField(default=False)
    condition = models.CharField(max_length=16, choices=Condition.choices, default=Condition.ALWAYS)
    condition_button = models.CharField(
        max_length=64, blank=True, help_text="The click key the condition looks at (a tracked link's or a tap button's)."
    )

    class Meta:
        ordering = ["sequence", "delay_seconds", "id"]

    def __str__(self) -> str:
        return f"{self.sequence}: after {self.delay_text}"

    @property
    def delay_text(self) -> str:
        """The delay as an operator reads it: "40 s", "3 min", "1 day 2 h 30 s"."""
        days, rest = divmod(self.delay_seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        parts = [
            f"{days} day{'s' * (days != 1)}" if days else "",
            f"{hours} h" if hours else "",
            f"{minutes} min" if minutes else "",
        ]
        parts.append(f"{seconds} s" if seconds or not any(parts) else "")
        return " ".join(p for p in parts if p)

    def clean(self):
        if self.condition != self.Condition.ALWAYS and not self.condition_button:
            raise ValidationError({"condition_button": "Name the button key this condition looks at."})
        if self.condition_button and not KEY_RE.match(self.condition_button):
            raise ValidationError(
                {"condition_button": "A click key uses a-z, 0-9, _ and - only, as on the buttons that record it."}
            )


class SequenceMessage(OutgoingSend):
    """One step for one user, due at a time: sent at most once, or skipped (`error` says why) when
    the user cannot or does not want to get it, or the step's condition does not hold."""

    Status = send_statuses(
        "Status",
        SendStatus.PENDING,
        SendStatus.SENDING,
        SendStatus.SENT,
        SendStatus.SKIPPED,
        SendStatus.FAILED,
        SendStatus.INTERRUPTED,
    )

    user = models.ForeignKey(TelegramUser, on_delete=models.CASCADE, related_name="sequence_messages")
    step = models.ForeignKey(SequenceStep, on_delete=models.CASCADE, related_name="messages")
    due_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "step"], name="seqmsg_user_step")]
        indexes = [
            # The sequence sender's claim.
            models.Index(fields=["due_at"], name="seqmsg_due", condition=Q(status="pending")),
            # The reaper: sends that crashed mid-call.
            models.Index(fields=["lease_until"], name="seqmsg_lease", condition=Q(status="sending")),
            # Scheduler statistics: messages sent in the last 24 h.
            models.Index(fields=["sent_at"], name="seqmsg_sent_at", condition=Q(sent_at__isnull=False)),
            # The dashboard: messages failed, interrupted or skipped in the last 24 h (services/outcomes.py).
            models.Index(fields=["due_at"], name="seqmsg_unsent", condition=Q(status__in=["failed", "skipped", "interrupted"])),
        ]

    def __str__(self) -> str:
        return f"{self.step} -> {self.chat_id}: {self.status}"
