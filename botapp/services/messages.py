"""Scheduled messages: text, buttons and any number of attachments, sent at a set time to listed
Telegram users, to every active user, or to the users a start payload brought (the HTTP API's
`/messages/`).

Each is a Broadcast of kind `message` (botapp/models/broadcasts.py) and rides the broadcast sender:
when it comes due, `broadcasts_start_due` makes one delivery row per recipient, the
`send_broadcasts` sweep uploads its files to Telegram once and sends each recipient the message by
file id at the shared limiter's pace, and every recipient's result is recorded on their row (sent,
blocked, failed with the reason, not a user of the bot, or skipped with the reason). Until it
starts it can be edited or cancelled; a started one can only be cancelled (the rest go unsent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import unescape

from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import connection, transaction
from django.utils import timezone
from django.utils.html import strip_tags

from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment, BroadcastDelivery, TelegramUser
from botapp.models.buttons import buttons_parse
from botapp.models.uploads import DISPLAY_NAME_LENGTH, upload_display_name
from botapp.services.audit import audit_record
from botapp.services.composed import composed_text_problems
from botapp.signals import work_scheduled_announce
from botapp.telegram.limits import FILE_SIZE, PHOTO_SIZE, START_PAYLOAD_LENGTH
from botapp.telegram.media import media_problem

log = logging.getLogger(__name__)

# Attachments of one message, at most: five full albums. Our choice (Telegram has no such limit):
# every recipient costs a call per album, and the API must refuse something before storage fills.
MAX_ATTACHMENTS = 50
# Recipients listed in one message, at most (a 100,000-user list is about 1.2 MB of JSON).
MAX_RECIPIENTS = 1_000_000
UNKNOWN_SHOWN = 50  # unknown ids named in the error; the rest are counted


class AttachmentStoreError(OSError):
    """The message's files could not be kept (storage full, read-only, gone): nothing of the
    message was kept either, no row and no partial file. `errno` is the storage's."""


@dataclass(frozen=True)
class AttachmentSpec:
    """One attachment as a caller gives it: a Telegram file id, or a file to keep and upload."""

    kind: str  # photo | video | document | audio
    file_id: str = ""
    upload: File | None = None
    file_name: str = ""

    @property
    def size(self) -> int:
        return self.upload.size if self.upload is not None else 0

    @property
    def name(self) -> str:
        """The file's name as recipients see it (botapp/models/uploads.py: cut to what is kept)."""
        return upload_display_name(self.file_name or (self.upload.name if self.upload is not None else "") or "")[0]


def attachment_name_notes(*, attachments: Sequence[AttachmentSpec]) -> list[str]:
    """What the caller is told about the names kept: each attachment whose file name was too long
    for the database, cut (`AttachmentSpec.name` shows the cut one)."""
    notes = []
    for n, item in enumerate(attachments, start=1):
        given = item.file_name or (item.upload.name if item.upload is not None else "") or ""
        if upload_display_name(given)[1]:
            notes.append(
                f"Attachment {n}: its file name was cut to {DISPLAY_NAME_LENGTH} characters (it had {len(given.rsplit('/', 1)[-1])})."
            )
    return notes


def message_schedule(
    *,
    send_at: datetime,
    text: str = "",
    buttons: str = "",
    audience: str = Broadcast.Audience.USERS,
    user_ids: Sequence[int] = (),
    payload: str = "",
    attachments: Sequence[AttachmentSpec] = (),
    protect: bool = False,
    api_client: str = "",
    title: str = "",
    past_sends_now: bool = False,
) -> Broadcast:
    """Check and store a scheduled message; it is sent at `send_at` (a time with a zone, in the
    future; with `past_sends_now`, a time past is due at once instead of refused). Every mistake is reported at once as a ValidationError keyed by field: unknown user
    ids (listed), a time in the past, a file over Telegram's size limit, too many attachments,
    bad buttons, a text too long. Uploaded files are kept in Django's default storage."""
    fields = _checked(
        send_at=send_at,
        text=text,
        buttons=buttons,
        audience=audience,
        user_ids=user_ids,
        payload=payload,
        attachments=attachments,
        past_sends_now=past_sends_now,
    )
    with transaction.atomic():
        message = Broadcast.objects.create(
            kind=Broadcast.Kind.MESSAGE,
            status=Broadcast.Status.SCHEDULED,
            title=(title or _title(text, attachments))[:255],
            protect_content=protect,
            api_client=api_client[:64],
            **fields,
        )
        _attach(message, attachments)
        work_scheduled_announce(work="broadcast", due_at=message.scheduled_at)
        audit_record(
            action="message.schedule",
            target=message,
            detail=f"to {message.audience}, at {message.scheduled_at:%Y-%m-%d %H:%M %Z}",
        )
    return message


def message_update(*, message: Broadcast, changes: dict) -> Broadcast:
    """Change a scheduled message that has not started: any of send_at, text, buttons, audience,
    user_ids, payload, protect, title, and attachments (the list given replaces the old one). The
    same checks as `message_schedule`; a ValidationError when it started already."""
    with transaction.atomic():
        locked = Broadcast.objects.select_for_update().get(pk=message.pk)
        if locked.kind != Broadcast.Kind.MESSAGE or locked.status != Broadcast.Status.SCHEDULED:
            raise ValidationError(
                {"status": [f"Only a scheduled message that has not started can change; this one is {locked.status}."]}
            )
        current = {
            "send_at": locked.scheduled_at,
            "text": locked.text,
            "buttons": locked.buttons,
            "audience": locked.audience,
            "user_ids": locked.recipient_ids,
            "payload": locked.audience_payload,
        }
        attachments = changes.get("attachments")
        if attachments is None:
            kept = [
                AttachmentSpec(a.kind, file_id=a.file_id or "stored", file_name=a.file_name) for a in locked.attachments.all()
            ]
        else:
            kept = list(attachments)
        merged = {**current, **{k: v for k, v in changes.items() if k in current}}
        if "send_at" not in changes:
            merged["send_at"] = None  # an unchanged time may have passed meanwhile: the sender starts it now
        fields = _checked(**merged, attachments=kept, send_at_required=False)
        if fields["scheduled_at"] is None:
            fields["scheduled_at"] = locked.scheduled_at
        for name, value in fields.items():
            setattr(locked, name, value)
        if "protect" in changes:
            locked.protect_content = bool(changes["protect"])
        if changes.get("title"):
            locked.title = changes["title"][:255]
        locked.save()
        work_scheduled_announce(work="broadcast", due_at=locked.scheduled_at)
        if attachments is not None:
            replaced = [old.upload for old in locked.attachments.all() if old.upload]
            locked.attachments.all().delete()
            _attach(locked, attachments)
            # The old files leave the storage once the change is committed (not before: a rollback keeps them).
            transaction.on_commit(lambda: [upload.delete(save=False) for upload in replaced])
        audit_record(action="message.change", target=locked, detail=f"changed: {', '.join(sorted(changes)) or 'nothing'}")
    return locked


def message_results(*, message: Broadcast) -> list[dict]:
    """Every recipient's result, in recipient order for a list (listed ids that are no user of the
    bot included, as `not_user`), by user otherwise: telegram_id, status, error, message_id, sent_at."""
    rows = {
        r["chat_id"]: {
            "telegram_id": r["chat_id"],
            "status": r["status"],
            "error": r["error"],
            "message_id": r["message_id"],
            "sent_at": r["sent_at"],
        }
        for r in BroadcastDelivery.objects.filter(broadcast=message)
        .order_by("id")
        .values("chat_id", "status", "error", "message_id", "sent_at")
    }
    if message.audience != Broadcast.Audience.USERS or message.status in (Broadcast.Status.SCHEDULED, Broadcast.Status.DRAFT):
        return list(rows.values())
    missing = {"status": BroadcastDelivery.Status.NOT_USER, "error": "not a user of the bot", "message_id": None, "sent_at": None}
    return [rows.get(i) or {"telegram_id": i, **missing} for i in message.recipient_ids]


def users_unknown(*, telegram_ids: Iterable[int]) -> list[int]:
    """The ids, in the order given, that belong to no user of the bot (one query: the whole list as
    one array parameter)."""
    ids = list(telegram_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT telegram_id FROM {TelegramUser._meta.db_table} WHERE telegram_id = ANY(%s)", [ids])
        known = {row[0] for row in cursor.fetchall()}
    return [i for i in ids if i not in known]


def _checked(
    *,
    send_at: datetime | None,
    text: str,
    buttons: str,
    audience: str,
    user_ids: Sequence[int],
    payload: str,
    attachments: Sequence[AttachmentSpec],
    send_at_required: bool = True,
    past_sends_now: bool = False,
) -> dict:
    """The Broadcast fields for a valid message; every problem found, by field, otherwise."""
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if send_at is None:
        if send_at_required:
            bad("send_at", "Give the time to send it, with its zone (ISO 8601, e.g. 2030-01-01T09:00:00+00:00).")
    elif timezone.is_naive(send_at):
        bad("send_at", "Give the time with its zone (e.g. +00:00 or Z).")
    elif send_at <= clock.now() and not past_sends_now:
        bad("send_at", "This time is in the past.")

    ids: list[int] = []
    if audience == Broadcast.Audience.USERS:
        ids = list(dict.fromkeys(int(i) for i in user_ids))
        if not ids:
            bad("user_ids", "List at least one Telegram user id.")
        elif len(ids) > MAX_RECIPIENTS:
            bad("user_ids", f"At most {MAX_RECIPIENTS} recipients (got {len(ids)}).")
        elif unknown := users_unknown(telegram_ids=ids):
            shown = ", ".join(str(i) for i in unknown[:UNKNOWN_SHOWN])
            more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
            bad("user_ids", f"Not users of the bot (they never wrote to it): {shown}{more}.")
    elif audience == Broadcast.Audience.PAYLOAD:
        if not payload or len(payload) > START_PAYLOAD_LENGTH:
            bad("payload", f"Give the start payload (1 to {START_PAYLOAD_LENGTH} characters).")
    elif audience != Broadcast.Audience.ALL:
        bad("audience", "Choose users, all or payload.")

    if len(attachments) > MAX_ATTACHMENTS:
        bad("attachments", f"At most {MAX_ATTACHMENTS} attachments (got {len(attachments)}).")
    for n, item in enumerate(attachments, start=1):
        if item.kind not in BroadcastAttachment.Kind.values:
            bad("attachments", f"Attachment {n}: the kind is one of {', '.join(BroadcastAttachment.Kind.values)}.")
            continue
        if item.upload is None and not item.file_id:
            bad("attachments", f"Attachment {n}: give a file or a Telegram file id.")
        elif item.upload is None and "://" in item.file_id:
            bad("attachments", f"Attachment {n}: give a Telegram file id, not an address (or send the file itself).")
        elif item.upload is None and (problem := media_problem(item.file_id, kind=item.kind)):
            bad("attachments", f"Attachment {n}: {problem}")
        limit = PHOTO_SIZE if item.kind == "photo" else FILE_SIZE
        if item.upload is not None and item.size == 0:
            bad("attachments", f"Attachment {n} ({item.name}): the file is empty.")
        if item.size > limit:
            bad(
                "attachments",
                f"Attachment {n} ({item.name}): {item.size} bytes is over Telegram's limit for a {item.kind} ({limit} bytes).",
            )

    if not text.strip() and not attachments:
        bad("text", "Give a text or at least one attachment.")
    else:
        # The checks the admin's composer and /api/v1/broadcasts/ make (HTML, placeholders, length).
        for problem in composed_text_problems(text=text, caption=len(attachments) == 1):
            bad("text", problem)
    try:
        rows = buttons_parse(text=buttons)
    except ValidationError as exc:
        for message in exc.messages:
            bad("buttons", message)
    else:
        if rows and len(attachments) > 1 and not text.strip():
            bad("buttons", "Buttons go under the text: with several attachments, give a text too.")
    if errors:
        raise ValidationError(errors)
    return {
        "scheduled_at": send_at,
        "text": text,
        "buttons": buttons,
        "audience": audience,
        "recipient_ids": ids,
        "audience_payload": payload if audience == Broadcast.Audience.PAYLOAD else "",
    }


UPLOADS = BroadcastAttachment._meta.get_field("upload").storage


def _attach(message: Broadcast, attachments: Sequence[AttachmentSpec]) -> None:
    """The attachment rows and their files. A file that cannot be written (a full or read-only
    storage) removes every file written here, the partial one too, and raises
    AttachmentStoreError (the caller's transaction drops the rows)."""
    written: list[str] = []
    try:
        _attach_rows(message, attachments, written)
    except OSError as exc:
        for name in written:
            try:
                UPLOADS.delete(name)
            except OSError:
                log.warning("partial upload not removed message=%s file=%s", message.pk, name)
        raise AttachmentStoreError(exc.errno, f"attachment not stored: {exc.strerror or exc}") from exc


def _attach_rows(message: Broadcast, attachments: Sequence[AttachmentSpec], written: list[str]) -> None:
    for position, item in enumerate(attachments):
        row = BroadcastAttachment(
            broadcast=message,
            position=position,
            kind=item.kind,
            file_id=item.file_id if item.upload is None else "",
            file_name=item.name,
            size=item.size,
        )
        if item.upload is not None:
            # The name chosen first, so that a write that fails half-way leaves a name to remove. It
            # is one of ours (botapp/models/uploads.py), never the uploader's.
            storage = row.upload.storage
            name = storage.get_available_name(row.upload.field.generate_filename(row, row.file_name), max_length=255)
            written.append(name)
            row.upload.name = storage.save(name, item.upload)
            written[-1] = row.upload.name
        row.save()


def _title(text: str, attachments: Sequence[AttachmentSpec]) -> str:
    """The operators' title when the caller gave none: the text's first line as users read it
    (Telegram HTML's tags and entities gone), or how many files."""
    plain = unescape(strip_tags(text)).strip()
    first_line = plain.splitlines()[0].strip() if plain else ""
    return first_line[:80] or f"{len(attachments)} attachment(s)"
