"""Premium plans, admin bans and the record of admins' commands in the bot."""

from django.contrib import admin, messages

from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.models import AdminCommand, PremiumPlan, UserBan
from botapp.services.moderation import user_unban
from botapp.services.premium import premium_revoke


@admin.register(PremiumPlan)
class PremiumPlanAdmin(ModelAdmin):
    """Granted with /addpremium in the bot; ended here or with /delpremium."""

    list_display = ("user", "status", "starts_at", "ends_at", "granted_by", "ended_at", "notice")
    list_filter = ("status", "ends_at", "starts_at", "granted_by")
    search_fields = ("=user__telegram_id", "user__username", "user__first_name")
    list_select_related = ("user",)
    date_hierarchy = "ends_at"
    readonly_fields = ("user", "status", "starts_at", "ends_at", "granted_by", "ended_at", "notice")
    actions = ("end_now",)

    def has_add_permission(self, request):
        return False

    @admin.action(description="End the selected plans now")
    def end_now(self, request, queryset):
        ended = sum(premium_revoke(user=plan.user) is not None for plan in queryset.filter(status=PremiumPlan.Status.ACTIVE))
        self.message_user(request, f"{ended} plan(s) ended.", messages.SUCCESS)


@admin.register(UserBan)
class UserBanAdmin(ModelAdmin):
    """Made with /ban in the bot or *Ban* on Telegram users; lifted here, with *Unban* there or with /unban."""

    list_display = ("user", "created_at", "until", "reason", "banned_by", "lifted_at", "lifted_by")
    list_filter = ("created_at", "until", "lifted_at")
    search_fields = ("=user__telegram_id", "user__username", "reason")
    list_select_related = ("user",)
    readonly_fields = ("user", "reason", "banned_by", "created_at", "until", "lifted_at", "lifted_by")
    actions = ("lift",)

    def has_add_permission(self, request):
        return False

    @admin.action(description="Lift the selected bans")
    def lift(self, request, queryset):
        lifted = sum(user_unban(user=ban.user) for ban in queryset.filter(lifted_at__isnull=True))
        self.message_user(request, f"{lifted} ban(s) lifted.", messages.SUCCESS)


@admin.register(AdminCommand)
class AdminCommandAdmin(InternalAdmin):
    """What admins asked of the bot: read only."""

    list_display = ("created_at", "admin_id", "command", "arguments", "ok", "result")
    list_filter = ("command", "ok", "created_at")
    search_fields = ("=admin_id", "arguments", "result")
    date_hierarchy = "created_at"
