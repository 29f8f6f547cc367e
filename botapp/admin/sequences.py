"""Onboarding sequences, their steps, and each user's scheduled step messages."""

import json

from django.contrib import admin
from django.db.models import Count
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from unfold.forms import PaginationInlineFormSet

from botapp.admin.base import InternalAdmin, ModelAdmin, StackedInline
from botapp.admin.compose import ComposedMessageForm, message_preview_html, post_preview_html
from botapp.models import (
    Sequence,
    SequenceMessage,
    SequenceStep,
)
from botapp.models.buttons import KEY_RE
from botapp.services.campaign_stats import campaign_stats
from botapp.services.click_keys import click_key_recorded

# The bars of a sequence's statistics, one series per outcome (unfold's chart component, Chart.js).
STATS_SERIES = (("sent", "#16a34a"), ("skipped", "#a3a3a3"), ("failed", "#dc2626"), ("pending", "#0ea5e9"))
STATS_CHART_OPTIONS = {
    "maintainAspectRatio": False,
    "plugins": {"legend": {"display": True, "position": "top", "align": "end"}},
    "scales": {
        "x": {"stacked": True, "grid": {"display": False}},
        "y": {"stacked": True, "beginAtZero": True, "ticks": {"precision": 0}},
    },
}


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

    check_condition_key = True  # the inline's formset checks its steps together (a key may be on a sibling step)

    def clean(self):
        data = super().clean()
        if self.check_condition_key:
            condition_key_check(self, button_texts=[data.get("buttons") or ""])
        return data

    def save(self, commit=True):
        # The channel the post was checked in: a later change of the posts channel leaves this step's post as it was.
        self.instance.post_chat_id = self.post_chat_id if self.instance.post_id else None
        return super().save(commit)


def condition_key_check(form, *, button_texts) -> None:
    """A form error on the step's condition when no button records its key: such a condition
    never holds (nobody can click it), so the step would never be skipped."""
    data = getattr(form, "cleaned_data", {})
    key, condition = data.get("condition_button"), data.get("condition")
    if not key or condition == SequenceStep.Condition.ALWAYS or "condition_button" in form.errors:
        return
    if not KEY_RE.match(key):
        return  # not a key at all: the step's own check says how one is written
    if not click_key_recorded(key=key, button_texts=button_texts):
        form.add_error(
            "condition_button",
            f"No button records clicks on “{key}”, so this condition could never skip anyone. Use the key of a "
            f"tracked link (“Text | https://… | {key}”) or of a tap button (“Text | tap:{key}”) of a step, a "
            "broadcast or the welcome.",
        )


class SequenceStepInlineForm(SequenceStepForm):
    check_condition_key = False


class SequenceStepFormSet(PaginationInlineFormSet):
    def clean(self):
        super().clean()
        steps = [f for f in self.forms if getattr(f, "cleaned_data", None) and not f.cleaned_data.get("DELETE")]
        texts = [f.cleaned_data.get("buttons") or "" for f in steps]
        for form in steps:
            condition_key_check(form, button_texts=texts)


class SequenceStepInline(StackedInline):
    model = SequenceStep
    form = SequenceStepInlineForm
    formset = SequenceStepFormSet
    extra = 1


@admin.register(Sequence)
class SequenceAdmin(ModelAdmin):
    list_display = ("name", "enabled", "start_payload", "step_count", "created_at")
    list_filter = ("enabled",)
    search_fields = ("name", "start_payload")
    readonly_fields = ("created_at", "statistics")  # when the operator made it: not theirs to type
    inlines = [SequenceStepInline]

    def get_fields(self, request, obj=None):
        fields = [f for f in super().get_fields(request, obj) if f != "statistics"]
        return [*fields, "statistics"] if obj is not None else fields

    @admin.display(description="statistics")
    def statistics(self, obj):
        """Per step sent / skipped / failed / pending (a table and stacked bars), per button the
        users who clicked it, per campaign payload the users and how many finished."""
        [stats] = campaign_stats(sequence_ids=[obj.pk])
        chart = {
            "labels": [f"after {st.step.delay_text}" for st in stats.steps],
            "datasets": [
                {"label": name, "data": [getattr(st, name) for st in stats.steps], "backgroundColor": color}
                for name, color in STATS_SERIES
            ],
        }
        return render_to_string(
            "admin/botapp/sequence_stats.html",
            {"stats": stats, "chart": json.dumps(chart), "chart_options": json.dumps(STATS_CHART_OPTIONS)},
        )

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
    fields = ("sequence", *SequenceStepForm.Meta.fields, "preview")
    readonly_fields = ("preview",)

    @admin.display(description="preview")
    def preview(self, obj):
        """What users get at this step: the post of the posts channel, or the composed message."""
        if obj is None or not obj.pk:
            return "Save to see a preview."
        if obj.post_id:
            return mark_safe(post_preview_html(chat_id=obj.post_chat_id, message_id=obj.post_id))  # noqa: S308 - a template, autoescaped
        return mark_safe(message_preview_html(message=obj))  # noqa: S308 - a template, autoescaped

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
