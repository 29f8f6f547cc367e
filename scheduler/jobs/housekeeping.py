"""Keeping the job history from growing without end: minute jobs alone record ~4,000 runs a day."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from botapp import clock
from scheduler.jobs.registry import JOBS, Job, Outcome, job_register
from scheduler.models import JobRun


def prune_job_runs(*, gateway=None, dry_run: bool = False) -> Outcome:
    """Delete job runs older than JOB_RUN_RETENTION_DAYS, except each job's latest run (the
    dashboard shows it however old it is)."""
    cutoff = clock.now() - timedelta(days=settings.JOB_RUN_RETENTION_DAYS)
    latest = [pk for name in JOBS if (pk := JobRun.objects.filter(job=name).values_list("pk", flat=True).first())]
    old = JobRun.objects.filter(started_at__lt=cutoff).exclude(pk__in=latest)
    if dry_run:
        return Outcome(old.count(), detail=f"runs older than {settings.JOB_RUN_RETENTION_DAYS} days")
    n, _ = old.delete()
    return Outcome(n, detail=f"deleted {n} runs older than {settings.JOB_RUN_RETENTION_DAYS} days")


job_register(Job("prune_job_runs", prune_job_runs, {"minute": "30", "hour": "3"}, "Delete old job runs"))
