from django.contrib import admin

from scheduler.models import JobRun


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ("job", "status", "trigger", "started_at", "finished_at", "processed", "failed", "detail")
    list_filter = ("status", "job", "trigger")
    search_fields = ("job", "detail", "error")
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in JobRun._meta.fields]

    def has_add_permission(self, request):
        return False
