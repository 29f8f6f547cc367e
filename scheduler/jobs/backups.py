"""The `backfill_backups` job: copies stored files that have no backup yet to the backup channel
(botapp/services/backup.py), oldest first, until its time budget is spent; the next run goes on."""

from __future__ import annotations

from botapp.models import BotSettings
from botapp.services.backup import files_backfill, files_without_backup
from botapp.telegram.gateway import Gateway
from scheduler.jobs.registry import Job, Outcome, job_register


def backfill_backups(*, gateway: Gateway, dry_run: bool = False, time_budget: float = 240.0, share_ids=None) -> Outcome:
    channel_id = BotSettings.load().backup_channel_id
    files = files_without_backup()
    if share_ids is not None:
        files = files.filter(share_id__in=share_ids)
    if not channel_id:
        return Outcome(0, detail="no backup channel set (Bot settings)")
    if dry_run:
        return Outcome(files.count(), detail="files without a backup")
    done, failed = files_backfill(gateway=gateway, channel_id=channel_id, files=files.iterator(), time_budget=time_budget)
    left = files_without_backup().count()
    return Outcome(done, failed, detail=f"{left} file(s) still without a backup")


job_register(
    Job(
        "backfill_backups",
        backfill_backups,
        {"minute": "20"},
        "Copy stored files that have no backup to the backup channel",
        needs_gateway=True,
    )
)
