import logging

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django_celery_beat import admin as beat_admin
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule

from botapp.admin.base import InternalAdmin, ModelAdmin
from scheduler.dashboard import jobs_overview
from scheduler.jobs.registry import JOBS
from scheduler.models import BackgroundJob, JobRun

log = logging.getLogger(__name__)

# celery-beat's screens in the console's theme; clocked (one-off) and solar schedules are not used
# by any job, so they are not shown.
admin.site.unregister([PeriodicTask, CrontabSchedule, IntervalSchedule, ClockedSchedule, SolarSchedule])


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(beat_admin.PeriodicTaskAdmin, ModelAdmin):
    pass


@admin.register(CrontabSchedule)
class CrontabScheduleAdmin(beat_admin.CrontabScheduleAdmin, ModelAdmin):
    pass


@admin.register(IntervalSchedule)
class IntervalScheduleAdmin(beat_admin.IntervalScheduleAdmin, ModelAdmin):
    pass


@admin.register(JobRun)
class JobRunAdmin(InternalAdmin):
    deletable = True  # history only; prune_job_runs deletes old runs anyway
    list_display = ("job", "status", "trigger", "started_at", "finished_at", "processed", "failed", "detail")
    list_filter = ("status", "job", "trigger")
    search_fields = ("job", "detail", "error")
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in JobRun._meta.fields]


@admin.register(BackgroundJob)
class BackgroundJobAdmin(ModelAdmin):
    """The jobs dashboard: each job, its schedule, last run, next run, and "Run now"."""

    search_fields = ("job",)
    list_filter = ("status",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if not request.user.has_perm("scheduler.view_jobrun"):
            return HttpResponseRedirect("../../")
        if request.method == "POST":
            return self._run_now(request)
        rows = jobs_overview()
        context = {
            **self.admin_site.each_context(request),
            "title": "Background jobs",
            "rows": rows,
            "failing": sum(r.failing for r in rows),
            "time_zone": settings.TIME_ZONE,
        }
        return TemplateResponse(request, "admin/scheduler/jobs.html", context)

    def _run_now(self, request):
        from scheduler.tasks import TASKS

        name = request.POST.get("job", "")
        if name not in JOBS:
            messages.error(request, f"Unknown job {name!r}.")
        else:
            try:
                TASKS[name].apply_async(kwargs={"trigger": "admin"}, retry=False)
            except Exception as exc:  # the broker is down: say so instead of a 500
                log.error("run now failed job=%s: %s", name, exc)
                messages.error(request, f"Could not queue {name}: the task queue is unreachable ({exc}).")
            else:
                messages.success(request, f"Queued {name}: a worker runs it within seconds. Refresh to see the run.")
        return HttpResponseRedirect(request.path)
