import logging

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django_celery_beat import admin as beat_admin
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule

from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.services.health import broker_problem, processes_state
from scheduler.dashboard import job_queued_mark, job_queued_taken, jobs_overview
from scheduler.jobs.registry import JOBS
from scheduler.models import BackgroundJob, JobRun
from scheduler.stats import scheduler_stats
from scheduler.tasks import TASKS

log = logging.getLogger(__name__)

# celery-beat's screens in the console's theme; clocked (one-off) and solar schedules are not used
# by any job, so they are not shown.
admin.site.unregister([PeriodicTask, CrontabSchedule, IntervalSchedule, ClockedSchedule, SolarSchedule])


class PeriodicTaskForm(beat_admin.PeriodicTaskForm):
    """celery-beat's form, which takes any task name typed: here only Courier's jobs run, so a
    name that is none of them (a typo) is refused instead of leaving the job unscheduled."""

    def clean(self):
        data = super().clean()
        task = data.get("task")
        known = sorted(j.task_name for j in JOBS.values())
        if task and task not in known and task != "celery.backend_cleanup":  # beat's own, when results expire
            self.add_error("task", f"{task} is not a Courier job's task; the tasks are: {', '.join(known)}.")
        return data


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(beat_admin.PeriodicTaskAdmin, ModelAdmin):
    form = PeriodicTaskForm
    # celery-beat's template carries an inline script, which the Content-Security-Policy blocks.
    change_form_template = "admin/scheduler/periodictask_form.html"


@admin.register(CrontabSchedule)
class CrontabScheduleAdmin(beat_admin.CrontabScheduleAdmin, ModelAdmin):
    pass


@admin.register(IntervalSchedule)
class IntervalScheduleAdmin(beat_admin.IntervalScheduleAdmin, ModelAdmin):
    pass


class RunsFilter(admin.SimpleListFilter):
    """Hides the runs that found nothing to do (several a minute), unless asked for."""

    title = "runs"
    parameter_name = "runs"

    def lookups(self, request, model_admin):
        return [("all", "All, empty ones included"), ("empty", "Only empty runs")]

    def choices(self, changelist):
        for choice in super().choices(changelist):
            if choice["display"] == "All":
                choice["display"] = "With work, or failed"
            yield choice

    def queryset(self, request, queryset):
        empty = Q(status=JobRun.Status.OK, processed=0, failed=0)
        if self.value() == "all":
            return queryset
        if self.value() == "empty":
            return queryset.filter(empty)
        return queryset.exclude(empty)


@admin.register(JobRun)
class JobRunAdmin(InternalAdmin):
    deletable = True  # history only; prune_job_runs deletes old runs anyway
    list_display = ("job", "status", "trigger", "started_at", "took", "processed", "failed", "short_detail")
    list_filter = (RunsFilter, "status", "job", "trigger")
    search_fields = ("job", "detail", "error")
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in JobRun._meta.fields]

    @admin.display(description="took")
    def took(self, obj):
        return f"{obj.duration.total_seconds():.1f} s" if obj.duration else "—"

    @admin.display(description="detail")
    def short_detail(self, obj):
        return obj.detail[:60] + ("…" if len(obj.detail) > 60 else "")


@admin.register(BackgroundJob)
class BackgroundJobAdmin(InternalAdmin):
    """The jobs page: each job, its schedule in words, last and next run, stale or failing, the
    worker and beat heartbeats, and "Run now" (for operators with the run permission)."""

    search_fields = ("job",)
    list_filter = ("status",)

    def changelist_view(self, request, extra_context=None):
        if not request.user.has_perm("scheduler.view_jobrun"):
            return HttpResponseRedirect("../../")
        if request.method == "POST":
            if not request.user.has_perm("scheduler.run_backgroundjob"):
                raise PermissionDenied("Running a job needs the permission “Can run a background job now”.")
            return self._run_now(request)
        rows = jobs_overview()
        state = processes_state()
        context = {
            **self.admin_site.each_context(request),
            "title": "Background jobs",
            "rows": rows,
            "failing": sum(r.failing for r in rows),
            "stale": sum(r.stale for r in rows),
            "worker": state["worker"],
            "beat": state["beat"],
            "broker_problem": broker_problem(),
            "can_run": request.user.has_perm("scheduler.run_backgroundjob"),
            "time_zone": settings.TIME_ZONE,
            "scheduler_stats": scheduler_stats(),
            # A job queued ("Run now") or running: the page reloads its part every 2 s until none is.
            "waiting": any(r.queued_at or (r.last and r.last.status == JobRun.Status.RUNNING) for r in rows),
        }
        return TemplateResponse(request, "admin/scheduler/jobs.html", context)

    def _run_now(self, request):
        name = request.POST.get("job", "")
        if name not in JOBS:
            messages.error(request, f"Unknown job {name!r}.")
            return HttpResponseRedirect(request.path)
        # Marked before it is sent: a worker can take it (and clear the mark) before apply_async
        # returns, and a mark set after that would show it queued for good.
        press = job_queued_mark(name=name)
        try:
            TASKS[name].apply_async(kwargs={"trigger": "admin"}, task_id=press, retry=False)
        except Exception as exc:  # the broker is down: say so instead of a 500, and not "queued"
            job_queued_taken(name=name, press=press)
            log.error("run now failed job=%s: %s", name, exc)
            messages.error(request, f"{name} was not queued: the task queue (the Celery broker) is unreachable.")
            return HttpResponseRedirect(request.path)
        if processes_state()["worker"].ok:
            messages.success(request, f"Queued {name}: it shows as queued until a worker takes it.")
        else:
            messages.warning(request, f"Queued {name}, but no worker is running: it runs when one starts.")
        return HttpResponseRedirect(request.path)
