"""The audit trail in the console: read only, newest first, searchable by who, what and to what,
filterable by channel (console, API, bot, command line), action and day."""

from django.contrib import admin

from botapp.admin.base import InternalAdmin
from botapp.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(InternalAdmin):
    list_display = ("at", "actor", "via", "address", "action", "target", "short_detail")
    list_filter = ("via", "action", "at")
    search_fields = ("actor", "action", "target", "detail")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]
    list_per_page = 50

    @admin.display(description="detail")
    def short_detail(self, obj):
        return obj.detail[:80] + ("…" if len(obj.detail) > 80 else "")
