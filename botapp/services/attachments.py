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
    refused: int = 0  # Telegram refused the file itself: its message was cancelled


def attachments_upload(*, gateway: Gateway) -> UploadOutcome:
    """Upload every stored file of a started message that has no Telegram file id yet. A refusal
    of the file itself (BadRequest: too big, not a valid photo ...) cancels its message, with the
    reason on the attachment, since no recipient could get it; any other failure leaves it for the
    next run. Never raises a TelegramError."""
    uploaded = failed = refused = 0
    waiting = BroadcastAttachment.objects.filter(broadcast__status__in=STARTED, file_id="").exclude(upload="")
    for attachment in waiting.order_by("broadcast_id", "position", "id"):
        name = attachment.file_name or attachment.upload.name.rsplit("/", 1)[-1]
        try:
            with attachment.upload.open("rb") as stored:
                file_id = gateway.upload(attachment.kind, stored, file_name=name, mime_type=mimetypes.guess_type(name)[0] or "")
        except BadRequest as exc:
            refused += 1
            log.error(
                "attachment refused by Telegram broadcast=%s attachment=%s: %s", attachment.broadcast_id, attachment.pk, exc
            )
            with transaction.atomic():
                BroadcastAttachment.objects.filter(pk=attachment.pk).update(error=str(exc)[:255])
                Broadcast.objects.filter(pk=attachment.broadcast_id, status__in=STARTED).update(
                    status=Broadcast.Status.CANCELLED, finished_at=clock.now()
                )
            continue
        except (TelegramError, OSError) as exc:
            failed += 1
            log.warning("attachment upload failed broadcast=%s attachment=%s: %s", attachment.broadcast_id, attachment.pk, exc)
            continue
        BroadcastAttachment.objects.filter(pk=attachment.pk).update(file_id=file_id, uploaded_at=clock.now(), error="")
        uploaded += 1
    return UploadOutcome(uploaded, failed, refused)
