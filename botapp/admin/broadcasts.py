"""Broadcasts: compose with a live-checked preview, then everything on the broadcast's own page:
Send a test (each admin's result shown), Start sending… (a confirmation that states the audience),
Cancel…, Duplicate as draft, and progress that updates by itself. Writes go through
botapp/services/broadcasts.py."""

from collections.abc import Callable
from typing import TypeVar

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import models
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from unfold.decorators import action, display
from unfold.enums import ActionVariant
from unfold.widgets import UnfoldAdminIntegerFieldWidget, UnfoldAdminTextareaWidget

from botapp import clock
from botapp.admin.base import InternalAdmin, ModelAdmin, readonly_text
from botapp.admin.broadcast_deletion import BroadcastDeletion
from botapp.admin.compose import ComposedMessageForm, message_preview_html, post_preview_html
from botapp.config import admin_ids_load
from botapp.models import (
    Broadcast,
    BroadcastAttachment,
    BroadcastClaim,
    BroadcastDelivery,
)
from botapp.services.broadcasts import (
    broadcast_cancel,
    broadcast_duplicate,
    broadcast_progress_text,
    broadcast_recipients_text,
    broadcast_resume,
    broadcast_start,
    broadcast_test_request,
)
from botapp.services.health import broker_problem, processes_state
from botapp.telegram.limits import MESSAGE_ID_MAX

ACTIVE = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)
T = TypeVar("T")
RECIPIENTS_SHOWN = 20  # listed users' ids on a broadcast's page; the rest counted


def _unprepared(broadcast: Broadcast) -> str:
    """What a cancel leaves out beyond the rows made: while a worker still prepares the
    recipients, the rest of the audience too (its size, once the worker has counted it)."""
    if broadcast.prepare_after is None:
        return ""
    if broadcast.audience_size is None:
        return ", nor will the rest of the audience (not prepared yet)"
    return f", nor will the {max(0, broadcast.audience_size - broadcast.total):,} users not prepared yet"


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
class BroadcastAdmin(BroadcastDeletion, ModelAdmin):
    form = BroadcastForm
    list_display = ("title", "status", "progress", "scheduled_at", "delete_after_minutes", "created_at")
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

    # --- list ---

    @display(description="progress")
    def progress(self, obj):
        if not obj.total:
            return "—"
        p = progress_of(obj)
        if obj.prepare_after is not None and obj.status in ACTIVE:
            return f"{p['done']:,}/{obj.total:,}, {broadcast_progress_text(broadcast=obj)}"
        return f"{p['done']:,}/{obj.total:,} ({p['percent']}%)"

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

    def _live_html(self, b: Broadcast) -> str:
        test_waiting = bool(b.test_requested_at and not b.test_results)
        return render_to_string(
            "admin/botapp/broadcast_progress.html",
            {
                "b": b,
                "p": progress_of(b),
                "preparing": broadcast_progress_text(broadcast=b) if b.prepare_after is not None and b.status in ACTIVE else "",
                "poll": b.status in ACTIVE or test_waiting,
                "test_waiting": test_waiting,
                "url": reverse("admin:botapp_broadcast_progress", args=[b.pk]) + f"?from={b.status}&page=change",
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
            request, "admin/botapp/broadcast_progress_fragment.html", {"html": self._live_html(broadcast)}
        )
        if ended and request.GET.get("page") == "change":
            response["HX-Refresh"] = "true"
        return response

    # --- the actions on the page (each asks for confirmation: a GET shows, a POST acts) ---

    def _broadcast(self, object_id) -> Broadcast:
        if not str(object_id).isdigit():  # the action URLs take any path: /1/change/start/ is no broadcast
            raise Http404("No such broadcast.")
        return get_object_or_404(Broadcast, pk=object_id)

    def _with_status(self, object_id, statuses) -> bool:
        return object_id is None or (
            str(object_id).isdigit() and Broadcast.objects.filter(pk=object_id, status__in=statuses).exists()
        )

    def _back(self, broadcast):
        return redirect("admin:botapp_broadcast_change", broadcast.pk)

    def _confirm(self, request, broadcast, *, title, lines, button, danger=False, warning=""):
        return TemplateResponse(
            request,
            "admin/botapp/broadcast_confirm.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": title,
                "b": broadcast,
                "lines": lines,
                "button": button,
                "danger": danger,
                "warning": warning,
            },
        )

    def _act(self, request, broadcast, act: Callable[[], T], done: Callable[[T], None]):
        """The POST of an action: `act()` calls the service; its refusal (ValidationError) is shown
        as an error, otherwise `done(what act returned)` tells the operator what happened. Then
        back to the broadcast's page."""
        try:
            result = act()
        except ValidationError as exc:
            self.message_user(request, exc.messages[0], messages.ERROR)
        else:
            done(result)
        return self._back(broadcast)

    def has_send_test_permission(self, request, object_id=None):
        return self.has_change_permission(request)

    def has_start_permission(self, request, object_id=None):
        return self.has_change_permission(request) and self._with_status(object_id, [Broadcast.Status.DRAFT])

    def has_cancel_permission(self, request, object_id=None):
        return self.has_change_permission(request) and self._with_status(
            object_id, [Broadcast.Status.SCHEDULED, Broadcast.Status.PAUSED, *ACTIVE]
        )

    def has_resume_permission(self, request, object_id=None):
        return self.has_change_permission(request) and self._with_status(object_id, [Broadcast.Status.PAUSED])

    def has_duplicate_permission(self, request, object_id=None):
        return self.has_add_permission(request)

    @action(description="Send a test", url_path="send-test", icon="science", permissions=["send_test"])
    def send_test(self, request, object_id):
        broadcast = self._broadcast(object_id)
        admins = sorted(admin_ids_load())
        if request.method != "POST":
            return self._confirm(
                request,
                broadcast,
                title=f"Send a test of “{broadcast.title}”",
                lines=[
                    f"A worker sends it to the {len(admins)} admin(s) in ADMIN_IDS ({', '.join(map(str, admins)) or 'none set'}), "
                    "exactly as users would get it; tracked buttons are not tracked.",
                    "Each admin's result shows on the broadcast's page.",
                ],
                button="Send the test",
                warning=broker_problem(),
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_test_request(broadcast=broadcast, admin_count=len(admins)),
            lambda _: self.message_user(request, f"A test is on its way to {len(admins)} admin(s); their results appear below."),
        )

    @action(description="Start sending…", url_path="start", icon="send", variant=ActionVariant.PRIMARY, permissions=["start"])
    def start_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        later = bool(broadcast.scheduled_at and broadcast.scheduled_at > clock.now())
        if request.method != "POST":
            # Counted for the confirmation only: the start itself answers at once (at millions of
            # users, this count was most of the POST's time; docs/benchmarks.md).
            audience, who = broadcast_recipients_text(broadcast=broadcast)
            if later:
                when = f"{timezone.localtime(broadcast.scheduled_at):%Y-%m-%d %H:%M %Z}"
                # Listed users are fixed; the others are whoever is active when it starts.
                then = who if broadcast.audience == Broadcast.Audience.USERS else f"those active at that time ({who} now)"
                lines = [f"It is scheduled for {when}: it goes then to {then}."]
            else:
                lines = [f"It goes now to {who}."]
            if broadcast.delete_after_minutes:
                lines.append(f"Each copy is deleted {broadcast.delete_after_minutes} minutes after it is sent.")
            lines.append("Once started, the message can no longer be edited.")
            return self._confirm(
                request,
                broadcast,
                title=f"Start sending “{broadcast.title}”?",
                lines=lines,
                button="Schedule it" if later else f"Send to {audience:,} user{'s' if audience != 1 else ''}",
                warning=broker_problem(),
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_start(broadcast=broadcast),
            lambda total: self._started(request, broadcast, total),
        )

    def _started(self, request, broadcast: Broadcast, total: int) -> None:
        """What Start sending… tells the operator once `total` deliveries are queued (or scheduled)."""
        users = f"{total:,} users"
        if broadcast.prepare_after is not None:  # too many to queue at once: a worker makes the rest
            users = f"the first {total:,} users (a worker is preparing the rest)"
        if broadcast.status == Broadcast.Status.SCHEDULED:
            self.message_user(request, f"Scheduled for {timezone.localtime(broadcast.scheduled_at):%Y-%m-%d %H:%M %Z}.")
        elif problem := broker_problem():
            self.message_user(
                request,
                f"Not sending yet: {problem} The deliveries to {users} are saved; "
                "sending starts within a minute of the task queue coming back.",
                messages.WARNING,
            )
        elif (worker := processes_state()["worker"]) and not worker.ok and not worker.unknown:
            self.message_user(
                request,
                f"Queued for {users}, but no worker is running: sending starts when one does "
                "(celery -A config worker; the jobs page shows the processes).",
                messages.WARNING,
            )
        else:
            self.message_user(request, f"Sending to {users}: progress below updates by itself.")

    @action(description="Resume…", url_path="resume", icon="play_arrow", variant=ActionVariant.PRIMARY, permissions=["resume"])
    def resume_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if request.method != "POST":
            pending = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
            return self._confirm(
                request,
                broadcast,
                title=f"Resume “{broadcast.title}”?",
                lines=[broadcast.paused_reason, f"{pending:,} users have not got it yet; sending to them starts again."],
                button="Resume sending",
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_resume(broadcast=broadcast),
            lambda left: self.message_user(request, f"Resumed: sending to the {left:,} users left."),
        )

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.status == Broadcast.Status.PAUSED and request.method == "GET":
            self.message_user(request, obj.paused_reason, messages.WARNING)
        if obj is not None and obj.status != Broadcast.Status.DRAFT:
            # Nothing on the page can be changed any more: no Save buttons that would save nothing.
            context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False)
        return super().render_change_form(request, context, add, change, form_url, obj)

    @action(description="Cancel…", url_path="cancel", icon="cancel", permissions=["cancel"])
    def cancel_sending(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if request.method != "POST":
            pending = broadcast.deliveries.filter(status=BroadcastDelivery.Status.PENDING).count()
            return self._confirm(
                request,
                broadcast,
                title=f"Cancel “{broadcast.title}”?",
                lines=[
                    f"{pending:,} users have not got it yet and will not get it{_unprepared(broadcast)}.",
                    "Messages already sent stay (and are still deleted at the end of their lifetime).",
                ],
                button="Cancel sending",
                danger=True,
            )
        return self._act(
            request,
            broadcast,
            lambda: broadcast_cancel(broadcast=broadcast),
            lambda left: self.message_user(
                request, f"Cancelled; {left:,} users will not get it{_unprepared(broadcast)}.", messages.WARNING
            ),
        )

    @action(description="Duplicate as draft", url_path="duplicate", icon="content_copy", permissions=["duplicate"])
    def duplicate(self, request, object_id):
        broadcast = self._broadcast(object_id)
        if request.method != "POST":
            return self._confirm(
                request,
                broadcast,
                title=f"Duplicate “{broadcast.title}” as a new draft?",
                lines=[
                    "The copy has the same text, media, files, buttons, options and recipients; "
                    "nothing is sent until you start it."
                ],
                button="Create the draft",
            )
        copy = broadcast_duplicate(broadcast=broadcast)
        self.message_user(request, f"“{copy.title}” is a new draft: edit it, test it, then start it.")
        return redirect("admin:botapp_broadcast_change", copy.pk)


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
