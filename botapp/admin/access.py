"""The gates: verification tokens, daily counters, force-subscribe channels, join requests, day totals."""

from django.contrib import admin

from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.models import (
    ChannelJoinRequest,
    CounterEntry,
    DailyStat,
    DailyTokenCount,
    ForceSubChannel,
    VerificationToken,
)
from botapp.services.stats import counters_flush


class FlushCountersFirst:
    """Live counts wait as counter entries for the next flush (services/stats.py): flush them before showing them."""

    def changelist_view(self, request, extra_context=None):
        counters_flush()
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        counters_flush()
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(VerificationToken)
class VerificationTokenAdmin(InternalAdmin):
    deletable = True  # a deleted token is one the user can no longer redeem
    list_display = ("short_token", "user", "status", "share_id", "created_at", "expires_at", "used_at")
    list_filter = ("status", "created_at")
    search_fields = ("=user__telegram_id", "user__username", "token")
    list_select_related = ("user",)
    raw_id_fields = ("user",)

    @admin.display(description="token")
    def short_token(self, obj):
        return f"{obj.token[:10]}…"


@admin.register(DailyTokenCount)
class DailyTokenCountAdmin(InternalAdmin):
    deletable = True  # deleting today's row gives the user their daily tokens back
    list_display = ("user", "date", "count")
    list_filter = ("date",)
    search_fields = ("=user__telegram_id", "user__username")
    list_select_related = ("user",)
    raw_id_fields = ("user",)


@admin.register(ForceSubChannel)
class ForceSubChannelAdmin(ModelAdmin):
    list_display = ("title", "chat_id", "invite_link", "invite_ttl_minutes", "join_request", "enabled", "position")
    readonly_fields = ("current_link", "current_link_expires_at")

    def save_model(self, request, obj, form, change):
        # A stored link made under the old lifetime or mode must not be shown any more.
        if change and {"invite_ttl_minutes", "join_request", "chat_id"} & set(form.changed_data):
            obj.current_link, obj.current_link_expires_at = "", None
        super().save_model(request, obj, form, change)

    list_editable = ("enabled", "position")
    list_filter = ("enabled", "join_request")
    search_fields = ("title", "=chat_id")


@admin.register(ChannelJoinRequest)
class ChannelJoinRequestAdmin(InternalAdmin):
    deletable = True  # the user then has to ask to join again
    list_display = ("user_id", "channel_id", "requested_at")
    list_filter = ("channel_id", "requested_at")
    search_fields = ("=user_id", "=channel_id")


@admin.register(DailyStat)
class DailyStatAdmin(FlushCountersFirst, InternalAdmin):
    list_display = ("date", "deliveries", "verifications", "bypasses")
    list_filter = ("date",)
    search_fields = ("date",)
    date_hierarchy = "date"


@admin.register(CounterEntry)
class CounterEntryAdmin(InternalAdmin):
    """Counts not yet added to Daily stats and Stored files (flush_counters adds and removes them
    every minute): read only; a long list here means the flush is not running."""

    list_display = ("day", "deliveries", "verifications", "bypasses", "file_id", "delivered_at")
    list_filter = ("day",)
    search_fields = ("=file_id",)
