"""Subscribers and their scheduled messages: the scheduled-message system Courier replaces
(shared/seeds/003), kept working for its clients (api/compat/) and its data (imports_scheduler.py).

That system gave each user who subscribed an id of its own and sent a scheduled message to the
ids a client listed. Here a subscriber is a Telegram user of Courier's with that id
(botapp/models/subscribers.py), and a subscriber message is a scheduled message of Courier's made
by `message_schedule`: the same rows, sent by the same `send_broadcasts` sweep, at the same pace.
What stays as that system did it: its text is plain text (sent exactly as written, never read as
HTML), its files go as documents, and a time already past is due at once (its scheduler sent
anything due at its next look) instead of refused.
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Sequence
from datetime import datetime

from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import IntegrityError, transaction

from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment, Subscriber, SubscriberMessage, TelegramUser
from botapp.services.imports import Invalid, user_id_parse
from botapp.services.messages import AttachmentSpec, message_schedule

SUBSCRIBED_ALREADY = "User with this chat_id already exists"  # the old system's words for its 400
FIRST_NAME_LENGTH = TelegramUser._meta.get_field("first_name").max_length
SUBSCRIBER_ID_LENGTH = Subscriber._meta.get_field("subscriber_id").max_length
UNKNOWN_SHOWN = 50  # unknown subscriber ids named in the error; the rest are counted
PENDING = (Broadcast.Status.SCHEDULED, Broadcast.Status.QUEUED, Broadcast.Status.SENDING)


class SubscribedAlready(ValidationError):
    """The chat (or the subscriber id) has a subscriber already: nothing was written."""


def subscriber_create(
    *, chat_id: str | int, chat_name: str, subscriber_id: str = "", created_at: datetime | None = None
) -> Subscriber:
    """Subscribe the Telegram user `chat_id` under a new id (a random UUID unless `subscriber_id`
    is given). A user Courier has not met yet is created with no access hash (the gateway reaches
    them by id), `chat_name` as their first name when it fits; a user Courier knows keeps their
    names and state. Raises SubscribedAlready when the user or the id has a subscriber, and a
    ValidationError keyed `chat_id` / `subscriber_id` for an id that is no Telegram user's (a
    group, a channel, not a number) or too long."""
    try:
        telegram_id = user_id_parse(value=chat_id)
    except Invalid as exc:
        raise ValidationError({"chat_id": [f"{str(exc)[0].upper()}{str(exc)[1:]}."]}) from exc
    subscriber_id = subscriber_id or str(uuid.uuid4())
    if len(subscriber_id) > SUBSCRIBER_ID_LENGTH:
        raise ValidationError({"subscriber_id": [f"At most {SUBSCRIBER_ID_LENGTH} characters."]})
    when = created_at or clock.now()
    try:
        with transaction.atomic():
            user, _ = TelegramUser.objects.get_or_create(
                telegram_id=telegram_id,
                defaults={
                    "first_name": chat_name if len(chat_name) <= FIRST_NAME_LENGTH else "",
                    "joined_at": when,
                    "last_seen_at": when,
                },
            )
            if Subscriber.objects.filter(user=user).exists():
                raise SubscribedAlready(SUBSCRIBED_ALREADY)
            return Subscriber.objects.create(subscriber_id=subscriber_id, user=user, chat_name=chat_name, created_at=when)
    except IntegrityError as exc:  # subscribed at the same moment by another request, or the id is taken
        raise SubscribedAlready(SUBSCRIBED_ALREADY) from exc


def subscriber_ids_resolve(*, subscriber_ids: Sequence[str]) -> tuple[list[int], list[str]]:
    """The Telegram ids of the subscribers named (in the order given, each once) and the ids no
    subscriber has (in the order given). One query."""
    found = dict(
        Subscriber.objects.filter(subscriber_id__in=set(subscriber_ids)).values_list("subscriber_id", "user__telegram_id")
    )
    telegram_ids = list(dict.fromkeys(found[i] for i in subscriber_ids if i in found))
    unknown = list(dict.fromkeys(i for i in subscriber_ids if i not in found))
    return telegram_ids, unknown


def subscriber_message_schedule(
    *,
    target_ids: Sequence[str],
    message: str,
    scheduled_for: datetime,
    files: Sequence[File] = (),
    api_client: str = "",
    message_id: str = "",
    created_at: datetime | None = None,
    skip_unknown: bool = False,
) -> SubscriberMessage:
    """Schedule `message` (plain text, sent as written) with `files` (each sent as a document) to
    the subscribers `target_ids` names, at `scheduled_for` (a time with a zone; one past is due
    at once). An id no subscriber has is a ValidationError keyed `user_ids` naming it, unless
    `skip_unknown` (an import: the old system failed such recipients when it sent); the message
    itself is checked by `message_schedule` (its ValidationError keys: send_at, user_ids, text,
    attachments). Returns the subscriber message, id `message_id` (a new UUID when empty)."""
    targets = list(target_ids)
    if not targets:
        raise ValidationError({"user_ids": ["List at least one subscriber id."]})
    telegram_ids, unknown = subscriber_ids_resolve(subscriber_ids=targets)
    if unknown and not skip_unknown:
        shown = ", ".join(unknown[:UNKNOWN_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        raise ValidationError({"user_ids": [f"No subscriber has these ids: {shown}{more}."]})
    if not telegram_ids:
        raise ValidationError({"user_ids": [f"No subscriber has any of these ids: {', '.join(targets[:UNKNOWN_SHOWN])}."]})
    attachments = [AttachmentSpec(kind=BroadcastAttachment.Kind.DOCUMENT, upload=f, file_name=f.name or "file") for f in files]
    with transaction.atomic():
        broadcast = message_schedule(
            send_at=scheduled_for,
            text=html.escape(message, quote=False),
            audience=Broadcast.Audience.USERS,
            user_ids=telegram_ids,
            attachments=attachments,
            api_client=api_client,
            past_sends_now=True,
        )
        return SubscriberMessage.objects.create(
            message_id=message_id or str(uuid.uuid4()),
            broadcast=broadcast,
            target_ids=targets,
            scheduled_for=scheduled_for,
            created_at=created_at or clock.now(),
        )


def subscriber_message_text(*, message: SubscriberMessage) -> str:
    """The message's text as the client gave it (stored as Telegram HTML that shows it as written)."""
    return html.unescape(message.broadcast.text)


def subscriber_message_sent(*, message: SubscriberMessage) -> bool:
    """Whether the sender is done with it: every recipient's result is recorded."""
    return message.broadcast.status == Broadcast.Status.DONE


def subscriber_messages_pending():
    """Subscriber messages not sent yet (scheduled, or being sent), oldest first, with their
    broadcasts and attachments (three queries when iterated)."""
    return (
        SubscriberMessage.objects.filter(broadcast__status__in=PENDING)
        .select_related("broadcast")
        .prefetch_related("broadcast__attachments")
        .order_by("id")
    )
