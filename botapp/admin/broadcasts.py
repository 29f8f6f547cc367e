"""Broadcasts: compose with a live-checked preview (Save lands on the broadcast's page), then
everything on the broadcast's own page: Send a test (each admin's result shown), Start sending… (a
confirmation that states the audience), Cancel…, Duplicate as draft (botapp/admin/broadcast_actions.py),
and progress that updates by itself, coloured by outcome (botapp/admin/outcome.py). Writes go through
botapp/services/broadcasts.py."""

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.http import HttpResponseRedirect
from django.shortcuts import redirect
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from unfold.decorators import display
from unfold.widgets import UnfoldAdminIntegerFieldWidget, UnfoldAdminTextareaWidget

from botapp import clock
from botapp.admin.base import InternalAdmin, ModelAdmin, readonly_text
from botapp.admin.broadcast_actions import ACTIVE, BroadcastActions
from botapp.admin.broadcast_deletion import BroadcastDeletion
from botapp.admin.compose import ComposedMessageForm, message_preview_html, post_preview_html
from botapp.admin.outcome import broadcast_outcome, outcome_count_html
from botapp.models import (
    Broadcast,
    BroadcastAttachment,
    BroadcastClaim,
    BroadcastDelivery,
)
from botapp.services.broadcasts import (
    broadcast_progress_text,
)
from botapp.services.health import processes_state
from botapp.telegram.limits import MESSAGE_ID_MAX

RECIPIENTS_SHOWN = 20  # listed users' ids on a broadcast's page; the rest counted


class BroadcastForm(ComposedMessageForm):
    class Meta:
        model = Broadcast
        fields = (
            "title",
            "text",
            "media_kind",
            "media",
            "buttons",
            "protect_content",
            "pin",
            "delete_after_minutes",
            "scheduled_at",
        )

    post_id = forms.IntegerField(
        label="Post",
        required=False,
        min_value=1,
        max_value=MESSAGE_ID_MAX,
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="A post of the posts channel (Bot settings), by its message id: sent as a copy, with its media and "
        "formatting, and the buttons below. Leave text and media empty.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        b = self.instance
        if b.pk and b.status != Broadcast.Status.DRAFT:
            del self.fields["post_id"]  # what users received is not edited (the page shows it read-only)
        elif b.pk and b.origin == "admin" and len(b.copy_message_ids or []) == 1:
            self.fields["post_id"].initial = b.copy_message_ids[0]

    def save(self, commit=True):
        b = self.instance
        if "post_id" not in self.fields:
            pass
        elif self.cleaned_data.get("post_id"):
            b.copy_chat_id, b.copy_message_ids = self.post_chat_id, [self.cleaned_data["post_id"]]
        elif b.origin == "admin":  # the operator took the post out: the message is the composed one again
            b.copy_chat_id, b.copy_message_ids = None, []
        return super().save(commit)

    def clean(self):
        data = super().clean()
        when = data.get("scheduled_at")
        if when and "scheduled_at" in self.changed_data and when < clock.now():
            self.add_error("scheduled_at", "This time is in the past. Leave it empty to send when you start it.")
        return data


def progress_of(b: Broadcast) -> dict:
    done = b.sent + b.failed + b.blocked + b.skipped + b.interrupted + b.not_users
    return {"done": done, "percent": 100 * done // b.total if b.total else (100 if b.status == Broadcast.Status.DONE else 0)}


@admin.register(Broadcast)
class BroadcastAdmin(BroadcastActions, BroadcastDeletion, ModelAdmin):
    form = BroadcastForm
    list_display = (
        "title",
        "status",
        "progress",
        "sent_count",
        "failed_count",
        "blocked_count",
        "scheduled_at",
        "delete_after_minutes",
        "created_at",
    )
    list_filter = ("kind", "status", "origin", "pin", "media_kind", "created_at")
    search_fields = ("title", "text")
    fieldsets = (
        ("Message", {"fields": ("title", "post_id", "text", "media_kind", "media", "buttons")}),
        ("Delivery", {"fields": ("protect_content", "pin", "delete_after_minutes", "scheduled_at")}),
    )
    formfield_overrides = {models.TextField: {"widget": UnfoldAdminTextareaWidget(attrs={"rows": 5})}}
    readonly_fields = ("preview", "live", "recipients", "files")
    # A started broadcast shows its text and buttons read-only: with their line breaks (button rows).
    readonly_preprocess_fields = {"text": readonly_text, "buttons": readonly_text}
    actions_detail = ["send_test", "start_sending", "resume_sending", "cancel_sending", "duplicate"]
    actions = None  # everything happens on the broadcast's own page, one broadcast at a time

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return self.fieldsets
        if obj.status != Broadcast.Status.DRAFT:  # no post field to edit (BroadcastForm)
            message, fields = self.fieldsets[0]
            fieldsets = ((message, {"fields": tuple(f for f in fields["fields"] if f != "post_id")}), *self.fieldsets[1:])
            return (
                ("Preview and progress", {"fields": ("preview", "live")}),
                ("Recipients and files", {"fields": ("recipients", "files")}),
                *fieldsets,
            )
        # A saved broadcast leads with what users will see and how far it got, then who gets it
        # and the files a scheduled message carries (the API sets both; the form edits neither).
        return (
            ("Preview and progress", {"fields": ("preview", "live")}),
            ("Recipients and files", {"fields": ("recipients", "files")}),
            *self.fieldsets,
        )

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status != Broadcast.Status.DRAFT:
            # What users already received cannot be edited any more.
            return [*BroadcastForm.Meta.fields, *self.readonly_fields]
        return self.readonly_fields

    def get_urls(self):
        progress = path(
            "<path:object_id>/progress/",
            self.admin_site.admin_view(self.progress_view),
            name="botapp_broadcast_progress",
        )
        return [progress, *super().get_urls()]

    def response_add(self, request, obj, post_url_continue=None):
        """Save on a new broadcast lands on its page: the preview, Send a test and Start are there."""
        if "_addanother" in request.POST or "_popup" in request.POST or "_continue" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request, f"“{obj}” is saved as a draft: check the preview, send a test, then start it.", messages.SUCCESS
        )
        return HttpResponseRedirect(reverse("admin:botapp_broadcast_change", args=[obj.pk]))

    # --- list ---

    @display(description="progress")
    def progress(self, obj):
        if not obj.total:
            return "—"
        p = progress_of(obj)
        if obj.prepare_after is not None and obj.status in ACTIVE:
            return f"{p['done']:,}/{obj.total:,}, {broadcast_progress_text(broadcast=obj)}"
        return render_to_string(
            "admin/botapp/broadcast_list_progress.html", {"b": obj, "p": p, "o": broadcast_outcome(obj, why=False)}
        )

    @display(description="sent", ordering="sent")
    def sent_count(self, obj):
        return outcome_count_html(obj, "sent")

    @display(description="failed", ordering="failed")
    def failed_count(self, obj):
        return outcome_count_html(obj, "failed")

    @display(description="blocked", ordering="blocked")
    def blocked_count(self, obj):
        return outcome_count_html(obj, "blocked")

    # --- the page ---

    @display(description="recipients")
    def recipients(self, obj):
        if obj is None or not obj.pk:
            return "—"
        if obj.audience == Broadcast.Audience.USERS:
            ids = obj.recipient_ids or []
            shown = ", ".join(str(i) for i in ids[:RECIPIENTS_SHOWN])
            more = f" and {len(ids) - RECIPIENTS_SHOWN:,} more" if len(ids) > RECIPIENTS_SHOWN else ""
            return f"{len(ids):,} listed user(s): {shown}{more}"
        if obj.audience == Broadcast.Audience.PAYLOAD:
            return f"Users whose first /start carried “{obj.audience_payload}”"
        return "Every active user"

    @display(description="files")
    def files(self, obj):
        if obj is None or not obj.pk:
            return "—"
        rows = [
            f"{a.get_kind_display()} {a.file_name or a.file_id[:24] + '…'}"
            + (f" ({filesizeformat(a.size)})" if a.size else "")
            + (f" — {a.error}" if a.error else "")
            for a in obj.attachments.all()
        ]
        if obj.copy_message_ids:
            rows.append(f"a copy of message(s) {', '.join(map(str, obj.copy_message_ids))} of chat {obj.copy_chat_id}")
        return format_html_join(mark_safe("<br>"), "{}", ((r,) for r in rows)) if rows else "None (the message above)"

    @display(description="preview")
    def preview(self, obj):
        if obj is None or not obj.pk:
            return "Save to see a preview."
        if obj.origin == "admin" and len(obj.copy_message_ids or []) == 1 and not obj.text:
            return mark_safe(post_preview_html(chat_id=obj.copy_chat_id, message_id=obj.copy_message_ids[0]))  # noqa: S308 - a template, autoescaped
        return message_preview_html(message=obj)

    @display(description="progress")
    def live(self, obj):
        if obj is None or not obj.pk:
            return "—"
        return mark_safe(self._live_html(obj))  # noqa: S308 - a template, autoescaped

    def _live_html(self, b: Broadcast, *, compact: bool = False) -> str:
        """The live part: progress and outcome; on the broadcast's page (not `compact`, as on the
        dashboard) also the last test's results, or that it waits for a worker and whether one runs."""
        test_waiting = bool(b.test_requested_at and not b.test_results)
        worker = processes_state()["worker"] if test_waiting and not compact else None
        return render_to_string(
            "admin/botapp/broadcast_progress.html",
            {
                "b": b,
                "p": progress_of(b),
                "o": broadcast_outcome(b),
                "compact": compact,
                "no_worker": worker is not None and not worker.ok and not worker.unknown,
                "preparing": broadcast_progress_text(broadcast=b) if b.prepare_after is not None and b.status in ACTIVE else "",
                "poll": b.status in ACTIVE or (test_waiting and not compact),
                "test_waiting": test_waiting,
                "url": reverse("admin:botapp_broadcast_progress", args=[b.pk])
                + f"?from={b.status}&page={'dashboard' if compact else 'change'}",
            },
        )

    def progress_view(self, request, object_id):
        """The live part of the page, fetched every 2 s while the broadcast is being sent or a test
        is on its way (htmx); once settled the answer has no trigger and the polling stops."""
        broadcast = self._broadcast(object_id)
        if not self.has_view_permission(request, broadcast):
            return redirect("admin:index")
        # Sending just ended: reload the page once, so that its actions (Cancel…) follow the status.
        # Never for a draft (a test's result arriving must not throw away the operator's edits).
        # htmx reloads the page on HX-Refresh: no inline script, which the Content-Security-Policy forbids.
        ended = request.GET.get("from") in ACTIVE and broadcast.status not in ACTIVE
        response = TemplateResponse(
            request,
            "admin/botapp/broadcast_progress_fragment.html",
            {"html": self._live_html(broadcast, compact=request.GET.get("page") != "change")},
        )
        if ended and request.GET.get("page") == "change":
            response["HX-Refresh"] = "true"
        return response

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.status == Broadcast.Status.PAUSED and request.method == "GET":
            self.message_user(request, obj.paused_reason, messages.WARNING)
        if obj is not None and obj.status != Broadcast.Status.DRAFT:
            # Nothing on the page can be changed any more: no Save buttons that would save nothing.
            context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False)
        return super().render_change_form(request, context, add, change, form_url, obj)


@admin.register(BroadcastDelivery)
class BroadcastDeliveryAdmin(InternalAdmin):
    list_display = ("broadcast", "user", "status", "message_id", "sent_at", "delete_at", "error")
    list_filter = ("status", "broadcast")
    search_fields = ("=user__telegram_id", "user__username", "broadcast__title")
    list_select_related = ("broadcast", "user")
    raw_id_fields = ("user", "broadcast")
    # Who and what first; the send's own fields (from OutgoingSend) after.
    fields = ("broadcast", "user", "chat_id", "status", "message_id", "lease_until", "sent_at", "delete_at", "error")


@admin.register(BroadcastClaim)
class BroadcastClaimAdmin(InternalAdmin):
    """The ranges of broadcast rows senders hold right now (each for at most its 5-minute lease):
    one while a batch is in flight; one past its lease belongs to a worker that died, and the
    reaper puts its rows back within a minute."""

    list_display = ("broadcast", "first_id", "last_id", "claimed_at", "lease_until")
    list_filter = ("broadcast",)
    search_fields = ("broadcast__title",)
    list_select_related = ("broadcast",)
    raw_id_fields = ("broadcast",)


@admin.register(BroadcastAttachment)
class BroadcastAttachmentAdmin(InternalAdmin):
    """A scheduled message's files: whether each is on Telegram yet (its file id), or why not.
    Written by the API and the sender; an operator looks, and edits the message itself."""

    list_display = ("broadcast", "position", "kind", "file_name", "size", "file_id", "uploaded_at", "error")
    list_filter = ("kind", "uploaded_at")
    search_fields = ("file_name", "file_id", "broadcast__title")
    list_select_related = ("broadcast",)
    raw_id_fields = ("broadcast",)
    readonly_fields = ("file_id", "uploaded_at", "error")
