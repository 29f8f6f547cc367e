"""Telegram users and their button clicks."""

from django.contrib import admin

from botapp.models import (
    ButtonClick,
    TelegramUser,
)


@admin.register(TelegramUser)
class TelegramUserAdmin(admin.ModelAdmin):
    list_display = (
        "telegram_id",
        "username",
        "first_name",
        "state",
        "start_payload",
        "joined_at",
        "last_seen_at",
        "verified_until",
        "premium_until",
        "admin_banned",
    )
    list_filter = ("state", "admin_banned", "language_code", "joined_at")
    search_fields = ("=telegram_id", "username", "first_name", "last_name", "start_payload")
    date_hierarchy = "joined_at"
    readonly_fields = ("telegram_id", "joined_at", "last_seen_at")
    list_per_page = 100


@admin.register(ButtonClick)
class ButtonClickAdmin(admin.ModelAdmin):
    list_display = ("user", "button", "count", "clicked_at", "last_clicked_at")
    list_filter = ("button", "clicked_at")
    search_fields = ("=user__telegram_id", "user__username", "button")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
