"""Token housekeeping: expired tokens and old daily counters."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from botapp import clock
from botapp.models import DailyTokenCount, VerificationToken
from scheduler.jobs.registry import Job, Outcome, job_register


def cleanup_tokens(*, gateway=None, dry_run: bool = False) -> Outcome:
    """Delete used tokens (verified or bypassed) past their expiry, and unused ones past the
    longer retention (TOKEN_RETENTION_DAYS) so an operator can still see who never came back."""
    now = clock.now()
    used = VerificationToken.objects.exclude(status=VerificationToken.Status.PENDING).filter(expires_at__lt=now)
    unused = VerificationToken.objects.filter(
        status=VerificationToken.Status.PENDING,
        expires_at__lt=now - timedelta(days=settings.TOKEN_RETENTION_DAYS),
    )
    if dry_run:
        n_used, n_unused = used.count(), unused.count()
        return Outcome(n_used + n_unused, detail=f"would delete {n_used} used and {n_unused} unused tokens")
    n_used, _ = used.delete()
    n_unused, _ = unused.delete()
    return Outcome(n_used + n_unused, detail=f"deleted {n_used} used and {n_unused} unused tokens")


def reset_token_counts(*, gateway=None, dry_run: bool = False) -> Outcome:
    """A new day: forget the daily token counters of earlier days (today's keep counting)."""
    old = DailyTokenCount.objects.filter(date__lt=clock.today())
    if dry_run:
        return Outcome(old.count(), detail="counters that would be deleted")
    n, _ = old.delete()
    return Outcome(n, detail=f"deleted {n} counters of earlier days")


job_register(Job("cleanup_tokens", cleanup_tokens, {"minute": "0", "hour": "0,12"}, "Delete expired verification tokens"))
job_register(Job("reset_token_counts", reset_token_counts, {"minute": "0", "hour": "0"}, "Forget earlier days' token counters"))
