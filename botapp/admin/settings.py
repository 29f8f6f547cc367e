"""Bot settings: one row, opened directly. Texts are checked before they reach users: only the
placeholders the bot fills, well-formed braces, and Telegram HTML that Telegram accepts. The
shortener key is never shown again once saved."""

import string

from django import forms
from django.contrib import admin
from django.db import models
from django.http import HttpResponseRedirect
from django.urls import reverse
from unfold.widgets import UnfoldAdminTextareaWidget

from botapp.admin.base import ModelAdmin
from botapp.models import (
    BotSettings,
)
from botapp.services.telegram_html import telegram_html_check

# The placeholders text_render fills for the user who wrote (botapp/services/texts.py).
USER_PLACEHOLDERS = ("first_name", "last_name", "username", "mention")
# Texts sent to one user, with those placeholders; the rest are sent as written.
PERSONAL_TEXTS = ("welcome_text", "help_text", "about_text", "faq_text")
PLAIN_TEXTS = ("deleted_notice_text", "file_caption")
PLACEHOLDER_HINT = "Placeholders: {first_name}, {last_name}, {username}, {mention} (a link to the user). Telegram HTML allowed."


def placeholder_problems(text: str, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with the {placeholders} of `text` (each problem once)."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        return [f"Braces do not match ({exc}); write {{{{ and }}}} for a literal brace."]
    problems = []
    for name in dict.fromkeys(names):
        if name not in allowed:
            known = ", ".join(f"{{{a}}}" for a in allowed) if allowed else "none here: this text is sent as written"
            problems.append(f"{{{name}}} is not a placeholder the bot fills (it fills {known}).")
    return problems


class BotSettingsForm(forms.ModelForm):
    shortener_api_key = forms.CharField(
        label="Shortener API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Never shown once saved. Leave empty to keep the current key; type a single - to remove it.",
    )

    class Meta:
        model = BotSettings
        fields = ("shortener_api_key",)  # the admin adds the fieldsets' fields

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in PERSONAL_TEXTS:
            if name in self.fields:
                self.fields[name].help_text = PLACEHOLDER_HINT
        if self.instance.shortener_api_key and "shortener_api_key" in self.fields:
            self.fields["shortener_api_key"].widget.attrs["placeholder"] = "•••••••• (set)"

    def clean_shortener_api_key(self):
        typed = self.cleaned_data.get("shortener_api_key", "").strip()
        if typed == "-":
            return ""
        return typed or self.instance.shortener_api_key

    def clean(self):
        data = super().clean()
        for name in (*PERSONAL_TEXTS, *PLAIN_TEXTS):
            if name not in self.fields or not data.get(name):
                continue
            allowed = USER_PLACEHOLDERS if name in PERSONAL_TEXTS else ()
            # The caption and the notice are sent as written: braces there are plain text.
            problems = placeholder_problems(data[name], allowed) if name in PERSONAL_TEXTS else []
            problems += telegram_html_check(text=data[name])
            for problem in problems:
                self.add_error(name, problem)
        return data


@admin.register(BotSettings)
class BotSettingsAdmin(ModelAdmin):
    """One row: the list page opens it directly."""

    form = BotSettingsForm
    formfield_overrides = {models.TextField: {"widget": UnfoldAdminTextareaWidget(attrs={"rows": 3})}}
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

    def response_change(self, request, obj):
        self.message_user(request, "Bot settings saved; the bot uses them from its next message.")
        return HttpResponseRedirect(request.path)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
