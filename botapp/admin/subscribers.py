"""Subscribers and their messages, as a moved-in scheduled-message system's clients know them
(shared/seeds/003; api/compat/): read-only, since the clients and the import write them."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from botapp.admin.base import InternalAdmin
from botapp.models.subscribers import Subscriber, SubscriberMessage


@admin.register(Subscriber)
class SubscriberAdmin(InternalAdmin):
    list_display = ("subscriber_id", "chat_name", "user_link", "created_at")
    list_filter = ("created_at",)
    search_fields = ("subscriber_id", "chat_name", "user__telegram_id", "user__username")
    list_select_related = ("user",)
    date_hierarchy = "created_at"

    @admin.display(description="Telegram user", ordering="user__telegram_id")
    def user_link(self, obj):
        url = reverse("admin:botapp_telegramuser_change", args=[obj.user_id])
        return format_html('<a href="{}">{}</a>', url, obj.user)


@admin.register(SubscriberMessage)
class SubscriberMessageAdmin(InternalAdmin):
    list_display = ("message_id", "scheduled_for", "recipients", "broadcast_link", "created_at")
    list_filter = ("scheduled_for", "broadcast__status")
    search_fields = ("message_id",)
    list_select_related = ("broadcast",)
    date_hierarchy = "scheduled_for"

    @admin.display(description="recipients")
    def recipients(self, obj):
        return len(obj.target_ids)

    @admin.display(description="scheduled message", ordering="broadcast_id")
    def broadcast_link(self, obj):
        url = reverse("admin:botapp_broadcast_change", args=[obj.broadcast_id])
        return format_html('<a href="{}">{}</a>', url, obj.broadcast)
