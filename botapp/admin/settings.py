"""Bot settings: one row, opened directly."""

from django import forms
from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse

from botapp.models import (
    BotSettings,
)


class BotSettingsForm(forms.ModelForm):
    class Meta:  # the admin's fieldsets choose the fields
        model = BotSettings

    def clean_channel_post_button(self):
        from botapp.services.outgoing import buttons_parse

        text = self.cleaned_data["channel_post_button"].strip()
        rows = buttons_parse(text=text)  # a form error naming what is wrong
        if len(rows) > 1 or any(len(row) > 1 for row in rows):
            raise forms.ValidationError('One button: "Text | https://example.com".')
        return text

    def clean_channel_post_marker(self):
        marker = self.cleaned_data["channel_post_marker"].strip()
        if not marker or any(ch.isspace() for ch in marker):
            raise forms.ValidationError("The marker is one word a post starts with, e.g. /chat.")
        return marker


@admin.register(BotSettings)
class BotSettingsAdmin(admin.ModelAdmin):
    """One row: the list page opens it directly."""

    form = BotSettingsForm

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
        (
            "Premium users",
            {"fields": ("premium_skips_force_subscribe", "premium_text", "premium_button_text", "premium_button_url")},
        ),
        ("Channel-post broadcasts (BROADCAST_CHANNEL_ID)", {"fields": ("channel_post_marker", "channel_post_button")}),
    )
    readonly_fields = ("bot_username",)

    def changelist_view(self, request, extra_context=None):
        obj = BotSettings.load()
        return HttpResponseRedirect(reverse("admin:botapp_botsettings_change", args=[obj.pk]))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
