"""/api/v1/redeem-codes/: make redeem codes (each shown in this one answer: only hashes are kept)
and list them with who redeemed them. A thin view over botapp/services/redeem.py."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from api.views import ERRORS, WRITE_ERRORS, ById, FieldErrors
from botapp.models import BotSettings, RedeemCode, Redemption
from botapp.services.premium import DURATION_HELP, duration_parse
from botapp.services.redeem import CODES_MAX, USES_MAX, RedeemError, codes_generate


class RedemptionSerializer(serializers.ModelSerializer):
    telegram_id = serializers.IntegerField(source="user.telegram_id")

    class Meta:
        model = Redemption
        fields = ("telegram_id", "redeemed_at")


class RedeemCodeSerializer(serializers.ModelSerializer):
    premium_seconds = serializers.SerializerMethodField()
    redemptions = RedemptionSerializer(many=True, read_only=True)

    class Meta:
        model = RedeemCode
        fields = ("id", "hint", "premium_seconds", "uses_max", "uses", "expires_at", "created_at", "created_by", "redemptions")

    def get_premium_seconds(self, obj) -> int:
        return int(obj.premium.total_seconds())


class RedeemCodeCreateSerializer(serializers.Serializer):
    premium = serializers.CharField(help_text=f"The premium time each code gives: {DURATION_HELP}")
    count = serializers.IntegerField(min_value=1, max_value=CODES_MAX, default=1)
    uses = serializers.IntegerField(min_value=1, max_value=USES_MAX, default=1, help_text="Users per code.")
    valid_days = serializers.IntegerField(
        min_value=1, max_value=3650, required=False, help_text="Default: Bot settings' redeem_code_days."
    )

    def validate_premium(self, value):
        duration = duration_parse(text=value)
        if duration is None:
            raise serializers.ValidationError(f"Not a duration. {DURATION_HELP}")
        return duration


class RedeemCodesMadeSerializer(serializers.Serializer):
    codes = serializers.ListField(child=serializers.CharField(), help_text="The codes: shown in this answer only.")
    items = RedeemCodeSerializer(many=True)


@extend_schema_view(
    list=extend_schema(
        summary="Redeem codes, oldest first, with who redeemed them",
        responses={200: RedeemCodeSerializer(many=True), 400: FieldErrors, **ERRORS},
    ),
    create=extend_schema(
        summary="Make redeem codes: the codes are in this answer only",
        request=RedeemCodeCreateSerializer,
        responses={201: RedeemCodesMadeSerializer, **WRITE_ERRORS},
    ),
)
class RedeemCodeViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    queryset = RedeemCode.objects.prefetch_related("redemptions__user")
    serializer_class = RedeemCodeSerializer
    pagination_class = ById
    http_method_names = ["get", "post", "head", "options"]

    def create(self, request):
        form = RedeemCodeCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        days = data.get("valid_days") or BotSettings.load().redeem_code_days
        try:
            made = codes_generate(
                premium=data["premium"], count=data["count"], uses=data["uses"], valid_for=timedelta(days=days),
                by=f"api:{request.auth.name}",
            )  # fmt: skip
        except RedeemError as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from exc
        body = {"codes": [m.code for m in made], "items": RedeemCodeSerializer([m.row for m in made], many=True).data}
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response
