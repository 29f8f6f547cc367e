"""Admins storing files from Telegram: media sent to the bot, storage-channel posts forwarded to it,
and /batch ranges (forward the first and the last message of a range)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from botapp import clock
from botapp.models import AlbumClaim, BotSettings, PendingBatch, StoredFile
from botapp.services.backup import file_backup
from botapp.services.files import MAX_BATCH, deep_link, file_store
from botapp.telegram.gateway import (
    FloodWait,
    Gateway,
    IncomingMessage,
    MessageNotFound,
    OutcomeUnknown,
    TelegramError,
    TransientError,
    chunked,
)

log = logging.getLogger(__name__)

ASK_FIRST = "Batch: forward me the <b>first</b> message of the range from the storage channel. /cancel to stop."
ASK_LAST = "Now forward the <b>last</b> message of the range."
WRONG_CHAT = "Forward messages from the storage channel, please (or send the file itself)."
GONE = "Not stored: that message is no longer there (deleted?). Nothing was stored."
ALBUM_CLAIM_KEPT = timedelta(days=1)
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


def admin_message_store(*, gateway: Gateway, msg: IncomingMessage, storage_channel_id: int) -> StoreReply | None:
    """What an admin's media or forwarded post becomes: a stored file, or the next /batch step.

    Media sent to the bot is copied into the storage channel first (the admin's chat is no place to
    keep it); a forwarded storage-channel post is stored as it is, once Telegram confirms it is
    still there. An album (media group) becomes one file with one reply, whichever thread handles
    which of its messages: the message that claims the album stores all of it (Telegram creates an
    album's messages together, so all are there to read), the others return None (no reply). A
    batch range holds at most MAX_BATCH messages and stores only those that exist. A storage
    channel the bot cannot reach stores nothing and says so. Never raises for input."""
    pending = PendingBatch.objects.filter(admin_id=msg.user.id).first()
    from_storage = msg.forward_from_chat_id == storage_channel_id and msg.forward_from_message_id
    if pending is not None:
        if not from_storage:
            return StoreReply(WRONG_CHAT)
        if pending.first_message_id is None:
            pending.first_message_id = msg.forward_from_message_id
            pending.save(update_fields=["first_message_id"])
            return StoreReply(ASK_LAST)
        return _batch_store(gateway, msg, pending, storage_channel_id)
    if not from_storage and not msg.has_media:
        return StoreReply(WRONG_CHAT)
    album = msg.media_group_id is not None
    if album and not _album_claim(msg):
        return None  # another message of this album stores it, and replies
    try:
        if from_storage and album:
            message_ids = gateway.album_ids(storage_channel_id, msg.forward_from_message_id)
        elif from_storage:
            message_ids = gateway.messages_existing(storage_channel_id, [msg.forward_from_message_id])
        else:
            # Keep our own copy in the storage channel: the admin's chat is not a safe place. An
            # album's ids go in one call, so the copies stay one album there.
            ids_here = gateway.album_ids(msg.chat_id, msg.message_id) if album else [msg.message_id]
            message_ids = [copy.message_id for copy in gateway.copy_messages(storage_channel_id, msg.chat_id, ids_here)]
    except (FloodWait, TransientError, OutcomeUnknown):
        raise  # Telegram's passing trouble: the router's apology, and the admin sends it again
    except MessageNotFound:
        message_ids = []
    except TelegramError as exc:
        return _unreachable(storage_channel_id, msg, exc)
    if not message_ids:
        return StoreReply(GONE)
    title = msg.text or (f"Album of {len(message_ids)}" if len(message_ids) > 1 else "File")
    stored = file_store(source_chat_id=storage_channel_id, message_ids=message_ids, title=title[:100], created_by=msg.user.id)
    link = deep_link(bot_username=gateway.bot_username, payload=stored.share_id)
    what = f"Album of {len(message_ids)} stored." if len(message_ids) > 1 else "Stored."
    return StoreReply(f"{what}{_backed_up(gateway, stored)}\n{link}", link)


def _batch_store(gateway: Gateway, msg: IncomingMessage, pending: PendingBatch, storage_channel_id: int) -> StoreReply:
    """The last message of a /batch range came: store the messages of the range that exist."""
    first, last = sorted((pending.first_message_id, msg.forward_from_message_id))
    if last - first + 1 > MAX_BATCH:
        return StoreReply(
            f"That range has {last - first + 1} messages; a batch holds at most {MAX_BATCH}. Forward an earlier last message."
        )
    try:
        message_ids = [
            i for chunk in chunked(range(first, last + 1)) for i in gateway.messages_existing(storage_channel_id, chunk)
        ]
    except (FloodWait, TransientError, OutcomeUnknown):
        raise  # the batch stays pending: the admin forwards the last message again
    except TelegramError as exc:
        pending.delete()
        return _unreachable(storage_channel_id, msg, exc)
    pending.delete()
    if not message_ids:
        return StoreReply(f"None of the messages {first}–{last} is in the storage channel any more; nothing was stored.")
    stored = file_store(
        source_chat_id=storage_channel_id, message_ids=message_ids, title=f"Batch {first}–{last}", created_by=msg.user.id
    )
    link = deep_link(bot_username=gateway.bot_username, payload=stored.share_id)
    missing = last - first + 1 - len(message_ids)
    gone = f" ({missing} of the range {'is' if missing == 1 else 'are'} deleted and left out)" if missing else ""
    return StoreReply(f"Batch of {len(message_ids)} messages stored{gone}.{_backed_up(gateway, stored)}\n{link}", link)


def _album_claim(msg: IncomingMessage) -> bool:
    """Whether this message is the first of its album to be handled (its thread stores the album).
    The unique row decides between threads and processes; rows older than a day are let go (an
    album's updates arrive within seconds)."""
    AlbumClaim.objects.filter(claimed_at__lt=clock.now() - ALBUM_CLAIM_KEPT).delete()
    _, created = AlbumClaim.objects.get_or_create(chat_id=msg.chat_id, media_group_id=msg.media_group_id)
    return created


def _unreachable(storage_channel_id: int, msg: IncomingMessage, exc: TelegramError) -> StoreReply:
    log.error("storage channel unreachable chat=%s admin=%s: %s", storage_channel_id, msg.user.id, exc)
    return StoreReply(STORAGE_UNREACHABLE.format(channel=storage_channel_id, error=exc))


def _backed_up(gateway: Gateway, stored: StoredFile) -> str:
    """Copy a newly stored file to the backup channel (when one is set); what the admin is told of it."""
    channel_id = BotSettings.load().backup_channel_id
    if not channel_id:
        return ""
    problem = file_backup(gateway=gateway, stored=stored, channel_id=channel_id)
    if problem:
        return f" Not copied to the backup channel ({problem}); the hourly backfill tries again."
    return " Backup copy made."
