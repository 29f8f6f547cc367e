"""Keeping the job history from growing without end (minute jobs alone record ~4,000 runs a day),
and runbot's claims on the updates it handled (a row per message a user sends)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from botapp import clock
from botapp.models import AuditEntry, HandledUpdate
from botapp.services.audit import audit_prune
from botapp.services.updates import HANDLED_RETENTION, handled_updates_prune
from scheduler.jobs.registry import JOBS, Job, Outcome, job_register
from scheduler.models import JobRun


def prune_job_runs(*, gateway=None, dry_run: bool = False) -> Outcome:
    """Delete job runs older than JOB_RUN_RETENTION_DAYS, except each job's latest run (the
    dashboard shows it however old it is), and the audit trail's entries as old."""
    cutoff = clock.now() - timedelta(days=settings.JOB_RUN_RETENTION_DAYS)
    latest = [pk for name in JOBS if (pk := JobRun.objects.filter(job=name).values_list("pk", flat=True).first())]
    old = JobRun.objects.filter(started_at__lt=cutoff).exclude(pk__in=latest)
    if dry_run:
        audit = AuditEntry.objects.filter(at__lt=cutoff).count()
        return Outcome(old.count(), detail=f"runs older than {settings.JOB_RUN_RETENTION_DAYS} days; {audit} audit entries")
    n, _ = old.delete()
    audit = audit_prune(before=cutoff)
    return Outcome(n, detail=f"deleted {n} runs and {audit} audit entries older than {settings.JOB_RUN_RETENTION_DAYS} days")


job_register(Job("prune_job_runs", prune_job_runs, {"minute": "30", "hour": "3"}, "Delete old job runs"))


def prune_handled_updates(*, gateway=None, dry_run: bool = False) -> Outcome:
    """Delete runbot's claims on updates older than a week (services/updates.py: HANDLED_RETENTION):
    no update comes again that late."""
    days = HANDLED_RETENTION.days
    if dry_run:
        old = HandledUpdate.objects.filter(claimed_at__lt=clock.now() - HANDLED_RETENTION).count()
        return Outcome(old, detail=f"claims on updates older than {days} days")
    n = handled_updates_prune()
    return Outcome(n, detail=f"deleted {n} claims on updates older than {days} days")


job_register(
    Job("prune_handled_updates", prune_handled_updates, {"minute": "40", "hour": "3"}, "Delete runbot's old claims on updates")
)
