from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from api.clients import RATE_RE, apiclient_create, apiclient_revoke
from api.models import ApiClient
from botapp.admin.base import ModelAdmin


class ApiClientForm(forms.ModelForm):
    class Meta:
        model = ApiClient
        fields = ("name", "scopes", "rate")

    def clean_scopes(self):
        scopes = [s.strip() for s in self.cleaned_data["scopes"].split(",") if s.strip()]
        if not scopes or set(scopes) - set(ApiClient.Scope.values):
            raise ValidationError("Scopes are read and write, comma-separated.")
        return ",".join(dict.fromkeys(scopes))

    def clean_rate(self):
        rate = self.cleaned_data["rate"].strip()
        if rate and not RATE_RE.match(rate):
            raise ValidationError('Requests per s, min, hour or day, e.g. "600/min".')
        return rate


@admin.register(ApiClient)
class ApiClientAdmin(ModelAdmin):
    """Clients of the HTTP API. Adding one shows its token once; revoking refuses it from then on."""

    form = ApiClientForm
    list_display = ("name", "scopes", "rate", "token_prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "token_prefix")
    readonly_fields = ("token_prefix", "created_at", "last_used_at", "revoked_at")
    fields = ("name", "scopes", "rate", "token_prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        client, token = apiclient_create(name=obj.name, scopes=obj.scopes, rate=obj.rate)
        obj.pk = client.pk
        obj.refresh_from_db()
        self.message_user(request, f"Token for {client.name} (shown once, copy it now): {token}", messages.WARNING)
        return None

    @admin.action(description="Revoke the selected clients' tokens")
    def revoke(self, request, queryset):
        for client in queryset:
            apiclient_revoke(client=client)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.WARNING)
