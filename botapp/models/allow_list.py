"""Owner-only mode's allow-list: the users the bot answers while it is on (Bot settings)."""

from django.db import models

from botapp import clock


class AllowedUser(models.Model):
    """One user the bot answers in owner-only mode, by Telegram id: they need not have written to
    the bot yet. A row of its own, apart from TelegramUser, so switching the mode on or off, or
    emptying the list, changes no user's data."""

    telegram_id = models.BigIntegerField("Telegram user id", unique=True)
    note = models.CharField(max_length=255, blank=True, help_text="Who they are, for you.")
    added_at = models.DateTimeField(default=clock.now, editable=False)
    added_by = models.CharField(
        max_length=64, blank=True, editable=False, help_text="Who added them: telegram:<admin id>, an operator, the API."
    )

    class Meta:
        verbose_name = "allowed user"
        ordering = ["-added_at"]

    def __str__(self) -> str:
        return f"{self.telegram_id}" + (f" ({self.note})" if self.note else "")
