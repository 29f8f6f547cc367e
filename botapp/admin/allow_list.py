"""Owner-only mode's allow-list: add and remove users by Telegram id, or upload a CSV of ids.
Whether the mode is on is Bot settings' (this page says which); the list is kept either way."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from unfold.decorators import action

from botapp.admin.base import ModelAdmin
from botapp.models import AllowedUser, BotSettings
from botapp.services.allow_list import allow_list_add, allow_list_csv_read, allow_list_remove

CSV_BYTES_MAX = 5 * 1024 * 1024


class AllowedUserForm(forms.ModelForm):
    class Meta:
        model = AllowedUser
        fields = ("telegram_id", "note")

    def clean_telegram_id(self):
        value = self.cleaned_data["telegram_id"]
        if value is not None and value <= 0:
            raise forms.ValidationError("A Telegram user id is a positive number, e.g. 123456789.")
        return value


class CsvUploadForm(forms.Form):
    file = forms.FileField(help_text="One Telegram user id per row, in the first column; a header row is skipped.")
    note = forms.CharField(required=False, max_length=255, help_text="Kept beside each id added, e.g. “beta testers”.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > CSV_BYTES_MAX:
            raise forms.ValidationError(f"The file is larger than {CSV_BYTES_MAX // (1024 * 1024)} MB: split it.")
        try:
            return allow_list_csv_read(data=upload.read())
        except ValueError as exc:
            raise forms.ValidationError(f"Nothing was added. {exc}") from None


@admin.register(AllowedUser)
class AllowedUserAdmin(ModelAdmin):
    form = AllowedUserForm
    list_display = ("telegram_id", "note", "added_at", "added_by")
    search_fields = ("=telegram_id", "note")
    list_filter = ("added_at", "added_by")
    readonly_fields = ("added_at", "added_by")
    actions = ("remove",)

    actions_list = ("upload",)

    def changelist_view(self, request, extra_context=None):
        if request.method == "GET":  # whether the list is in force, where the operator looks at it
            if BotSettings.load().allow_list_enabled:
                messages.info(request, "Owner-only mode is on: the bot answers only admins and these users.")
            else:
                messages.info(request, "Owner-only mode is off (Bot settings): everyone may use the bot; this list waits.")
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change):
        if change:  # only the note can change: the id is the row
            super().save_model(request, obj, form, change)
            return
        allow_list_add(telegram_ids=[obj.telegram_id], note=obj.note)
        obj.pk = AllowedUser.objects.get(telegram_id=obj.telegram_id).pk

    def get_readonly_fields(self, request, obj=None):
        return (*self.readonly_fields, "telegram_id") if obj is not None else self.readonly_fields

    def delete_model(self, request, obj):
        allow_list_remove(telegram_ids=[obj.telegram_id])

    def delete_queryset(self, request, queryset):
        allow_list_remove(telegram_ids=list(queryset.values_list("telegram_id", flat=True)))

    @admin.action(description="Take off the allow-list")
    def remove(self, request, queryset):
        removed = allow_list_remove(telegram_ids=list(queryset.values_list("telegram_id", flat=True)))
        self.message_user(request, f"{removed} taken off the allow-list.")

    @action(description="Upload a CSV", url_path="upload", icon="upload_file", permissions=["add"])
    def upload(self, request):
        form = CsvUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            ids = form.cleaned_data["file"]
            added = allow_list_add(telegram_ids=ids, note=form.cleaned_data["note"])
            self.message_user(request, f"{added} added to the allow-list ({len(set(ids)) - added} were on it already).")
            return HttpResponseRedirect(reverse("admin:botapp_alloweduser_changelist"))
        context = {**self.admin_site.each_context(request), "form": form, "title": "Upload allowed users (CSV)"}
        context["opts"] = self.model._meta
        return TemplateResponse(request, "admin/botapp/allowed_users_upload.html", context)
