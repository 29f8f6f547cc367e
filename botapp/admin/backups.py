"""Stored files' backup copies in the admin: which have none, and "Back up now"."""

from django.contrib import admin, messages

from botapp.models import BotSettings, StoredFile
from botapp.signals import backups_requested


class BackupFilter(admin.SimpleListFilter):
    title = "backup copy"
    parameter_name = "backup"

    def lookups(self, request, model_admin):
        return (("yes", "Has one"), ("no", "None yet"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(backup_chat_id__isnull=False)
        if self.value() == "no":
            return queryset.filter(backup_chat_id__isnull=True)
        return queryset


class BackupAdminMixin:
    """The backup column and the "Back up now" action of the Stored files list."""

    @admin.display(description="backup", boolean=True)
    def has_backup(self, obj):
        return obj.backup_chat_id is not None

    @admin.action(description="Back up now: copy the selected files that have no backup to the backup channel")
    def back_up_now(self, request, queryset):
        if not BotSettings.load().backup_channel_id:
            self.message_user(request, "Set a backup channel id in Bot settings first.", messages.ERROR)
            return
        share_ids = list(queryset.filter(backup_chat_id__isnull=True).values_list("share_id", flat=True))
        if not share_ids:
            self.message_user(request, "Every selected file already has a backup copy.", messages.INFO)
            return
        try:
            # A worker copies them (it holds a Telegram session): the scheduler queues it on this signal.
            if not backups_requested.send(sender=StoredFile, share_ids=share_ids):
                raise RuntimeError("no background worker app is installed to copy them")
        except Exception as exc:  # the broker is down
            self.message_user(request, f"Could not queue the backup: the task queue is unreachable ({exc}).", messages.ERROR)
            return
        self.message_user(
            request,
            f"{len(share_ids)} file(s) queued for the backup channel; Background jobs shows the run (backfill_backups).",
            messages.SUCCESS,
        )
