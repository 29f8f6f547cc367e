"""Counts waiting as counter entries (deliveries, verifications, bypasses; each file's deliveries)
are added to Daily stats and Stored files: see botapp/services/stats.py."""

from __future__ import annotations

from botapp.services.stats import counters_flush, counters_waiting
from scheduler.jobs.registry import Job, Outcome, job_register


def _describe(counts) -> str:
    return (
        f"{counts['deliveries']} deliveries, {counts['verifications']} verifications, {counts['bypasses']} bypasses, "
        f"{counts['files']} files"
    )


def flush_counters(*, gateway=None, dry_run: bool = False) -> Outcome:
    """Add the waiting counts to DailyStat and StoredFile (processed: the day totals added)."""
    if dry_run:
        waiting = counters_waiting()
        return Outcome(
            sum(waiting[f] for f in ("deliveries", "verifications", "bypasses")), detail=f"waiting: {_describe(waiting)}"
        )
    added = counters_flush()
    return Outcome(sum(added[f] for f in ("deliveries", "verifications", "bypasses")), detail=f"added {_describe(added)}")


job_register(Job("flush_counters", flush_counters, {"minute": "*"}, "Write the live counters to the database"))
