"""The operator console. Thin: lists, filters and forms; writes go through services."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from botapp import clock
from botapp.config import storage_channel_load
from botapp.models import (
    BotSettings,
    Broadcast,
    BroadcastDelivery,
    ButtonClick,
    ChannelJoinRequest,
    DailyStat,
    DailyTokenCount,
    ForceSubChannel,
    PendingBatch,
    PendingDeletion,
    Sequence,
    SequenceMessage,
    SequenceStep,
    StoredFile,
    TelegramUser,
    VerificationToken,
)
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from botapp.services.files import MAX_BATCH, bot_username_cached, deep_link
from botapp.services.outgoing import buttons_parse

admin.site.site_header = "Courier"
admin.site.site_title = "Courier"
admin.site.index_title = "Operator console"


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
    )
    list_filter = ("state", "language_code", "joined_at")
    search_fields = ("=telegram_id", "username", "first_name", "last_name", "start_payload")
    date_hierarchy = "joined_at"
    readonly_fields = ("telegram_id", "joined_at", "last_seen_at")
    list_per_page = 100


class MessageIdsField(forms.CharField):
    """Storage-channel message ids as an operator types them: "12", "12, 15" or "10-20"."""

    def prepare_value(self, value):
        if isinstance(value, list):
            return ", ".join(str(i) for i in value)
        return value

    def to_python(self, value):
        text = (super().to_python(value) or "").strip()
        if text.startswith("["):  # the JSON form, as stored
            text = text.strip("[]")
        ids: list[int] = []
        for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
            first, sep, last = part.partition("-")
            try:
                start, end = int(first), int(last) if sep else int(first)
            except ValueError:
                raise forms.ValidationError(f"{part!r} is not a message id or a range like 10-20.") from None
            if start <= 0 or end < start:
                raise forms.ValidationError(f"{part!r}: ids are positive and ranges go upwards.")
            ids.extend(range(start, end + 1))
        if not ids:
            raise forms.ValidationError("Give at least one message id.")
        if len(ids) > MAX_BATCH:
            raise forms.ValidationError(f"A link holds at most {MAX_BATCH} messages (got {len(ids)}).")
        return ids


class StoredFileForm(forms.ModelForm):
    message_ids = MessageIdsField(help_text='Message ids in the storage channel: "12", "12, 15" or a range "10-20".')

    class Meta:
        model = StoredFile
        fields = ("title", "source_chat_id", "message_ids", "protect_content")


@admin.register(StoredFile)
class StoredFileAdmin(admin.ModelAdmin):
    form = StoredFileForm
    list_display = (
        "share_id",
        "title",
        "message_count",
        "delivery_count",
        "last_delivered_at",
        "protect_content",
        "link",
        "created_at",
    )
    list_filter = ("protect_content", "created_at")
    search_fields = ("=share_id", "title")
    readonly_fields = ("share_id", "delivery_count", "last_delivered_at", "created_at", "created_by", "link")
    fields = (
        "title",
        "source_chat_id",
        "message_ids",
        "protect_content",
        "share_id",
        "link",
        "delivery_count",
        "last_delivered_at",
        "created_by",
        "created_at",
    )

    def get_changeform_initial_data(self, request):
        return {"source_chat_id": storage_channel_load(), **super().get_changeform_initial_data(request)}

    @admin.display(description="messages")
    def message_count(self, obj):
        return len(obj.message_ids or [])

    @admin.display(description="deep link")
    def link(self, obj):
        if not obj.pk:
            return "—"
        username = bot_username_cached()
        if not username:
            return f"start={obj.share_id} (bot username known once runbot has started)"
        url = deep_link(bot_username=username, payload=obj.share_id)
        return format_html('<a href="{}" target="_blank" rel="noopener">{}</a>', url, url)


@admin.register(VerificationToken)
class VerificationTokenAdmin(admin.ModelAdmin):
    list_display = ("short_token", "user", "status", "share_id", "created_at", "expires_at", "used_at")
    list_filter = ("status", "created_at")
    search_fields = ("=user__telegram_id", "user__username", "token")
    list_select_related = ("user",)
    raw_id_fields = ("user",)

    @admin.display(description="token")
    def short_token(self, obj):
        return f"{obj.token[:10]}…"


@admin.register(DailyTokenCount)
class DailyTokenCountAdmin(admin.ModelAdmin):
    list_display = ("user", "date", "count")
    list_filter = ("date",)
    search_fields = ("=user__telegram_id", "user__username")
    list_select_related = ("user",)
    raw_id_fields = ("user",)


@admin.register(PendingDeletion)
class PendingDeletionAdmin(admin.ModelAdmin):
    list_display = ("chat_id", "message_count", "delete_at", "status", "share_id", "created_at")
    list_filter = ("status", "delete_at")
    search_fields = ("=chat_id", "=share_id")

    @admin.display(description="messages")
    def message_count(self, obj):
        return len(obj.message_ids or [])


class BroadcastForm(forms.ModelForm):
    class Meta:
        model = Broadcast
        fields = ("title", "text", "media_kind", "media", "buttons", "protect_content", "delete_after_minutes", "scheduled_at")

    def clean_buttons(self):
        buttons_parse(self.cleaned_data["buttons"])  # raises a form error naming the line
        return self.cleaned_data["buttons"]

    def clean(self):
        data = super().clean()
        if bool(data.get("media_kind")) != bool(data.get("media", "").strip()):
            raise forms.ValidationError("Choose a media kind and give its file id or URL, or neither.")
        if data.get("media_kind") and len(data.get("text", "")) > 1024:
            self.add_error("text", "A caption is at most 1024 characters (Telegram's limit with media).")
        if not data.get("media_kind") and len(data.get("text", "")) > 4096:
            self.add_error("text", "A message is at most 4096 characters (Telegram's limit).")
        when = data.get("scheduled_at")
        if when and "scheduled_at" in self.changed_data and when < clock.now():
            self.add_error("scheduled_at", "This time is in the past. Leave it empty to send when you start it.")
        return data


@admin.register(Broadcast)
class BroadcastAdmin(admin.ModelAdmin):
    form = BroadcastForm
    list_display = (
        "title",
        "status",
        "progress",
        "sent",
        "blocked",
        "failed",
        "media_kind",
        "delete_after_minutes",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "media_kind", "created_at")
    search_fields = ("title", "text")
    readonly_fields = ("preview", "status", "total", "sent", "failed", "blocked", "created_at", "started_at", "finished_at")
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
        done = obj.sent + obj.failed + obj.blocked
        return f"{done}/{obj.total} ({100 * done // obj.total}%)"

    @admin.display(description="preview")
    def preview(self, obj):
        if obj is None or not obj.pk:
            return "Save to see a preview."
        try:
            rows = buttons_parse(obj.buttons)
        except ValidationError as exc:
            rows, error = [], exc.messages[0]
        else:
            error = ""
        return render_to_string("admin/botapp/broadcast_preview.html", {"b": obj, "rows": rows, "error": error})

    @admin.action(description="Send a test to the admins (ADMIN_IDS)")
    def send_test(self, request, queryset):
        from botapp.config import admin_ids_load
        from scheduler.tasks import send_broadcast_test

        admins = admin_ids_load()
        if not admins:
            self.message_user(request, "Set ADMIN_IDS to receive tests.", messages.ERROR)
            return

        def queue(b):
            send_broadcast_test.apply_async(args=[b.pk], retry=False)
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
class BroadcastDeliveryAdmin(admin.ModelAdmin):
    list_display = ("broadcast", "user", "status", "message_id", "sent_at", "delete_at", "error")
    list_filter = ("status", "broadcast")
    search_fields = ("=user__telegram_id", "user__username", "broadcast__title")
    list_select_related = ("broadcast", "user")
    raw_id_fields = ("user", "broadcast")


@admin.register(ButtonClick)
class ButtonClickAdmin(admin.ModelAdmin):
    list_display = ("user", "button", "clicked_at")
    list_filter = ("button", "clicked_at")
    search_fields = ("=user__telegram_id", "user__username", "button")
    list_select_related = ("user",)
    raw_id_fields = ("user",)


@admin.register(BotSettings)
class BotSettingsAdmin(admin.ModelAdmin):
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


@admin.register(ForceSubChannel)
class ForceSubChannelAdmin(admin.ModelAdmin):
    list_display = ("title", "chat_id", "invite_link", "join_request", "enabled", "position")
    list_editable = ("enabled", "position")
    list_filter = ("enabled", "join_request")
    search_fields = ("title", "=chat_id")


@admin.register(ChannelJoinRequest)
class ChannelJoinRequestAdmin(admin.ModelAdmin):
    list_display = ("user_id", "channel_id", "requested_at")
    list_filter = ("channel_id", "requested_at")
    search_fields = ("=user_id", "=channel_id")


@admin.register(DailyStat)
class DailyStatAdmin(admin.ModelAdmin):
    list_display = ("date", "deliveries", "verifications", "bypasses")
    list_filter = ("date",)
    search_fields = ("date",)
    date_hierarchy = "date"


@admin.register(PendingBatch)
class PendingBatchAdmin(admin.ModelAdmin):
    list_display = ("admin_id", "first_message_id", "started_at")
    list_filter = ("started_at",)
    search_fields = ("=admin_id",)


class SequenceStepForm(forms.ModelForm):
    class Meta:
        model = SequenceStep
        fields = ("delay_minutes", "text", "media_kind", "media", "buttons", "protect_content", "condition", "condition_button")

    def clean_buttons(self):
        buttons_parse(self.cleaned_data["buttons"])
        return self.cleaned_data["buttons"]


class SequenceStepInline(admin.StackedInline):
    model = SequenceStep
    form = SequenceStepForm
    extra = 1


@admin.register(Sequence)
class SequenceAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled", "start_payload", "step_count", "created_at")
    list_filter = ("enabled",)
    search_fields = ("name", "start_payload")
    inlines = [SequenceStepInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_steps=Count("steps"))

    @admin.display(description="steps", ordering="n_steps")
    def step_count(self, obj):
        return obj.n_steps


@admin.register(SequenceStep)
class SequenceStepAdmin(admin.ModelAdmin):
    form = SequenceStepForm
    list_display = ("sequence", "delay_minutes", "short_text", "condition", "condition_button")
    list_filter = ("sequence", "condition")
    search_fields = ("text", "sequence__name", "condition_button")
    list_select_related = ("sequence",)
    fields = ("sequence", *SequenceStepForm.Meta.fields)

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:60]


@admin.register(SequenceMessage)
class SequenceMessageAdmin(admin.ModelAdmin):
    list_display = ("step", "user", "due_at", "status", "sent_at", "error")
    list_filter = ("status", "step__sequence", "due_at")
    search_fields = ("=user__telegram_id", "user__username", "step__sequence__name")
    list_select_related = ("step__sequence", "user")
    raw_id_fields = ("user", "step")
