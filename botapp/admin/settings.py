"""Bot settings: one row, opened directly. Texts are checked before they reach users: only the
placeholders the bot fills, well-formed braces, and Telegram HTML that Telegram accepts. The
shortener key is never shown again once saved."""

from django.contrib import admin
from django.db import models
from django.http import HttpResponseRedirect
from django.urls import reverse
from unfold.widgets import UnfoldAdminTextareaWidget

from botapp.admin.base import ModelAdmin
from botapp.admin.settings_form import BotSettingsForm
from botapp.models import (
    BotSettings,
)


@admin.register(BotSettings)
class BotSettingsAdmin(ModelAdmin):
    """One row: the list page opens it directly."""

    form = BotSettingsForm
    formfield_overrides = {models.TextField: {"widget": UnfoldAdminTextareaWidget(attrs={"rows": 3})}}
    fieldsets = (
        (
            "Delivery",
            {"fields": ("bot_username", "auto_delete_minutes", "file_caption", "protect_content", "backup_channel_id")},
        ),
        (
            "Token verification",
            {
                "fields": (
                    "verification_enabled",
                    "verification_hours",
                    "token_ttl_minutes",
                    "daily_token_limit",
                    "bypass_seconds",
                    "shortener_api_url",
                    "shortener_api_key",
                    "how_to_verify_url",
                )
            },
        ),
        (
            "Texts",
            {
                "fields": (
                    "welcome_text",
                    "welcome_buttons",
                    "welcome_post_id",
                    "welcome_back_text",
                    "help_text",
                    "about_text",
                    "faq_text",
                    "channel_url",
                    "channel_button_text",
                    "deleted_notice_text",
                    "again_button_text",
                    "retired_commands",
                )
            },
        ),
        (
            "Fair use (per user; admins are never limited)",
            {
                "fields": (
                    "fair_use_enabled",
                    "fair_use_commands_per_minute",
                    "fair_use_deliveries_per_minute",
                    "fair_use_deliveries_per_day",
                    "fair_use_share_percent",
                    "fair_use_strikes",
                )
            },
        ),
        ("Owner-only mode (the allow-list: Allowed users)", {"fields": ("allow_list_enabled", "allow_list_text")}),
        ("Links", {"fields": ("channel_post_links", "legacy_channel_id")}),
        ("Stream and download links", {"fields": ("stream_links", "stream_lifetime_hours")}),
        ("Prepared posts", {"fields": ("posts_channel_id",)}),
        (
            "Premium users",
            {"fields": ("premium_skips_force_subscribe", "premium_text", "premium_button_text", "premium_button_url")},
        ),
        (
            "Send window and opt-out (sequence steps and broadcasts)",
            {"fields": ("send_window_start", "send_window_end", "send_window_tz", "optout_enabled", "optout_label")},
        ),
        ("Channel-post broadcasts (BROADCAST_CHANNEL_ID)", {"fields": ("channel_post_marker", "channel_post_button")}),
    )
    readonly_fields = ("bot_username",)

    def changelist_view(self, request, extra_context=None):
        obj = BotSettings.load()
        return HttpResponseRedirect(reverse("admin:botapp_botsettings_change", args=[obj.pk]))

    def response_change(self, request, obj):
        self.message_user(request, "Bot settings saved; the bot uses them from its next message.")
        return HttpResponseRedirect(request.path)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
