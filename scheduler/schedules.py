"""The default schedule, installed by `migrate` (post_migrate): one periodic task per job, created
only when no periodic task runs that job yet. An operator's later edits (timing, enabled) are
never overwritten; to stop a job, disable its task (a deleted one comes back on the next migrate)."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from scheduler.jobs.registry import JOBS


def schedules_install(**kwargs) -> list[str]:
    created = []
    for job in JOBS.values():
        if PeriodicTask.objects.filter(task=job.task_name).exists():
            continue
        fields = {"minute": "*", "hour": "*", "day_of_week": "*", "day_of_month": "*", "month_of_year": "*"} | job.cron
        crontab, _ = CrontabSchedule.objects.get_or_create(**fields, timezone=zoneinfo.ZoneInfo(settings.TIME_ZONE))
        PeriodicTask.objects.create(
            name=f"{job.name}: {job.summary}",
            task=job.task_name,
            crontab=crontab,
            description=f"Default schedule ({job.cron_text()} {settings.TIME_ZONE}); edit freely.",
            kwargs='{"trigger": "beat"}',
        )
        created.append(job.name)
    return created
