"""Bot settings: one row, opened directly, in sections with a table of contents. Texts are checked before they reach users: only the
placeholders the bot fills, well-formed braces, and Telegram HTML that Telegram accepts. The
shortener key is never shown again once saved."""

from django.contrib import admin
from django.db import models
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from unfold.widgets import UnfoldAdminTextareaWidget

from botapp.admin.base import ModelAdmin
from botapp.admin.settings_form import BotSettingsForm
from botapp.models import (
    BotSettings,
)

# The page's sections, in order: (anchor, title, what it is about, fields). The table of contents at
# the top links each by its anchor (/botapp/botsettings/1/change/#texts), so a section can be linked to.
SECTIONS = (
    (
        "delivery",
        "Delivery",
        "How stored files reach users: how long they stay, their caption, whether they can be forwarded.",
        ("bot_username", "auto_delete_minutes", "file_caption", "protect_content", "backup_channel_id"),
    ),
    (
        "verification",
        "Token verification",
        "Users prove they are human through a shortlink token before they get files.",
        (
            "verification_enabled",
            "verification_hours",
            "token_ttl_minutes",
            "daily_token_limit",
            "bypass_seconds",
            "shortener_api_url",
            "shortener_api_key",
            "how_to_verify_url",
        ),
    ),
    (
        "verification-steps",
        "Verification in steps and its log",
        "A second and third verification after set gaps, each with its own shortener; the channel that logs them.",
        (
            "verify_second_gap_hours",
            "verify_second_shortener_url",
            "verify_second_shortener_key",
            "verify_third_gap_hours",
            "verify_third_shortener_url",
            "verify_third_shortener_key",
            "verification_log_channel_id",
        ),
    ),
    (
        "referrals",
        "Referrals and redeem codes",
        "Premium time for users who bring new users, and the codes admins hand out for it.",
        (
            "referrals_needed",
            "referral_premium_hours",
            "referral_hold_count",
            "referral_hold_minutes",
            "redeem_code_days",
            "redeem_max_failures",
            "redeem_cooloff_minutes",
        ),
    ),
    (
        "texts",
        "Texts",
        "What the bot says: the welcome, /help, /about, /faq and its notices.",
        (
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
        ),
    ),
    (
        "fair-use",
        "Fair use (per user; admins are never limited)",
        "What one user can make the bot do in a minute or a day, and their share of Telegram's 30 messages a second.",
        (
            "fair_use_enabled",
            "fair_use_commands_per_minute",
            "fair_use_deliveries_per_minute",
            "fair_use_deliveries_per_day",
            "fair_use_share_percent",
            "fair_use_strikes",
        ),
    ),
    (
        "owner-only",
        "Owner-only mode (the allow-list: Allowed users)",
        "The bot answers only the users on the allow-list; everyone else gets this text.",
        ("allow_list_enabled", "allow_list_text"),
    ),
    ("links", "Links", "Links of another bot or channel that this bot answers too.", ("channel_post_links", "legacy_channel_id")),
    (
        "streams",
        "Stream and download links",
        "Buttons to play or download delivered files in a browser.",
        ("stream_links", "stream_lifetime_hours"),
    ),
    ("posts", "Prepared posts", "The channel whose posts broadcasts and sequence steps can send.", ("posts_channel_id",)),
    (
        "premium",
        "Premium users",
        "What premium users get, and the message that offers it.",
        ("premium_skips_force_subscribe", "premium_text", "premium_button_text", "premium_button_url"),
    ),
    (
        "send-window",
        "Send window and opt-out",
        "When sequence steps and broadcasts may reach users, and the button that stops them.",
        ("send_window_start", "send_window_end", "send_window_tz", "optout_enabled", "optout_label"),
    ),
    (
        "channel-posts",
        "Channel-post broadcasts (BROADCAST_CHANNEL_ID)",
        "Posts of the broadcast channel that start with the marker go to every active user.",
        ("channel_post_marker", "channel_post_button"),
    ),
)


@admin.register(BotSettings)
class BotSettingsAdmin(ModelAdmin):
    """One row: the list page opens it directly."""

    form = BotSettingsForm
    formfield_overrides = {models.TextField: {"widget": UnfoldAdminTextareaWidget(attrs={"rows": 3})}}
    fieldsets = tuple(
        (title, {"fields": fields, "description": format_html('<span id="{}" class="settings-anchor"></span>{}', anchor, about)})
        for anchor, title, about, fields in SECTIONS
    )
    readonly_fields = ("bot_username",)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        sections = [(anchor, title) for anchor, title, _, _ in SECTIONS]
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "sections": sections})

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
