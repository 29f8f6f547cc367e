"""Onboarding sequences, their steps, and each user's scheduled step messages."""

from django.contrib import admin
from django.db.models import Count

from botapp.admin.base import InternalAdmin, ModelAdmin, StackedInline
from botapp.admin.compose import ComposedMessageForm, post_preview_html
from botapp.models import (
    Sequence,
    SequenceMessage,
    SequenceStep,
)


class SequenceStepForm(ComposedMessageForm):
    class Meta:
        model = SequenceStep
        fields = (
            "delay_seconds",
            "post_id",
            "text",
            "media_kind",
            "media",
            "buttons",
            "protect_content",
            "condition",
            "condition_button",
        )

    def save(self, commit=True):
        # The channel the post was checked in: a later change of the posts channel leaves this step's post as it was.
        self.instance.post_chat_id = self.post_chat_id if self.instance.post_id else None
        return super().save(commit)


class SequenceStepInline(StackedInline):
    model = SequenceStep
    form = SequenceStepForm
    extra = 1


@admin.register(Sequence)
class SequenceAdmin(ModelAdmin):
    list_display = ("name", "enabled", "start_payload", "step_count", "created_at")
    list_filter = ("enabled",)
    search_fields = ("name", "start_payload")
    readonly_fields = ("created_at",)  # when the operator made it: not theirs to type
    inlines = [SequenceStepInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_steps=Count("steps"))

    @admin.display(description="steps", ordering="n_steps")
    def step_count(self, obj):
        return obj.n_steps


@admin.register(SequenceStep)
class SequenceStepAdmin(ModelAdmin):
    form = SequenceStepForm
    list_display = ("sequence", "delay", "short_text", "condition", "condition_button")
    list_filter = ("sequence", "condition")
    search_fields = ("text", "sequence__name", "condition_button")
    list_select_related = ("sequence",)
    fields = ("sequence", *SequenceStepForm.Meta.fields, "post_preview")
    readonly_fields = ("post_preview",)

    @admin.display(description="post preview")
    def post_preview(self, obj):
        return post_preview_html(chat_id=obj.post_chat_id if obj else None, message_id=obj.post_id if obj else None)

    @admin.display(description="after", ordering="delay_seconds")
    def delay(self, obj):
        return obj.delay_text

    @admin.display(description="text")
    def short_text(self, obj):
        return f"post {obj.post_id}" if obj.post_id else obj.text[:60]


@admin.register(SequenceMessage)
class SequenceMessageAdmin(InternalAdmin):
    list_display = ("step", "user", "due_at", "status", "sent_at", "error")
    list_filter = ("status", "step__sequence", "due_at")
    search_fields = ("=user__telegram_id", "user__username", "step__sequence__name")
    list_select_related = ("step__sequence", "user")
    raw_id_fields = ("user", "step")
    # Who and what first; the send's own fields (from OutgoingSend) after.
    fields = ("user", "step", "chat_id", "due_at", "status", "lease_until", "message_id", "sent_at", "error")
