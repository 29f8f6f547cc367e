"""/api/v1/allowed-users/: owner-only mode's allow-list (botapp/services/allow_list.py). Whether the
mode is on is Bot settings'; the list is kept either way."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from api.views import ERRORS, READ_ONE_ERRORS, WRITE_ERRORS, ById, FieldErrors
from botapp.models import AllowedUser
from botapp.services.allow_list import allow_list_add, allow_list_remove
from botapp.telegram.limits import USER_ID_MAX

IDS_MAX = 10_000  # ids in one request


class AllowedUserSerializer(serializers.ModelSerializer):
    class Meta:
        model = AllowedUser
        fields = ("telegram_id", "note", "added_at", "added_by")
        read_only_fields = fields


class AllowedUsersAdd(serializers.Serializer):
    telegram_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=USER_ID_MAX), min_length=1, max_length=IDS_MAX
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")


Added = inline_serializer("AllowedUsersAdded", {"added": serializers.IntegerField(), "already": serializers.IntegerField()})


@extend_schema_view(
    list=extend_schema(
        summary="The allow-list, oldest first (cursor pagination)",
        responses={200: AllowedUserSerializer(many=True), 400: FieldErrors, **ERRORS},
    ),
    retrieve=extend_schema(summary="One allowed user, by Telegram id", responses={200: AllowedUserSerializer, **READ_ONE_ERRORS}),
    create=extend_schema(
        summary="Put Telegram ids on the allow-list", request=AllowedUsersAdd, responses={201: Added, **WRITE_ERRORS}
    ),
    destroy=extend_schema(
        summary="Take one Telegram id off the allow-list", responses={204: None, 404: READ_ONE_ERRORS[404], **ERRORS}
    ),
)
class AllowedUserViewSet(mixins.DestroyModelMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = AllowedUser.objects.all()
    serializer_class = AllowedUserSerializer
    pagination_class = ById
    lookup_field = "telegram_id"
    lookup_value_regex = "[0-9]+"

    def create(self, request, *args, **kwargs):
        body = AllowedUsersAdd(data=request.data)
        body.is_valid(raise_exception=True)
        ids = body.validated_data["telegram_ids"]
        added = allow_list_add(telegram_ids=ids, note=body.validated_data["note"])
        return Response({"added": added, "already": len(set(ids)) - added}, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        allow_list_remove(telegram_ids=[instance.telegram_id])
