"""The backup storage channel (Bot settings → backup channel id): every stored file also has a copy
there, and delivery falls back to it when the storage channel's messages are gone (deleted, or the
channel lost). Admins' files are copied as they are stored; the `backfill_backups` job, the
`manage.py backfill_backups` command and the admin's "Back up now" action copy the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from django.db.models import QuerySet

from botapp.models import StoredFile
from botapp.telegram.gateway import CopyIncomplete, Gateway, TelegramError

log = logging.getLogger(__name__)


def files_without_backup() -> QuerySet[StoredFile]:
    """Stored files with no copy in a backup channel, oldest first (the partial index `file_no_backup`)."""
    return StoredFile.objects.filter(backup_chat_id__isnull=True).order_by("created_at")


def file_backup(*, gateway: Gateway, stored: StoredFile, channel_id: int) -> str:
    """Copy the file's messages from the storage channel to the backup channel (one forward per 100
    messages, no "forwarded from" header) and record the copies on the file. Returns "" when done,
    else why not (logged; the file stays without a backup and a later backfill tries again).
    Messages the storage channel no longer has are not copied; nothing of it left is an error."""
    try:
        copies = gateway.copy_messages(channel_id, stored.source_chat_id, stored.message_ids)
    except CopyIncomplete as exc:
        # Some copies arrived: keep the file unbacked, so that a later run copies it whole.
        log.warning("backup incomplete share=%s channel=%s: %s", stored.share_id, channel_id, exc)
        return f"only {len(exc.sent)} of its messages were copied ({exc.cause})"
    except TelegramError as exc:
        log.warning("backup failed share=%s channel=%s: %s", stored.share_id, channel_id, exc)
        return str(exc)
    stored.backup_chat_id = channel_id
    stored.backup_message_ids = [c.message_id for c in copies]
    StoredFile.objects.filter(pk=stored.pk).update(
        backup_chat_id=stored.backup_chat_id, backup_message_ids=stored.backup_message_ids
    )
    return ""


def files_backfill(
    *, gateway: Gateway, channel_id: int, files: Iterable[StoredFile], time_budget: float = 240.0
) -> tuple[int, int]:
    """Back up `files` one by one until they are done or `time_budget` seconds are spent (a channel
    takes about 20 messages a minute: the limiter paces the copies). Returns (backed up, failed).
    BotUnauthorized stops it and is raised."""
    deadline = time.monotonic() + time_budget
    done = failed = 0
    for stored in files:
        if time.monotonic() >= deadline:
            break
        if file_backup(gateway=gateway, stored=stored, channel_id=channel_id):
            failed += 1
        else:
            done += 1
    return done, failed
