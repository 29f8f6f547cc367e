"""What every outgoing send has in common: one message to one user's chat, sent at most once by a
sweep (a broadcast delivery, a sequence message).

The life of a send: `pending` (due) → `sending` (claimed with a lease, the call may be in flight) →
a final status. A broadcast delivery skips `sending`: its lease is a BroadcastClaim over a range of
rows, and the row stays `pending` until its result is written (`sending` rows of a broadcast are
those of a sender from before migration 0021). A FloodWait, or a row handed back untouched, goes back to `pending` (Telegram did
not send it). A send whose outcome is unknown (a lost answer; a worker that died mid-call leaves
`sending`, which the reaper finds) goes back to `pending` with `retry_from` set: it is sent again
with the same random_id (botapp.services.outgoing.send_key), which Telegram delivers at most once,
until TELEGRAM_RANDOM_ID_WINDOW after `retry_from`; past that it is `interrupted`. A sent broadcast
message with a lifetime then ends `deleted`, or `expired` when Telegram's 48 h window closed before
a deletion could be made (it stays in the chat).
"""

from django.db import models


class SendStatus(models.TextChoices):
    """Every status an outgoing send can have. Each kind of send uses the ones that apply to it
    (its `Status`, made by `send_statuses`): the labels are written once, here."""

    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    SKIPPED = "skipped", "Skipped"
    FAILED = "failed", "Failed"
    BLOCKED = "blocked", "User blocked the bot"
    INTERRUPTED = "interrupted", "Interrupted (not re-sent)"
    DELETED = "deleted", "Deleted after its lifetime"
    EXPIRED = "expired", "Expired: not deleted within Telegram's 48 h"
    NOT_USER = "not_user", "Not a user of the bot"


def send_statuses(name: str, *statuses: SendStatus) -> type[models.TextChoices]:
    """The statuses one kind of send uses, in the order the admin lists them, as a TextChoices of
    its own (so `Model.Status.X` exists only for the statuses that kind can have)."""
    return models.TextChoices(name, [(s.name, (s.value, s.label)) for s in statuses])


class StatusField(models.CharField):
    """A send's status. Its choices are those of the model it is part of (`Model.Status`), so an
    abstract parent can hold the field while each kind of send lists only its own statuses."""

    def contribute_to_class(self, cls, name, **kwargs):
        self.choices = cls.Status.choices
        super().contribute_to_class(cls, name, **kwargs)

    def deconstruct(self):
        # To migrations it is the CharField it always was: nothing about the column differs.
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class OutgoingSend(models.Model):
    """The fields a sweep claims, sends and records by. Concrete models add who and what (the user,
    the broadcast or step), their own Status, and their indexes (each names the query it serves)."""

    Status = SendStatus

    chat_id = models.BigIntegerField()
    status = StatusField(max_length=16, default=SendStatus.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)  # while `sending`: the reaper's deadline
    message_id = models.BigIntegerField(null=True, blank=True)  # Telegram's id of the sent message
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=255, blank=True)  # why it failed or was skipped
    # When the first attempt whose outcome is unknown was made (None: no such attempt).
    retry_from = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
