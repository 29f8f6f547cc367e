"""Broadcasts: compose, preview, test, start, cancel; and their per-user deliveries."""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from django.utils import timezone

from botapp import clock
from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.admin.compose import ComposedMessageForm
from botapp.models import (
    Broadcast,
    BroadcastDelivery,
)
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from botapp.services.outgoing import buttons_parse
from botapp.signals import broadcast_test_requested


class BroadcastForm(ComposedMessageForm):
    class Meta:
        model = Broadcast
        fields = ("title", "text", "media_kind", "media", "buttons", "protect_content", "delete_after_minutes", "scheduled_at")

    def clean(self):
        data = super().clean()
        when = data.get("scheduled_at")
        if when and "scheduled_at" in self.changed_data and when < clock.now():
            self.add_error("scheduled_at", "This time is in the past. Leave it empty to send when you start it.")
        return data


@admin.register(Broadcast)
class BroadcastAdmin(ModelAdmin):
    form = BroadcastForm
    list_display = (
        "title",
        "status",
        "progress",
        "sent",
        "blocked",
        "failed",
        "interrupted",
        "scheduled_at",
        "delete_after_minutes",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "media_kind", "created_at")
    search_fields = ("title", "text")
    readonly_fields = (
        "preview",
        "status",
        "total",
        "sent",
        "failed",
        "blocked",
        "skipped",
        "interrupted",
        "created_at",
        "started_at",
        "finished_at",
    )
    actions = ("send_test", "start_sending", "cancel_sending")

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status != Broadcast.Status.DRAFT:
            # What users already received cannot be edited any more.
            return [f for f in BroadcastForm.Meta.fields] + list(self.readonly_fields)
        return self.readonly_fields

    @admin.display(description="progress")
    def progress(self, obj):
        if not obj.total:
            return "—"
        done = obj.sent + obj.failed + obj.blocked + obj.skipped + obj.interrupted
        return f"{done}/{obj.total} ({100 * done // obj.total}%)"

    @admin.display(description="preview")
    def preview(self, obj):
        if obj is None or not obj.pk:
            return "Save to see a preview."
        try:
            rows = buttons_parse(text=obj.buttons)
        except ValidationError as exc:
            rows, error = [], exc.messages[0]
        else:
            error = ""
        return render_to_string("admin/botapp/broadcast_preview.html", {"b": obj, "rows": rows, "error": error})

    @admin.action(description="Send a test to the admins (ADMIN_IDS)")
    def send_test(self, request, queryset):
        from botapp.config import admin_ids_load

        admins = admin_ids_load()
        if not admins:
            self.message_user(request, "Set ADMIN_IDS to receive tests.", messages.ERROR)
            return

        def queue(b):
            # A worker sends it (it holds a Telegram session): the scheduler queues it on this signal.
            if not broadcast_test_requested.send(sender=Broadcast, broadcast_id=b.pk):
                raise RuntimeError("no background worker app is installed to send it")
            return f"a test is on its way to {len(admins)} admin(s)."

        try:
            self._each(request, queryset, queue, messages.SUCCESS)
        except Exception as exc:  # the broker is down
            self.message_user(request, f"Could not queue the test: the task queue is unreachable ({exc}).", messages.ERROR)

    @admin.action(description="Start sending the selected drafts to every active user (now, or at their scheduled time)")
    def start_sending(self, request, queryset):
        def start(b):
            total = broadcast_start(broadcast=b)
            if b.status == Broadcast.Status.SCHEDULED:
                return f"scheduled for {timezone.localtime(b.scheduled_at):%Y-%m-%d %H:%M %Z}."
            return f"queued for {total} active users."

        self._each(request, queryset, start, messages.SUCCESS)

    @admin.action(description="Cancel sending")
    def cancel_sending(self, request, queryset):
        self._each(
            request, queryset, lambda b: f"cancelled; {broadcast_cancel(broadcast=b)} users will not get it.", messages.WARNING
        )

    def _each(self, request, queryset, act, level):
        """Apply a service to each selected broadcast; its refusals become messages, not errors."""
        for broadcast in queryset:
            try:
                done = act(broadcast)
            except ValidationError as exc:
                self.message_user(request, f"{broadcast}: {exc.messages[0]}", messages.ERROR)
            else:
                self.message_user(request, f"{broadcast}: {done}", level)


@admin.register(BroadcastDelivery)
class BroadcastDeliveryAdmin(InternalAdmin):
    list_display = ("broadcast", "user", "status", "message_id", "sent_at", "delete_at", "error")
    list_filter = ("status", "broadcast")
    search_fields = ("=user__telegram_id", "user__username", "broadcast__title")
    list_select_related = ("broadcast", "user")
    raw_id_fields = ("user", "broadcast")
    # Who and what first; the send's own fields (from OutgoingSend) after.
    fields = ("broadcast", "user", "chat_id", "status", "message_id", "lease_until", "sent_at", "delete_at", "error")
