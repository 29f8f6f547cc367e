"""The HTTP API, /api/v1/: thin views over botapp's services and the scheduler's statistics.
Every request carries `Authorization: Bearer <token>` (api/authentication.py)."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view, inline_serializer
from rest_framework import mixins, parsers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from api.errors import JSONParser
from api.serializers import (
    BroadcastSerializer,
    MessageDetailSerializer,
    MessageSerializer,
    MessageWriteSerializer,
    MessageWrittenSerializer,
    StoredFileSerializer,
    TelegramUserSerializer,
    field_errors,
)
from botapp.models import Broadcast, StoredFile, TelegramUser
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from botapp.services.files import bot_username_cached, file_store
from botapp.services.messages import message_schedule, message_update
from botapp.services.stream_links import stream_links_revoke
from scheduler.stats import scheduler_stats

Error = inline_serializer("Error", {"detail": serializers.CharField()})
FieldErrors = OpenApiResponse(
    OpenApiTypes.OBJECT, description="Field errors: {field: [messages]} (messages not about one field under detail)."
)
# Every endpoint may answer these.
ERRORS = {401: Error, 403: Error, 429: Error}
WRITE_ERRORS = {400: FieldErrors, **ERRORS}
READ_ONE_ERRORS = {404: Error, **ERRORS}


class ById(CursorPagination):
    """Cursor pagination, oldest first: stable while rows are added (`next` / `previous` links)."""

    ordering = "id"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound as exc:  # DRF answers 404; it is the caller's input that is wrong
            raise serializers.ValidationError({"cursor": ["Invalid cursor: follow the next or previous link as given."]}) from exc


def service(call):
    """Run a service call; its ValidationError becomes a 400 with the field errors."""
    try:
        return call()
    except DjangoValidationError as exc:
        raise field_errors(exc) from exc


# --- scheduled messages ------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="Scheduled messages, newest first",
        parameters=[OpenApiParameter("status", enum=Broadcast.Status.values, description="Only messages in this state.")],
        responses={200: MessageSerializer(many=True), 400: FieldErrors, **ERRORS},
    ),
    retrieve=extend_schema(
        summary="A scheduled message with every recipient's result", responses={200: MessageDetailSerializer, **READ_ONE_ERRORS}
    ),
    create=extend_schema(
        summary="Schedule a message (JSON with file ids, or multipart with files)",
        request={"application/json": MessageWriteSerializer, "multipart/form-data": MessageWriteSerializer},
        responses={201: MessageWrittenSerializer, **WRITE_ERRORS},
    ),
    partial_update=extend_schema(
        summary="Change a message that has not started",
        request={"application/json": MessageWriteSerializer, "multipart/form-data": MessageWriteSerializer},
        responses={200: MessageWrittenSerializer, 404: Error, **WRITE_ERRORS},
    ),
)
class MessageViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    parser_classes = (JSONParser, parsers.MultiPartParser)
    http_method_names = ["get", "post", "patch", "head", "options"]
    lookup_value_regex = "[0-9]+"  # anything else is the JSON 404 of NotFoundView

    def get_queryset(self):
        messages = Broadcast.objects.filter(kind=Broadcast.Kind.MESSAGE).prefetch_related("attachments").order_by("-id")
        wanted = self.request.query_params.get("status")
        if wanted is not None:
            if wanted not in Broadcast.Status.values:
                raise serializers.ValidationError({"status": [f"One of {', '.join(Broadcast.Status.values)}."]})
            messages = messages.filter(status=wanted)
        return messages

    def get_serializer_class(self):
        return MessageDetailSerializer if self.action == "retrieve" else MessageSerializer

    def create(self, request):
        write = MessageWriteSerializer(data=request.data)
        write.is_valid(raise_exception=True)
        message = service(lambda: message_schedule(**write.service_arguments(), api_client=request.auth.name))
        return Response(written(message, write), status=status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        message = get_object_or_404(Broadcast, pk=pk, kind=Broadcast.Kind.MESSAGE)
        write = MessageWriteSerializer(data=request.data, partial=True)
        write.is_valid(raise_exception=True)
        message = service(lambda: message_update(message=message, changes=write.service_arguments()))
        return Response(written(message, write))

    @extend_schema(
        summary="Cancel: recipients not reached yet do not get it",
        request=None,
        responses={200: MessageDetailSerializer, 404: Error, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        message = get_object_or_404(Broadcast, pk=pk, kind=Broadcast.Kind.MESSAGE)
        service(lambda: broadcast_cancel(broadcast=message))
        return Response(MessageDetailSerializer(message).data)


def written(message: Broadcast, write: MessageWriteSerializer) -> dict:
    """MessageWrittenSerializer's shape: the message, with `notes` only when there are some."""
    data = MessageDetailSerializer(message).data
    if notes := write.validated_data["notes"]:
        data["notes"] = notes
    return data


# --- users -------------------------------------------------------------------------------------------


class UserQuery(serializers.Serializer):
    state = serializers.ChoiceField(choices=TelegramUser.State.choices, required=False)
    joined_after = serializers.DateTimeField(required=False, help_text="Joined at or after this time (ISO 8601).")
    payload = serializers.CharField(required=False, max_length=64, help_text="Came through this start payload.")


@extend_schema_view(
    list=extend_schema(
        summary="Users, oldest first (cursor pagination)",
        parameters=[UserQuery],
        responses={200: TelegramUserSerializer(many=True), 400: FieldErrors, **ERRORS},
    ),
    retrieve=extend_schema(summary="One user, by Telegram id", responses={200: TelegramUserSerializer, **READ_ONE_ERRORS}),
)
class UserViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TelegramUserSerializer
    pagination_class = ById
    lookup_field = "telegram_id"
    lookup_value_regex = "[0-9]+"

    def get_queryset(self):
        users = TelegramUser.objects.all()
        if self.action != "list":
            return users
        query = UserQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        wanted = query.validated_data
        if "state" in wanted:
            users = users.filter(state=wanted["state"])
        if "joined_after" in wanted:
            users = users.filter(joined_at__gte=wanted["joined_after"])
        if "payload" in wanted:
            users = users.filter(start_payload=wanted["payload"])
        return users


# --- scheduler ------------------------------------------------------------------------------------------


class SchedulerStatsView(APIView):
    @extend_schema(
        summary="What waits, what went out in the last 24 h, and each job's last run",
        responses={
            200: inline_serializer(
                "SchedulerStats",
                {
                    "pending": serializers.IntegerField(),
                    "pending_by_kind": serializers.DictField(child=serializers.IntegerField()),
                    "earliest_due": serializers.DateTimeField(allow_null=True),
                    "latest_due": serializers.DateTimeField(allow_null=True),
                    "sent_24h": serializers.IntegerField(),
                    "failed_24h": serializers.IntegerField(),
                    "failed_runs_24h": serializers.IntegerField(),
                    "jobs": inline_serializer(
                        "JobLastRun",
                        {
                            "job": serializers.CharField(),
                            "summary": serializers.CharField(),
                            "last_run_at": serializers.DateTimeField(allow_null=True),
                            "status": serializers.CharField(),
                            "processed": serializers.IntegerField(),
                            "failed": serializers.IntegerField(),
                            "detail": serializers.CharField(),
                            "error": serializers.CharField(),
                        },
                        many=True,
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request):
        stats = scheduler_stats().as_dict()
        for key in ("earliest_due", "latest_due"):
            stats[key] = serializers.DateTimeField().to_representation(stats[key]) if stats[key] else None
        for job in stats["jobs"]:
            job["last_run_at"] = serializers.DateTimeField().to_representation(job["last_run_at"]) if job["last_run_at"] else None
        return Response(stats)


# --- files ----------------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="Stored files and their deep links, oldest first",
        responses={200: StoredFileSerializer(many=True), 400: FieldErrors, **ERRORS},
    ),
    retrieve=extend_schema(summary="One stored file", responses={200: StoredFileSerializer, **READ_ONE_ERRORS}),
    create=extend_schema(
        summary="Register storage-channel messages: returns the deep link", responses={201: StoredFileSerializer, **WRITE_ERRORS}
    ),
)
class FileViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = StoredFile.objects.all()
    serializer_class = StoredFileSerializer
    pagination_class = ById
    lookup_field = "share_id"
    lookup_value_regex = "[A-Za-z0-9_-]+"

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "bot_username": bot_username_cached()}

    @extend_schema(
        summary="Revoke the file's stream links: every one given so far stops working, other files' keep working",
        request=None,
        responses={200: StoredFileSerializer, 404: Error, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["post"], url_path="revoke-stream-links")
    def revoke_stream_links(self, request, share_id=None):
        stored = self.get_object()
        stream_links_revoke(stored=stored)
        return Response(self.get_serializer(stored).data)

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = service(
            lambda: file_store(
                source_chat_id=data["source_chat_id"],
                message_ids=data["message_ids"],
                title=data.get("title", ""),
                protect_content=data.get("protect_content"),
                auto_delete_minutes=data.get("auto_delete_minutes"),
                skip_verification=data.get("skip_verification", False),
                expires_at=data.get("expires_at"),
            )
        )


# --- broadcasts ------------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="Broadcasts to every active user, newest first", responses={200: BroadcastSerializer(many=True), **ERRORS}
    ),
    retrieve=extend_schema(summary="A broadcast and its progress", responses={200: BroadcastSerializer, **READ_ONE_ERRORS}),
    create=extend_schema(summary="A draft broadcast (start it to send)", responses={201: BroadcastSerializer, **WRITE_ERRORS}),
)
class BroadcastViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Broadcast.objects.filter(kind=Broadcast.Kind.BROADCAST).order_by("-id")
    serializer_class = BroadcastSerializer
    lookup_value_regex = "[0-9]+"

    def perform_create(self, serializer):
        serializer.save(api_client=self.request.auth.name)

    @extend_schema(
        summary="Start: send now to every active user, or at scheduled_at",
        request=None,
        responses={200: BroadcastSerializer, 404: Error, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        broadcast = self.get_object()
        with transaction.atomic():
            service(lambda: broadcast_start(broadcast=broadcast))
        return Response(BroadcastSerializer(broadcast).data)

    @extend_schema(
        summary="Cancel: users not reached yet do not get it",
        request=None,
        responses={200: BroadcastSerializer, 404: Error, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        broadcast = self.get_object()
        service(lambda: broadcast_cancel(broadcast=broadcast))
        return Response(BroadcastSerializer(broadcast).data)


# --- the root and everything else under /api/v1/ ------------------------------------------------------------


class ApiRootView(APIView):
    """GET /api/v1/: the endpoints, for a client with a token (read scope)."""

    @extend_schema(
        summary="The API's endpoints",
        responses={
            200: inline_serializer("ApiRoot", {"endpoints": serializers.DictField(child=serializers.CharField())}),
            **ERRORS,
        },
    )
    def get(self, request):
        names = {
            "messages": "api:message-list",
            "users": "api:user-list",
            "files": "api:file-list",
            "broadcasts": "api:broadcast-list",
            "redeem_codes": "api:redeem-code-list",
            "allowed_users": "api:alloweduser-list",
            "scheduler_stats": "api:scheduler-stats",
            "schema": "api:schema",
            "docs": "api:docs",
        }
        return Response({"endpoints": {name: reverse(url, request=request) for name, url in names.items()}})


class NotFoundView(APIView):
    """Any other path under /api/v1/ (`/users/-5/` too): a JSON 404 for anyone, never the admin's
    login page."""

    permission_classes = ()
    throttle_classes = ()
    schema = None

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        raise NotFound(f"No endpoint {request.path}: GET /api/v1/ lists them.")
