"""Stored files: messages in the storage channel behind one deep link."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from botapp.models import BotSettings, RemovedFile, StoredFile
from botapp.models.files import MAX_BATCH as MAX_BATCH  # where callers have always found it
from botapp.models.files import message_ids_validate
from botapp.telegram.limits import DELETE_WINDOW_MINUTES, channel_id_problem


def file_store(
    *,
    source_chat_id: int,
    message_ids: Sequence[int],
    title: str = "",
    created_by: int | None = None,
    protect_content: bool | None = None,
    auto_delete_minutes: int | None = None,
    skip_verification: bool = False,
    expires_at: datetime | None = None,
) -> StoredFile:
    """Create the deep link for these storage-channel messages (in the order given): one row, with a
    new random share id. At least one message and at most MAX_BATCH, or a ValidationError.
    The link's own settings override Bot settings: `protect_content` and `auto_delete_minutes`
    None follow them; `expires_at` None: the link never expires. The channel must be a channel
    id (-100…) and `auto_delete_minutes` within Telegram's 48 h, or a ValidationError."""
    if problem := channel_id_problem(source_chat_id):
        raise ValidationError({"source_chat_id": [problem]})
    if auto_delete_minutes is not None and not 0 <= auto_delete_minutes <= DELETE_WINDOW_MINUTES:
        raise ValidationError({"auto_delete_minutes": [f"0 (never) to {DELETE_WINDOW_MINUTES} minutes (Telegram's 48 h)."]})
    ids = [int(i) for i in message_ids]
    if not ids:
        raise ValidationError("A file needs at least one message.")
    message_ids_validate(ids)
    return StoredFile.objects.create(
        source_chat_id=source_chat_id,
        message_ids=ids,
        title=title[:255],
        created_by=created_by,
        protect_content=protect_content,
        auto_delete_minutes=auto_delete_minutes,
        skip_verification=skip_verification,
        expires_at=expires_at,
    )


def files_remove(*, files: QuerySet[StoredFile]) -> int:
    """Delete these stored files, keeping each share id as removed (RemovedFile) in the same
    transaction: their links then answer that the files were removed, never as a campaign tag.
    Returns how many were deleted."""
    with transaction.atomic():
        share_ids = list(files.values_list("share_id", flat=True))
        RemovedFile.objects.bulk_create([RemovedFile(share_id=s) for s in share_ids], ignore_conflicts=True)
        deleted, _ = StoredFile.objects.filter(share_id__in=share_ids).delete()
    return len(share_ids) if deleted else 0


def file_removed(*, share_id: str) -> bool:
    """Whether `share_id` was a stored file's, removed since (`files_remove`)."""
    return RemovedFile.objects.filter(share_id=share_id).exists()


def bot_username_cached() -> str:
    """The bot's username as runbot last saw it, from the cached settings: a list of links costs no query."""
    return BotSettings.load().bot_username


def bot_username_record(*, username: str) -> str:
    """Record the bot's username in Bot settings (links need it), as runbot and the sandbox start.
    Reads the row itself, not the cache: a cached copy of a row that is gone (a database restored
    or emptied while Redis kept it) made the update affect no row, and runbot died at start.
    Returns the username."""
    if not username:
        return username
    conf, _ = BotSettings.objects.get_or_create(pk=1)
    if conf.bot_username != username:
        conf.bot_username = username
        conf.save(update_fields=["bot_username"])
    return username


def deep_link(*, bot_username: str, payload: str) -> str:
    """The t.me link that opens the bot with `/start <payload>`."""
    return f"https://t.me/{bot_username}?start={payload}"
