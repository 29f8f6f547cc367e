"""Telegram users and their button clicks."""

from django.contrib import admin

from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.models import (
    ButtonClick,
    TelegramUser,
)

# What Telegram tells us (and runbot keeps up to date): never typed by an operator.
TELEGRAM_FIELDS = ("telegram_id", "username", "first_name", "last_name", "language_code", "start_payload")


@admin.register(TelegramUser)
class TelegramUserAdmin(ModelAdmin):
    """Users arrive by writing to the bot, never by hand: no Add. What Telegram says about them and
    the bot's own bookkeeping are read-only; an operator changes the ban and the verification."""

    list_display = (
        "telegram_id",
        "username",
        "first_name",
        "state",
        "start_payload",
        "joined_at",
        "last_seen_at",
        "verified_until",
    )
    list_filter = ("state", "language_code", "joined_at")
    search_fields = ("=telegram_id", "username", "first_name", "last_name", "start_payload")
    date_hierarchy = "joined_at"
    fields = (
        *TELEGRAM_FIELDS,
        "state",
        "joined_at",
        "last_seen_at",
        "verified_until",
        "verification_count",
        "bypass_count",
        "banned_until",
    )
    readonly_fields = (*TELEGRAM_FIELDS, "state", "joined_at", "last_seen_at", "verification_count", "bypass_count")
    list_per_page = 100

    def has_add_permission(self, request):
        return False


@admin.register(ButtonClick)
class ButtonClickAdmin(InternalAdmin):
    list_display = ("user", "button", "count", "clicked_at", "last_clicked_at")
    list_filter = ("button", "clicked_at")
    search_fields = ("=user__telegram_id", "user__username", "button")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
