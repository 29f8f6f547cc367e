"""Stored files (with their deep links), pending deletions, admins' /batch in progress."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from unfold.decorators import action
from unfold.widgets import UnfoldAdminNullBooleanSelectWidget

from botapp import clock
from botapp.admin.access import FlushCountersFirst
from botapp.admin.backups import BackupAdminMixin, BackupFilter
from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.config import storage_channel_load
from botapp.models import (
    AlbumClaim,
    BotSettings,
    PendingBatch,
    PendingDeletion,
    RemovedFile,
    StoredFile,
)
from botapp.models.files import message_ids_problem
from botapp.services.files import MAX_BATCH, bot_username_cached, deep_link, files_remove
from botapp.services.stream_links import stream_links_for, stream_links_revoke


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
        spans: list[tuple[int, int]] = []
        for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
            first, sep, last = part.partition("-")
            try:
                start, end = int(first), int(last) if sep else int(first)
            except ValueError:
                raise forms.ValidationError(f"{part!r} is not a message id or a range like 10-20.") from None
            if start <= 0 or end < start:
                raise forms.ValidationError(f"{part!r}: ids are positive and ranges go upwards.")
            spans.append((start, end))
        if not spans:
            raise forms.ValidationError("Give at least one message id.")
        # Count before building: "1-99999999999" must be refused, not expanded into memory.
        count = sum(end - start + 1 for start, end in spans)
        if count > MAX_BATCH:
            raise forms.ValidationError(f"A link holds at most {MAX_BATCH} messages (got {count:,}).")
        ids = [i for start, end in spans for i in range(start, end + 1)]
        if problem := message_ids_problem(ids):  # beyond Telegram's ids, or one listed twice
            raise forms.ValidationError(problem)
        return ids


# Per-link settings, over Bot settings for this link (the model says how each one falls back).
LINK_SETTINGS = (
    "protect_content",
    "auto_delete_minutes",
    "skip_verification",
    "expires_at",
    "stream_links",
    "stream_lifetime_hours",
)


class FollowsSettingsSelect(UnfoldAdminNullBooleanSelectWidget):
    """A per-link yes/no whose third choice is "as Bot settings" (the model's None), not "Unknown"."""

    def __init__(self, attrs=None):
        super().__init__(attrs)
        self.choices = [("unknown", "As Bot settings"), ("true", "Yes"), ("false", "No")]


class StoredFileForm(forms.ModelForm):
    message_ids = MessageIdsField(help_text='Message ids in the storage channel: "12", "12, 15" or a range "10-20".')
    protect_content = forms.NullBooleanField(
        required=False,
        widget=FollowsSettingsSelect,
        help_text="Yes: users cannot forward or save the delivered copies; No: they can; As Bot settings: as set there.",
    )

    class Meta:
        model = StoredFile
        fields = ("title", "source_chat_id", "message_ids", *LINK_SETTINGS)


@admin.register(StoredFile)
class StoredFileAdmin(BackupAdminMixin, FlushCountersFirst, ModelAdmin):
    form = StoredFileForm

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        # A time in the past is how an operator ends a link at once: allowed, and said.
        if "expires_at" in form.changed_data and obj.expires_at and obj.expires_at <= clock.now():
            self.message_user(request, f"“{obj}” has expired already: its link answers that it has expired.", messages.WARNING)

    def delete_model(self, request, obj):
        files_remove(files=StoredFile.objects.filter(pk=obj.pk))  # its link keeps saying "removed"

    def delete_queryset(self, request, queryset):
        files_remove(files=queryset)

    actions = ("back_up_now",)
    actions_detail = ("revoke_stream_links",)
    list_display = (
        "link",
        "title",
        "message_count",
        "delivery_count",
        "last_delivered_at",
        "protect_content",
        "has_backup",
        "created_at",
    )
    list_display_links = ("title",)
    list_filter = ("protect_content", "skip_verification", "expires_at", BackupFilter, "created_at")
    search_fields = ("=share_id", "title")
    readonly_fields = (
        "share_id",
        "delivery_count",
        "last_delivered_at",
        "created_at",
        "created_by",
        "link",
        "backup",
        "stream_links_shown",
    )

    def get_fields(self, request, obj=None):
        editable = ("title", "source_chat_id", "message_ids", *LINK_SETTINGS)
        if obj is None:
            return editable
        # A saved file leads with its link: what the operator came for.
        return (
            "link",
            "stream_links_shown",
            *editable,
            "share_id",
            "delivery_count",
            "last_delivered_at",
            "created_by",
            "created_at",
            "backup",
        )

    def response_add(self, request, obj, post_url_continue=None):
        """A new file lands on its own page, where the deep link is the first thing (with a copy
        button), whichever save button was used."""
        self.message_user(request, f"“{obj}” is stored: share its link below.")
        return HttpResponseRedirect(reverse("admin:botapp_storedfile_change", args=[obj.pk]))

    def get_changeform_initial_data(self, request):
        return {"source_chat_id": storage_channel_load(), **super().get_changeform_initial_data(request)}

    @admin.display(description="messages")
    def message_count(self, obj):
        return len(obj.message_ids or [])

    @admin.display(description="backup")
    def backup(self, obj):
        """Where the copy in the backup channel is, in words (not the raw ids, nor "null")."""
        if not obj.backup_message_ids:
            return "None yet: the backup job copies the file once Bot settings name a backup channel."
        ids = ", ".join(map(str, obj.backup_message_ids))
        return f"Message(s) {ids} of the backup channel {obj.backup_chat_id}."

    @admin.display(description="stream links")
    def stream_links_shown(self, obj):
        """Each message's player page and download, valid for the file's stream lifetime from now."""
        if not obj.pk:
            return "—"
        if not settings.STREAM_PUBLIC_URL:
            return "Set STREAM_PUBLIC_URL and run the streaming process to get stream links (docs/operating.md)."
        gone = (
            format_html(
                '<p style="color: #b91c1c;">Gone: the streaming process found this file\'s message deleted on {}.</p>',
                obj.stream_gone_at,
            )
            if obj.stream_gone_at
            else ""
        )
        rows = format_html_join(
            "",
            '<li>Message {}: <a href="{}" target="_blank" rel="noopener">play</a> · '
            '<a href="{}" target="_blank" rel="noopener">download</a></li>',
            (
                (n, u.watch, u.download)
                for n, u in enumerate(stream_links_for(stored=obj, conf=BotSettings.load(), user_id=None), 1)
            ),
        )
        hours = obj.stream_lifetime_hours_for(BotSettings.load())
        return format_html(
            '{}<ul class="stream-links">{}</ul><p>These links work for {} hour(s) from now. "Revoke stream links" (above) ends '
            "every link of this file given so far.</p>",
            gone,
            rows,
            hours,
        )

    @action(description="Revoke stream links", url_path="revoke-stream-links", icon="link_off", permissions=["change"])
    def revoke_stream_links(self, request, object_id):
        stored = get_object_or_404(StoredFile, pk=object_id)
        if request.method != "POST":
            context = {**self.admin_site.each_context(request), "opts": self.model._meta, "stored": stored}
            return TemplateResponse(request, "admin/botapp/stream_revoke_confirm.html", context)
        stream_links_revoke(stored=stored)
        self.message_user(request, f"Every stream link of “{stored}” given so far no longer works.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:botapp_storedfile_change", args=[stored.pk]))

    @admin.display(description="deep link")
    def link(self, obj):
        if not obj.pk:
            return "—"
        username = bot_username_cached()
        if not username:
            return f"start={obj.share_id} (bot username known once runbot has started)"
        url = deep_link(bot_username=username, payload=obj.share_id)
        return format_html(
            '<span class="deep-link" style="white-space: nowrap;"><a href="{}" target="_blank" rel="noopener">{}</a> '
            '<button type="button" class="copy-link" data-link="{}" title="Copy the link" '
            'style="border: 1px solid #d1d5db; border-radius: 6px; padding: 0 6px; margin-left: 4px;">'
            "Copy</button></span>",  # botapp/static/courier/console.js copies it (no inline handler: the CSP)
            url,
            url,
            url,
        )


@admin.register(PendingDeletion)
class PendingDeletionAdmin(InternalAdmin):
    """Deletions to come, and the expired ones (status filter): Telegram's 48 h closed before they
    could be made, and their messages are still in the chat."""

    list_display = ("chat_id", "message_count", "delete_at", "status", "attempts", "share_id", "created_at")
    list_filter = ("status", "delete_at")
    search_fields = ("=chat_id", "=share_id")

    @admin.display(description="messages")
    def message_count(self, obj):
        return len(obj.message_ids or [])


@admin.register(RemovedFile)
class RemovedFileAdmin(InternalAdmin):
    """Share ids of deleted files: their links say the files were removed. Deleting one makes the
    payload a campaign tag again."""

    deletable = True
    list_display = ("share_id", "removed_at")
    list_filter = ("removed_at",)
    search_fields = ("=share_id",)


@admin.register(PendingBatch)
class PendingBatchAdmin(InternalAdmin):
    deletable = True  # cancels an admin's /batch, as /cancel would
    list_display = ("admin_id", "first_message_id", "started_at")
    list_filter = ("started_at",)
    search_fields = ("=admin_id",)


@admin.register(AlbumClaim)
class AlbumClaimAdmin(InternalAdmin):
    """Albums admins sent to be stored: which thread stored each (kept a day)."""

    list_display = ("media_group_id", "chat_id", "claimed_at")
    list_filter = ("claimed_at",)
    search_fields = ("=chat_id", "=media_group_id")
