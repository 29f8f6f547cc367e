"""The audit trail: one row per operator action that changes what users get (botapp/services/audit.py
writes them; the console lists them, read only)."""

from django.db import models

from botapp import clock


class AuditEntry(models.Model):
    class Via(models.TextChoices):
        CONSOLE = "console", "Console"
        API = "api", "HTTP API"
        BOT = "bot", "Bot command"
        COMMAND = "command", "Command line"

    at = models.DateTimeField(default=clock.now)
    actor = models.CharField(max_length=150, help_text="The operator's user name, api:<client>, telegram:<id>, or the OS user.")
    via = models.CharField(max_length=16, choices=Via.choices)
    address = models.GenericIPAddressField(null=True, blank=True, help_text="Where the request came from (console and API).")
    action = models.CharField(max_length=64, help_text="What was done, e.g. broadcast.start.")
    target = models.CharField(max_length=255, blank=True, help_text="What it was done to.")
    detail = models.TextField(blank=True)

    class Meta:
        verbose_name = "audit entry"
        verbose_name_plural = "audit trail"
        ordering = ["-at", "-id"]
        indexes = [
            # The console's list (newest first) and prune_job_runs' cutoff.
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target}".strip()
