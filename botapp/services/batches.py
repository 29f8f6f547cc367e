"""Admins storing files from Telegram: media sent to the bot, storage-channel posts forwarded to it,
and /batch ranges (forward the first and the last message of a range)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from botapp.models import BotSettings, PendingBatch, StoredFile
from botapp.services.backup import file_backup
from botapp.services.files import MAX_BATCH, deep_link, file_store
from botapp.telegram.gateway import FloodWait, Gateway, IncomingMessage, OutcomeUnknown, TelegramError, TransientError

log = logging.getLogger(__name__)

ASK_FIRST = "Batch: forward me the <b>first</b> message of the range from the storage channel. /cancel to stop."
ASK_LAST = "Now forward the <b>last</b> message of the range."
WRONG_CHAT = "Forward messages from the storage channel, please (or send the file itself)."
STORAGE_UNREACHABLE = (
    "Not stored: the storage channel {channel} is unreachable ({error}). Check that the bot is still an admin "
    "there who may post; nothing was stored."
)


@dataclass
class StoreReply:
    text: str
    link: str = ""


def batch_start(*, admin_id: int) -> None:
    """/batch: the admin's next two forwards from the storage channel are the first and the last
    message of a range. Starting again forgets a range begun before (one pending batch per admin)."""
    PendingBatch.objects.update_or_create(admin_id=admin_id, defaults={"first_message_id": None})


def batch_cancel(*, admin_id: int) -> bool:
    """/cancel: forget the admin's pending batch. Returns whether there was one."""
    deleted, _ = PendingBatch.objects.filter(admin_id=admin_id).delete()
    return bool(deleted)


def admin_message_store(*, gateway: Gateway, msg: IncomingMessage, storage_channel_id: int) -> StoreReply:
    """What an admin's media or forwarded post becomes: a stored file, or the next /batch step.

    Media sent to the bot is copied into the storage channel first (the admin's chat is no place to
    keep it); a forwarded storage-channel post is stored as it is. A batch range holds at most
    MAX_BATCH messages; anything else gets a reply saying what to send. Never raises for input."""
    pending = PendingBatch.objects.filter(admin_id=msg.user.id).first()
    from_storage = msg.forward_from_chat_id == storage_channel_id and msg.forward_from_message_id
    if pending is not None:
        if not from_storage:
            return StoreReply(WRONG_CHAT)
        if pending.first_message_id is None:
            pending.first_message_id = msg.forward_from_message_id
            pending.save(update_fields=["first_message_id"])
            return StoreReply(ASK_LAST)
        first, last = sorted((pending.first_message_id, msg.forward_from_message_id))
        if last - first + 1 > MAX_BATCH:
            return StoreReply(
                f"That range has {last - first + 1} messages; a batch holds at most {MAX_BATCH}. Forward an earlier last message."
            )
        pending.delete()
        stored = file_store(
            source_chat_id=storage_channel_id,
            message_ids=list(range(first, last + 1)),
            title=f"Batch {first}–{last}",
            created_by=msg.user.id,
        )
        link = deep_link(bot_username=gateway.bot_username, payload=stored.share_id)
        return StoreReply(f"Batch of {last - first + 1} messages stored.{_backed_up(gateway, stored)}\n{link}", link)
    if from_storage:
        message_id = msg.forward_from_message_id
    elif msg.has_media:
        # Keep our own copy in the storage channel: the admin's chat is not a safe place.
        try:
            (copy,) = gateway.copy_messages(storage_channel_id, msg.chat_id, [msg.message_id])
        except (FloodWait, TransientError, OutcomeUnknown):
            raise  # Telegram's passing trouble: the router's apology, and the admin sends it again
        except TelegramError as exc:
            log.error("storage channel unreachable chat=%s admin=%s: %s", storage_channel_id, msg.user.id, exc)
            return StoreReply(STORAGE_UNREACHABLE.format(channel=storage_channel_id, error=exc))
        message_id = copy.message_id
    else:
        return StoreReply(WRONG_CHAT)
    stored = file_store(
        source_chat_id=storage_channel_id, message_ids=[message_id], title=(msg.text or "File")[:100], created_by=msg.user.id
    )
    link = deep_link(bot_username=gateway.bot_username, payload=stored.share_id)
    return StoreReply(f"Stored.{_backed_up(gateway, stored)}\n{link}", link)


def _backed_up(gateway: Gateway, stored: StoredFile) -> str:
    """Copy a newly stored file to the backup channel (when one is set); what the admin is told of it."""
    channel_id = BotSettings.load().backup_channel_id
    if not channel_id:
        return ""
    problem = file_backup(gateway=gateway, stored=stored, channel_id=channel_id)
    if problem:
        return f" Not copied to the backup channel ({problem}); the hourly backfill tries again."
    return " Backup copy made."
