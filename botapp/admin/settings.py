"""Bot settings: one row, opened directly."""

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse

from botapp.admin.base import ModelAdmin
from botapp.models import (
    BotSettings,
)


@admin.register(BotSettings)
class BotSettingsAdmin(ModelAdmin):
    """One row: the list page opens it directly."""

    fieldsets = (
        ("Delivery", {"fields": ("bot_username", "auto_delete_minutes", "file_caption", "protect_content")}),
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
        ("Texts", {"fields": ("welcome_text", "help_text", "about_text", "faq_text", "deleted_notice_text")}),
    )
    readonly_fields = ("bot_username",)

    def changelist_view(self, request, extra_context=None):
        obj = BotSettings.load()
        return HttpResponseRedirect(reverse("admin:botapp_botsettings_change", args=[obj.pk]))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
