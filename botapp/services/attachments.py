"""Uploading a scheduled message's files to Telegram, once, before its first send.

A file the caller uploaded is kept in Django's default storage (`STORAGES["default"]`: a local
folder unless production configures another backend). When its message has started, the sender
uploads it to Telegram once (`Gateway.upload`) and keeps the file id Telegram returns: every
recipient then gets the file by that id, and the sender takes no row of a message whose files are
not all uploaded yet.
"""

from __future__ import annotations

import logging
import mimetypes
from dataclasses import dataclass

from django.core.files.storage import storages
from django.db import transaction

from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment
from botapp.telegram.gateway import BadRequest, Gateway, TelegramError

log = logging.getLogger(__name__)

STARTED = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)


@dataclass(frozen=True)
class UploadOutcome:
    uploaded: int = 0
    failed: int = 0  # tried again by the next run (Telegram busy or unreachable)
    refused: int = 0  # Telegram refused the file, or it cannot be read here: its message was cancelled


def attachments_upload(*, gateway: Gateway) -> UploadOutcome:
    """Upload every stored file of a started message that has no Telegram file id yet. A refusal
    of the file itself (BadRequest: too big, not a valid photo ...) or a file this process cannot
    read (not in its storage, or not readable) cancels its message, with the reason on the
    attachment, since no recipient could get it; any other failure leaves it for the next run, the
    reason shown meanwhile. Never raises a TelegramError."""
    uploaded = failed = refused = 0
    waiting = BroadcastAttachment.objects.filter(broadcast__status__in=STARTED, file_id="").exclude(upload="")
    for attachment in waiting.order_by("broadcast_id", "position", "id"):
        name = attachment.file_name or attachment.upload.name.rsplit("/", 1)[-1]
        try:
            with attachment.upload.open("rb") as stored:
                file_id = gateway.upload(attachment.kind, stored, file_name=name, mime_type=mimetypes.guess_type(name)[0] or "")
        except (FileNotFoundError, PermissionError) as exc:  # not there, or not ours to read: waiting cannot help
            refused += 1
            log.error("attachment unreadable broadcast=%s attachment=%s: %s", attachment.broadcast_id, attachment.pk, exc)
            _cancel(attachment, unreadable_error(name=attachment.upload.name, exc=exc))
            continue
        except BadRequest as exc:
            refused += 1
            log.error(
                "attachment refused by Telegram broadcast=%s attachment=%s: %s", attachment.broadcast_id, attachment.pk, exc
            )
            _cancel(attachment, str(exc))
            continue
        except (TelegramError, OSError) as exc:
            failed += 1
            log.warning("attachment upload failed broadcast=%s attachment=%s: %s", attachment.broadcast_id, attachment.pk, exc)
            BroadcastAttachment.objects.filter(pk=attachment.pk).update(error=f"not uploaded yet, retrying: {exc}"[:255])
            continue
        BroadcastAttachment.objects.filter(pk=attachment.pk).update(file_id=file_id, uploaded_at=clock.now(), error="")
        uploaded += 1
    return UploadOutcome(uploaded, failed, refused)


def _cancel(attachment: BroadcastAttachment, error: str) -> None:
    """No recipient could get this file: its message is cancelled, the reason on the attachment."""
    with transaction.atomic():
        BroadcastAttachment.objects.filter(pk=attachment.pk).update(error=error[:255])
        Broadcast.objects.filter(pk=attachment.broadcast_id, status__in=STARTED).update(
            status=Broadcast.Status.CANCELLED, finished_at=clock.now()
        )


def unreadable_error(*, name: str, exc: OSError) -> str:
    """What the message's page says when this process cannot read a stored file: where it looked,
    and the usual cause (a worker on another host than the web, with a local MEDIA_ROOT)."""
    storage = storages["default"]
    where = getattr(storage, "bucket_name", None) or getattr(storage, "location", "")
    reason = "not found" if isinstance(exc, FileNotFoundError) else "permission denied"
    return (
        f"the worker cannot read {name} from {type(storage).__name__} {where} ({reason}): every process needs "
        "the same storage (object storage across hosts; docs/operating.md)"
    )
