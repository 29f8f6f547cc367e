"""Referrals (held ones approved or rejected here), redeem codes (made here, shown once, listed
with who redeemed them) and the notices outbox (the verification log). Writes go through
services/referrals.py and services/redeem.py."""

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models import Prefetch
from django.template.response import TemplateResponse
from django.utils.html import format_html_join
from unfold.decorators import action, display

from botapp.admin.base import InternalAdmin
from botapp.models import (
    BotSettings,
    GrowthCount,
    Notice,
    RedeemCode,
    RedeemThrottle,
    Redemption,
    Referral,
    ReferralCode,
    VerificationProgress,
)
from botapp.services.premium import DURATION_HELP, duration_parse
from botapp.services.redeem import CODES_MAX, USES_MAX, RedeemError, codes_generate
from botapp.services.referrals import referral_decide
from botapp.services.texts import human_span


@admin.register(Referral)
class ReferralAdmin(InternalAdmin):
    """Who brought whom. A referral held for review (its referee one of a burst of new accounts)
    counts once approved; rejected, it never counts."""

    list_display = ("referee", "referrer", "status", "created_at", "passed_at", "reason", "decided_by")
    list_filter = ("status", "created_at")
    search_fields = ("=referrer__telegram_id", "=referee__telegram_id", "referrer__username", "referee__username")
    list_select_related = ("referrer", "referee")
    readonly_fields = list_display + ("decided_at", "reward")
    actions = ("approve", "reject")

    @admin.action(description="Approve the selected held referrals (they count)")
    def approve(self, request, queryset):
        self._decide(request, queryset, approve=True)

    @admin.action(description="Reject the selected held referrals (they never count)")
    def reject(self, request, queryset):
        self._decide(request, queryset, approve=False)

    def _decide(self, request, queryset, *, approve: bool) -> None:
        held = list(queryset.filter(status=Referral.Status.HELD).values_list("pk", flat=True))
        done = [referral_decide(referral_id=pk, approve=approve, by=request.user.get_username()) for pk in held]
        n = sum(d is not None for d in done)
        skipped = queryset.count() - n
        note = f" {skipped} were not held (decided already or counted) and were left alone." if skipped else ""
        self.message_user(request, f"{n} referral(s) {'approved' if approve else 'rejected'}.{note}", messages.SUCCESS)


class GenerateCodesForm(forms.Form):
    premium = forms.CharField(label="Premium time", help_text=DURATION_HELP, initial="7d")
    count = forms.IntegerField(label="How many codes", min_value=1, max_value=CODES_MAX, initial=1)
    uses = forms.IntegerField(label="Users per code", min_value=1, max_value=USES_MAX, initial=1)
    valid_days = forms.IntegerField(
        label="Valid for (days)", min_value=1, max_value=3650, help_text="Empty: as Bot settings say.", required=False
    )

    def clean_premium(self):
        duration = duration_parse(text=self.cleaned_data["premium"])
        if duration is None:
            raise forms.ValidationError(f"Not a duration. {DURATION_HELP}")
        return duration


@admin.register(RedeemCode)
class RedeemCodeAdmin(InternalAdmin):
    """Codes are made with *Make codes* (or /gencode, or the API) and shown once; only their hash is kept."""

    list_display = ("hint_shown", "premium_shown", "uses_shown", "expires_at", "created_at", "created_by", "redeemed_by")
    list_filter = ("created_at", "expires_at")
    search_fields = ("hint", "created_by", "=redemptions__user__telegram_id")
    readonly_fields = ("hint", "premium", "uses_max", "uses", "expires_at", "created_at", "created_by", "redeemed_by")

    def get_queryset(self, request):
        redemptions = Prefetch("redemptions", queryset=Redemption.objects.select_related("user").order_by("redeemed_at"))
        return super().get_queryset(request).prefetch_related(redemptions)

    actions_list = ["make_codes"]

    @action(description="Make codes", url_path="make", icon="add")
    def make_codes(self, request):
        form = GenerateCodesForm(request.POST or None)
        context = {**self.admin_site.each_context(request), "title": "Make redeem codes", "form": form}
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            valid = timedelta(days=data["valid_days"] or BotSettings.load().redeem_code_days)
            try:
                made = codes_generate(
                    premium=data["premium"], count=data["count"], uses=data["uses"], valid_for=valid,
                    by=f"console:{request.user.get_username()}",
                )  # fmt: skip
            except RedeemError as exc:
                form.add_error(None, str(exc))
            else:
                context.update(
                    made=made, premium=human_span(delta=data["premium"]), uses=data["uses"], expires=made[0].row.expires_at
                )
        response = TemplateResponse(request, "admin/botapp/redeem_generate.html", context)
        response["Cache-Control"] = "no-store"  # the codes are shown once: not kept by the browser either
        return response

    @display(description="code")
    def hint_shown(self, obj):
        return f"{obj.hint}-…"

    @display(description="premium")
    def premium_shown(self, obj):
        return human_span(delta=obj.premium)

    @display(description="used")
    def uses_shown(self, obj):
        return f"{obj.uses}/{obj.uses_max}"

    @display(description="redeemed by")
    def redeemed_by(self, obj):
        rows = list(obj.redemptions.all())
        if not rows:
            return "—"
        return format_html_join(", ", "{} ({})", ((r.user, f"{r.redeemed_at:%Y-%m-%d %H:%M}") for r in rows))


@admin.register(Notice)
class NoticeAdmin(InternalAdmin):
    """The verification log's lines and the referrers' notices, as the send_notices job sends them."""

    list_display = ("created_at", "chat_id", "text", "status", "result")
    list_filter = ("status", "created_at")
    search_fields = ("text", "=chat_id")
    readonly_fields = ("chat_id", "text", "status", "created_at", "claimed_at", "batch", "result")


@admin.register(Redemption)
class RedemptionAdmin(InternalAdmin):
    """Who redeemed which code, and the premium plan it gave."""

    list_display = ("redeemed_at", "user", "code", "plan")
    list_filter = ("redeemed_at",)
    search_fields = ("=user__telegram_id", "user__username", "code__hint")
    list_select_related = ("user", "code", "plan")
    readonly_fields = list_display


@admin.register(RedeemThrottle)
class RedeemThrottleAdmin(InternalAdmin):
    """Users' wrong codes; deleting a row lifts that user's cool-off."""

    list_display = ("user", "failures", "window_started_at", "blocked_until")
    list_filter = ("blocked_until",)
    search_fields = ("=user__telegram_id", "user__username")
    list_select_related = ("user",)
    readonly_fields = list_display
    deletable = True


@admin.register(ReferralCode)
class ReferralCodeAdmin(InternalAdmin):
    """Each user's referral code (their link: /start ref_<code>), made by their first /refer."""

    list_display = ("user", "code", "created_at")
    list_filter = ("created_at",)
    search_fields = ("=user__telegram_id", "user__username", "=code")
    list_select_related = ("user",)
    readonly_fields = list_display


@admin.register(VerificationProgress)
class VerificationProgressAdmin(InternalAdmin):
    """Where each user is in their verification period (verification in steps)."""

    list_display = ("user", "step", "period_started_at", "last_verified_at")
    list_filter = ("step", "period_started_at")
    search_fields = ("=user__telegram_id", "user__username")
    list_select_related = ("user",)
    readonly_fields = list_display


@admin.register(GrowthCount)
class GrowthCountAdmin(InternalAdmin):
    """Day totals of verifications by step, bypasses, bans, referrals and redemptions."""

    list_display = ("day", "kind", "count")
    list_filter = ("kind", "day")
    search_fields = ("kind",)
    readonly_fields = list_display
