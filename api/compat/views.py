"""The scheduled-message API (shared/seeds/003) and the scheduler statistics (shared/seeds/004) as
their clients call them: the same paths, fields, answers and status codes, over Courier's
services. Authentication, scopes, the rate limit and the errors the documents do not name are the
HTTP API's own (api/authentication.py, api/errors.py): GET takes the read scope, POST the write
scope. docs/api.md#moved-in-clients."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import parsers, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from api.errors import JSONParser
from botapp import clock
from botapp.models import Subscriber, SubscriberMessage
from botapp.services.subscribers import (
    SUBSCRIBED_ALREADY,
    SubscribedAlready,
    subscriber_create,
    subscriber_message_schedule,
    subscriber_message_sent,
    subscriber_message_text,
    subscriber_messages_pending,
)
from scheduler.stats import scheduler_stats

INVALID_TIMESTAMP = "Invalid timestamp format. Use ISO 8601, e.g. 2025-12-05T10:30:00Z (a time without a zone is UTC)."
# The service's field names, as the scheduled-message API names its form fields.
FORM_FIELDS = {"send_at": "scheduled_timestamp", "user_ids": "target_user_id", "text": "message", "attachments": "files"}
ROOT = {
    "message": "Scheduled Message API",
    "endpoints": {
        "POST /schedule-message": "Schedule a new message",
        "POST /subscribe-user": "Subscribe a new user",
        "GET /pending-messages": "Get all pending messages",
        "GET /subscribed-users": "Get all subscribed users",
    },
}


def naive_utc(moment: datetime) -> str:
    """A time as the scheduled-message API wrote it: UTC without a zone, to the second."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def js_iso(moment: datetime | None) -> str | None:
    """A time as JavaScript's toISOString writes it (the statistics' dashboards read that):
    UTC, milliseconds, Z."""
    if moment is None:
        return None
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def timestamp_parse(text: str) -> datetime | None:
    """An ISO 8601 time; one without a zone is UTC (the document's "ISO 8601 UTC timestamp").
    None when it is not a time."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def form_errors(exc: DjangoValidationError) -> serializers.ValidationError:
    """A service's ValidationError as a 400 keyed by the form's field names."""
    if not hasattr(exc, "error_dict"):
        return serializers.ValidationError({"detail": exc.messages})
    errors: dict[str, list[str]] = {}
    for key, messages in exc.message_dict.items():
        errors.setdefault("detail" if key == "__all__" else FORM_FIELDS.get(key, key), []).extend(messages)
    return serializers.ValidationError(errors)


class CompatView(APIView):
    schema = None  # documented in docs/api.md; the OpenAPI schema is /api/v1/'s


# --- shared/seeds/003: the scheduled-message API --------------------------------------------------------


class ScheduleMessageForm(serializers.Serializer):
    target_user_id = serializers.CharField(help_text="Comma-separated subscriber ids.")
    message = serializers.CharField(allow_blank=True, trim_whitespace=False)
    scheduled_timestamp = serializers.CharField()
    files = serializers.ListField(child=serializers.FileField(), required=False)


class SubscribeForm(serializers.Serializer):
    chat_id = serializers.CharField(max_length=32)
    chat_name = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=255)


def message_json(message: SubscriberMessage) -> dict:
    paths = [a.upload.name or a.file_name for a in message.broadcast.attachments.all()]
    return {
        "id": message.message_id,
        "target_user_id": message.target_ids,
        "message": subscriber_message_text(message=message),
        "scheduled_timestamp": naive_utc(message.scheduled_for),
        "file_paths": paths or None,
        "is_sent": subscriber_message_sent(message=message),
        "created_at": naive_utc(message.created_at),
    }


def subscriber_json(subscriber: Subscriber) -> dict:
    return {
        "user_id": subscriber.subscriber_id,
        "chat_id": str(subscriber.user.telegram_id),
        "chat_name": subscriber.chat_name,
        "created_at": naive_utc(subscriber.created_at),
    }


class ScheduleMessageView(CompatView):
    """POST /schedule-message: multipart target_user_id (comma-separated), message,
    scheduled_timestamp, files. 200 with the message; 400 {"detail"} for a time that is not one."""

    parser_classes = (parsers.MultiPartParser, parsers.FormParser)

    def post(self, request):
        form = ScheduleMessageForm(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        when = timestamp_parse(data["scheduled_timestamp"])
        if when is None:
            return Response({"detail": INVALID_TIMESTAMP}, status=status.HTTP_400_BAD_REQUEST)
        try:
            message = subscriber_message_schedule(
                target_ids=[part.strip() for part in data["target_user_id"].split(",") if part.strip()],
                message=data["message"],
                scheduled_for=when,
                files=data.get("files") or [],
                api_client=request.auth.name,
            )
        except DjangoValidationError as exc:
            raise form_errors(exc) from exc
        return Response(message_json(message))


class SubscribeUserView(CompatView):
    """POST /subscribe-user: JSON chat_id, chat_name. 200 with the new user_id; 400 {"detail"}
    when the chat has subscribed already."""

    parser_classes = (JSONParser,)

    def post(self, request):
        form = SubscribeForm(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            subscriber = subscriber_create(chat_id=form.validated_data["chat_id"], chat_name=form.validated_data["chat_name"])
        except SubscribedAlready:
            return Response({"detail": SUBSCRIBED_ALREADY}, status=status.HTTP_400_BAD_REQUEST)
        except DjangoValidationError as exc:
            raise form_errors(exc) from exc
        return Response(subscriber_json(subscriber))


class PendingMessagesView(CompatView):
    """GET /pending-messages: every message made here that is not sent yet."""

    def get(self, request):
        return Response([message_json(m) for m in subscriber_messages_pending()])


class SubscribedUsersView(CompatView):
    """GET /subscribed-users: every subscriber."""

    def get(self, request):
        return Response([subscriber_json(s) for s in Subscriber.objects.select_related("user").order_by("id")])


class RootView(CompatView):
    """GET <LEGACY_API_PREFIX>/: the API's name and endpoints, as the document gives them."""

    def get(self, request):
        return Response(ROOT)


class NotFoundView(CompatView):
    """Anything else under LEGACY_API_PREFIX: a JSON 404 (FastAPI's words), never the console's login page."""

    permission_classes = ()
    throttle_classes = ()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        raise NotFound("Not Found")


# --- shared/seeds/004: the scheduler's statistics ------------------------------------------------------


class SchedulerStatsView(CompatView):
    """GET /api/messages/scheduler/stats: what waits, and its earliest and latest due time (the
    figures of /api/v1/scheduler/stats/, under the dashboards' names)."""

    def get(self, request):
        stats = scheduler_stats()
        return Response(
            {
                "success": True,
                "stats": {
                    "pendingCount": stats.pending,
                    "earliestScheduled": js_iso(stats.earliest_due),
                    "latestScheduled": js_iso(stats.latest_due),
                },
                "timestamp": js_iso(clock.now()),
            }
        )
