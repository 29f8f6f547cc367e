"""What the API reads and writes. Checks live in the services (botapp/services/messages.py,
files.py, broadcasts.py); a ValidationError from them becomes a 400 with its field errors."""

from __future__ import annotations

import json
import mimetypes

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from botapp import clock
from botapp.models import BotSettings, Broadcast, BroadcastAttachment, BroadcastDelivery, StoredFile, TelegramUser
from botapp.models.buttons import button_text_problem
from botapp.models.files import MAX_BATCH, message_ids_problem
from botapp.models.sequences import START_PAYLOAD_RE
from botapp.services.broadcasts import PREPARED_IN
from botapp.services.composed import ComposedMessageForm
from botapp.services.files import bot_username_cached, deep_link
from botapp.services.messages import MAX_RECIPIENTS, AttachmentSpec, attachment_name_notes, message_results
from botapp.services.stream_links import stream_links_for
from botapp.telegram.limits import (
    BUTTON_TEXT_LENGTH,
    CHANNEL_ID_MAX,
    CHANNEL_ID_MIN,
    MESSAGE_ID_MAX,
    USER_ID_MAX,
    channel_id_problem,
)


def field_errors(exc: DjangoValidationError) -> serializers.ValidationError:
    """A service's ValidationError as DRF's 400: {field: [messages]} (non-field ones under "detail")."""
    if hasattr(exc, "error_dict"):
        return serializers.ValidationError({("detail" if k == "__all__" else k): v for k, v in exc.message_dict.items()})
    return serializers.ValidationError({"detail": exc.messages})


# --- buttons ---------------------------------------------------------------------------------


class ButtonSerializer(serializers.Serializer):
    text = serializers.CharField(
        max_length=2 * BUTTON_TEXT_LENGTH,
        help_text=f"At most {BUTTON_TEXT_LENGTH} characters as Telegram counts them (UTF-16: an emoji counts 2).",
    )
    url = serializers.CharField(max_length=2048, help_text="https://, http:// or tg:// link.")
    key = serializers.CharField(
        max_length=64, required=False, allow_blank=True, help_text="Track clicks under this key (needs PUBLIC_URL)."
    )

    def validate_text(self, text):
        if problem := button_text_problem(text=text):
            raise serializers.ValidationError(problem[0].upper() + problem[1:])
        return text

    def validate(self, data):
        if any("|" in data.get(f, "") for f in ("text", "url", "key")):
            raise serializers.ValidationError('A button\'s text, url and key cannot contain "|".')
        return data


def buttons_to_lines(rows: list[list[dict]]) -> str:
    """Rows of buttons as the composer's lines ("Text | url | key", "||" between buttons)."""
    lines = []
    for row in rows:
        parts = [" | ".join(filter(None, [b["text"], b["url"], b.get("key", "")])) for b in row]
        if parts:
            lines.append(" || ".join(parts))
    return "\n".join(lines)


def buttons_from_lines(text: str) -> list[list[dict]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = []
        for part in line.split("||"):
            pieces = [p.strip() for p in part.split("|")]
            button = {"text": pieces[0], "url": pieces[1] if len(pieces) > 1 else ""}
            if len(pieces) > 2 and pieces[2]:
                button["key"] = pieces[2]
            row.append(button)
        rows.append(row)
    return rows


class ButtonsField(serializers.ListField):
    """Rows of buttons: [[{"text": "Shop", "url": "https://shop.example"}], ...]. In a multipart
    request, the same as a JSON string."""

    child = serializers.ListField(child=ButtonSerializer(), max_length=8)

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                data = json.loads(data or "[]")
            except (ValueError, RecursionError) as exc:
                raise serializers.ValidationError("Give the buttons as JSON: rows of {text, url}.") from exc
        return super().to_internal_value(data)

    def to_representation(self, value):
        return buttons_from_lines(value) if isinstance(value, str) else super().to_representation(value)


# --- scheduled messages --------------------------------------------------------------------------------


class AttachmentSerializer(serializers.ModelSerializer):
    uploaded = serializers.SerializerMethodField()

    class Meta:
        model = BroadcastAttachment
        fields = ("kind", "file_name", "size", "file_id", "uploaded", "error")

    def get_uploaded(self, obj) -> bool:
        """The file is on Telegram (a file id to send it by)."""
        return bool(obj.file_id)


class FileIdAttachmentSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=BroadcastAttachment.Kind.choices)
    file_id = serializers.CharField(max_length=512, help_text="A Telegram file id the bot can send.")


class AttachmentsField(serializers.ListField):
    """Attachments by Telegram file id: [{"kind": "photo", "file_id": "..."}]; a JSON string in multipart."""

    child = FileIdAttachmentSerializer()

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                data = json.loads(data or "[]")
            except (ValueError, RecursionError) as exc:
                raise serializers.ValidationError("Give the attachments as JSON: [{kind, file_id}].") from exc
        return super().to_internal_value(data)


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    sent = serializers.IntegerField()
    failed = serializers.IntegerField()
    blocked = serializers.IntegerField()
    skipped = serializers.IntegerField()
    interrupted = serializers.IntegerField()
    not_users = serializers.IntegerField()
    done = serializers.IntegerField()
    preparing = serializers.BooleanField(
        help_text="A large audience's rows are still being made by a worker while it sends: `total` grows."
    )
    audience_size = serializers.IntegerField(
        allow_null=True, help_text="While preparing: the recipients it will have (counted when the worker took it up)."
    )


def progress_of(b: Broadcast) -> dict:
    counts = {k: getattr(b, k) for k in ("total", "sent", "failed", "blocked", "skipped", "interrupted", "not_users")}
    preparing = b.prepare_after is not None and b.status in PREPARED_IN
    return {
        **counts,
        "done": sum(v for k, v in counts.items() if k != "total"),
        "preparing": preparing,
        "audience_size": b.audience_size if preparing else None,
    }


class ResultSerializer(serializers.Serializer):
    telegram_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=BroadcastDelivery.Status.choices)
    error = serializers.CharField(allow_blank=True)
    message_id = serializers.IntegerField(allow_null=True)
    sent_at = serializers.DateTimeField(allow_null=True)


class MessageSerializer(serializers.ModelSerializer):
    """A scheduled message as the API shows it."""

    send_at = serializers.DateTimeField(source="scheduled_at")
    recipients = serializers.CharField(source="audience")
    payload = serializers.CharField(source="audience_payload")
    recipient_count = serializers.SerializerMethodField()
    buttons = serializers.SerializerMethodField()
    attachments = AttachmentSerializer(many=True, read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Broadcast
        fields = (
            "id",
            "status",
            "send_at",
            "recipients",
            "payload",
            "recipient_count",
            "text",
            "buttons",
            "protect_content",
            "attachments",
            "progress",
            "api_client",
            "created_at",
            "started_at",
            "finished_at",
        )

    def get_recipient_count(self, obj) -> int:
        """Listed ids (users), or recipients found when it started (all, payload)."""
        return len(obj.recipient_ids) if obj.audience == Broadcast.Audience.USERS else obj.total

    @extend_schema_field(serializers.ListField(child=serializers.ListField(child=ButtonSerializer())))
    def get_buttons(self, obj):
        return buttons_from_lines(obj.buttons)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj):
        return progress_of(obj)


class MessageDetailSerializer(MessageSerializer):
    user_ids = serializers.JSONField(source="recipient_ids", help_text="Telegram ids listed (recipients: users).")
    results = serializers.SerializerMethodField()

    class Meta(MessageSerializer.Meta):
        fields = (*MessageSerializer.Meta.fields, "user_ids", "results")

    @extend_schema_field(ResultSerializer(many=True))
    def get_results(self, obj):
        return message_results(message=obj)


class MessageWrittenSerializer(MessageDetailSerializer):
    """The answer to a create or a change: the message, and `notes` on what was kept otherwise
    than given (a file name cut to what the database holds). Only for the schema: the view adds
    `notes` when there are any."""

    notes = serializers.ListField(child=serializers.CharField(), required=False, help_text="Only when there is something to say.")

    class Meta(MessageDetailSerializer.Meta):
        fields = (*MessageDetailSerializer.Meta.fields, "notes")


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 with its zone: a time without one is refused rather than guessed."""

    def to_internal_value(self, value):
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip().replace("Z", "+00:00")) if value.strip() else None
            except ValueError as exc:  # well formed, not a time: "12:99"
                raise serializers.ValidationError(f"Not a time: {exc}.") from exc
            if parsed is not None and parsed.tzinfo is None:
                raise serializers.ValidationError("Give the time with its zone (e.g. +00:00 or Z).")
        return super().to_internal_value(value)


class TelegramIdsField(serializers.ListField):
    """A list of Telegram ids. A JSON list of positive integers (100,000 of them in a message to a
    list) is taken as it is, without a field object per item; anything else is checked item by item
    for the error messages."""

    def to_internal_value(self, data):
        if isinstance(data, list) and len(data) <= MAX_RECIPIENTS and all(type(i) is int and 0 < i <= USER_ID_MAX for i in data):
            return data
        if isinstance(data, str):
            data = [data]
        if isinstance(data, list) and any(isinstance(i, str) for i in data):
            # A form field (multipart) as scripts send it: "1001,1002", or one id per field.
            data = [part for item in data for part in (item.replace(",", " ").split() if isinstance(item, str) else [item])]
        return super().to_internal_value(data)


RECIPIENTS = [
    ("users", "The listed user_ids"),
    ("all", "Every active user"),
    ("payload", "Users whose first /start carried payload"),
]


class MessageWriteSerializer(serializers.Serializer):
    """A new scheduled message, or the fields a PATCH changes. JSON, or multipart with `files`."""

    send_at = AwareDateTimeField(help_text="ISO 8601 with its zone, in the future.")
    recipients = serializers.ChoiceField(choices=RECIPIENTS, default="users")
    user_ids = TelegramIdsField(
        child=serializers.IntegerField(min_value=1, max_value=USER_ID_MAX),
        required=False,
        max_length=MAX_RECIPIENTS,
        help_text="With recipients: users. In a multipart form: one field per id, or ids separated by commas (1001,1002).",
    )
    payload = serializers.RegexField(
        START_PAYLOAD_RE,
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="With recipients: payload. A-Z, a-z, 0-9, _ and - (what Telegram's deep links carry).",
        error_messages={"invalid": "A start payload uses A-Z, a-z, 0-9, _ and - only (Telegram's deep links carry no other)."},
    )
    text = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False, max_length=8192)
    buttons = ButtonsField(required=False)
    protect_content = serializers.BooleanField(required=False, default=False)
    attachments = AttachmentsField(required=False)
    files = serializers.ListField(
        child=serializers.FileField(), required=False, help_text="Files to upload (multipart), sent before file-id attachments."
    )
    kinds = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Comma-separated kind per uploaded file (photo, video, document, audio); "
        "default: from each file's type (image: photo, video, audio, anything else: document).",
    )

    def validate(self, data):
        files = data.get("files") or []
        kinds = [k.strip() for k in data.get("kinds", "").split(",") if k.strip()]
        if kinds and len(kinds) != len(files):
            raise serializers.ValidationError({"kinds": [f"Give one kind per file ({len(files)} files, {len(kinds)} kinds)."]})
        specs = [
            AttachmentSpec(
                kind=kinds[n] if kinds else kind_of(f.name, getattr(f, "content_type", "")),
                upload=f,
                file_name=getattr(f, "given_name", f.name),  # config/uploads.py: before Django cut it
            )
            for n, f in enumerate(files)
        ]
        specs += [AttachmentSpec(kind=a["kind"], file_id=a["file_id"]) for a in data.get("attachments") or []]
        data["attachment_specs"] = specs
        data["notes"] = attachment_name_notes(attachments=specs)
        return data

    def service_arguments(self) -> dict:
        """The validated fields as message_schedule / message_update name them (given ones only on a PATCH)."""
        data, given = self.validated_data, self.initial_data
        args = {
            "send_at": data.get("send_at"),
            "audience": data.get("recipients"),
            "user_ids": data.get("user_ids", []),
            "payload": data.get("payload", ""),
            "text": data.get("text", ""),
            "buttons": buttons_to_lines(data.get("buttons", [])),
            "protect": data.get("protect_content", False),
            "attachments": data["attachment_specs"],
        }
        if not self.partial:
            return args
        names = {
            "send_at": "send_at",
            "recipients": "audience",
            "user_ids": "user_ids",
            "payload": "payload",
            "text": "text",
            "buttons": "buttons",
            "protect_content": "protect",
        }
        changes = {names[k]: args[names[k]] for k in names if k in given}
        if "attachments" in given or "files" in given:
            changes["attachments"] = args["attachments"]
        return changes


def kind_of(name: str, content_type: str) -> str:
    """The attachment kind a file's type suggests (its content type, else its name)."""
    mime = content_type or mimetypes.guess_type(name)[0] or ""
    if mime.startswith("image/") and mime != "image/gif":
        return "photo"
    if mime.startswith("video/"):
        return "video"
    if mime.startswith("audio/"):
        return "audio"
    return "document"


# --- users -------------------------------------------------------------------------------------------


class TelegramUserSerializer(serializers.ModelSerializer):
    class Meta:
        model = TelegramUser
        fields = (
            "telegram_id",
            "username",
            "first_name",
            "last_name",
            "language_code",
            "start_payload",
            "last_start_payload",
            "state",
            "joined_at",
            "last_seen_at",
        )


# --- files ---------------------------------------------------------------------------------------------


class StreamUrlsSerializer(serializers.Serializer):
    watch = serializers.URLField(help_text="The player page (a download page for a file that does not play).")
    download = serializers.URLField(help_text="The bytes, as an attachment (resumable: Range requests).")


class StoredFileSerializer(serializers.ModelSerializer):
    link = serializers.SerializerMethodField()
    stream_urls = serializers.SerializerMethodField(
        help_text="Per message, in order: signed stream and download links on STREAM_PUBLIC_URL, lasting the file's "
        "stream lifetime from now (empty: no STREAM_PUBLIC_URL)."
    )
    # Checked as the console checks them (message_ids_problem), for the same messages.
    message_ids = serializers.ListField(
        child=serializers.IntegerField(),
        help_text=f"1 to {MAX_BATCH} storage-channel message ids (1 to {MESSAGE_ID_MAX}), none twice, in delivery order.",
    )
    source_chat_id = serializers.IntegerField(
        required=False,
        min_value=CHANNEL_ID_MIN,
        max_value=CHANNEL_ID_MAX,
        help_text="The storage channel, -100… (default: STORAGE_CHANNEL_ID).",
    )

    class Meta:
        model = StoredFile
        fields = (
            "share_id",
            "link",
            "source_chat_id",
            "message_ids",
            "title",
            "protect_content",
            "auto_delete_minutes",
            "skip_verification",
            "expires_at",
            "stream_urls",
            "stream_gone_at",
            "delivery_count",
            "last_delivered_at",
            "created_at",
        )
        read_only_fields = ("share_id", "stream_gone_at", "delivery_count", "last_delivered_at", "created_at")
        extra_kwargs = {
            "protect_content": {"help_text": "null: as Bot settings."},
            "auto_delete_minutes": {
                "help_text": "Delete delivered messages after this many minutes (0: never; null: as Bot settings)."
            },
            "expires_at": {"help_text": "From then on the link answers that it has expired (null: never)."},
            "stream_gone_at": {
                "help_text": "When the streaming process found the file's message deleted (null: not found gone)."
            },
        }

    @extend_schema_field(StreamUrlsSerializer(many=True))
    def get_stream_urls(self, obj) -> list[dict]:
        if not settings.STREAM_PUBLIC_URL:
            return []
        links = stream_links_for(stored=obj, conf=BotSettings.load(), user_id=None)
        return [{"watch": u.watch, "download": u.download} for u in links]

    def get_link(self, obj) -> str:
        """The deep link that delivers the file (t.me/<bot>?start=<share id>)."""
        return deep_link(bot_username=self.context.get("bot_username") or bot_username_cached(), payload=obj.share_id)

    def validate_message_ids(self, ids):
        if problem := message_ids_problem(ids):
            raise serializers.ValidationError(problem)
        return ids

    def validate_source_chat_id(self, chat_id):
        if problem := channel_id_problem(chat_id):
            raise serializers.ValidationError(problem)
        return chat_id

    def validate(self, data):
        if "source_chat_id" not in data:
            if not settings.STORAGE_CHANNEL_ID:
                raise serializers.ValidationError({"source_chat_id": ["Give the channel id (STORAGE_CHANNEL_ID is not set)."]})
            data["source_chat_id"] = int(settings.STORAGE_CHANNEL_ID)
        return data


# --- broadcasts ------------------------------------------------------------------------------------------


class BroadcastForm(ComposedMessageForm):
    """The checks the admin's composer makes (Telegram's limits, buttons, media), for the API."""

    class Meta:
        model = Broadcast
        fields = ("title", "text", "media_kind", "media", "buttons", "protect_content", "delete_after_minutes", "scheduled_at")

    def clean_scheduled_at(self):
        when = self.cleaned_data.get("scheduled_at")
        if when and when < clock.now():
            raise forms.ValidationError("This time is in the past. Leave it out to send when you start it.")
        return when


class BroadcastSerializer(serializers.ModelSerializer):
    """A broadcast to every active user: made as a draft, then started (now or at scheduled_at)."""

    progress = serializers.SerializerMethodField()
    buttons = ButtonsField(required=False)

    class Meta:
        model = Broadcast
        fields = (
            "id",
            "title",
            "text",
            "media_kind",
            "media",
            "buttons",
            "protect_content",
            "delete_after_minutes",
            "scheduled_at",
            "status",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = ("status", "created_at", "started_at", "finished_at")
        extra_kwargs = {"text": {"trim_whitespace": False}}

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj):
        return progress_of(obj)

    def validate(self, data):
        fields = {**data, "buttons": buttons_to_lines(data.get("buttons", []))}
        form = BroadcastForm(data={k: ("" if v is None else v) for k, v in fields.items()})
        if not form.is_valid():
            raise serializers.ValidationError({("detail" if k == "__all__" else k): v for k, v in form.errors.items()})
        return {**form.cleaned_data, "kind": Broadcast.Kind.BROADCAST}
