"""The `delete_due_messages` job: the auto-delete sweep (botapp/services/autodelete.py, which holds
the whole story: the row a delivery writes, the per-row deletion and the notice) run in the sweep
loop, as a Celery task, a command and a dashboard row."""

from __future__ import annotations

from botapp import clock
from botapp.metrics import sends_count
from botapp.models import ClaimStatus, PendingDeletion
from botapp.services.autodelete import DeletionSweep, Done, deletions_due_count
from botapp.services.delivery import deliveries_cut_off_settle
from botapp.telegram.gateway import Gateway
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import sweep_outcome


class CountedDeletionSweep(DeletionSweep):
    """The sweep, its recorded results counted for /metrics (a "retry" is a deletion not done yet)."""

    def record(self, results: list[Done]) -> tuple[int, int]:
        recorded = super().record(results)
        sends_count("deletion", (r.outcome for r in results))
        return recorded


def delete_due_messages(*, gateway: Gateway, dry_run: bool = False, batch_size: int = 500, time_budget: float = 50.0) -> Outcome:
    if dry_run:
        return Outcome(deletions_due_count(now=clock.now()), detail="deletions due")
    outcome = sweep_outcome(CountedDeletionSweep(gateway), batch_size=batch_size, time_budget=time_budget)
    # Then the deliveries runbot was killed in the middle of: their copies, found, are due by the
    # next run (after the sweep, so that a bug in this rare path never holds every deletion back).
    found, removed = deliveries_cut_off_settle(gateway=gateway)
    if found or removed:
        outcome.detail = f"{outcome.detail}; cut-off deliveries: {found} found, {removed} with nothing sent"
    return outcome


def deletion_due_next():
    """When the earliest pending deletion is due (the partial index `deletion_due`), for the wake-up."""
    pending = PendingDeletion.objects.filter(status=ClaimStatus.PENDING)
    return pending.order_by("delete_at").values_list("delete_at", flat=True).first()


job_register(
    Job(
        "delete_due_messages",
        delete_due_messages,
        {"minute": "*"},
        "Delete auto-delete messages that are due",
        needs_gateway=True,
        wakes_on="deletion",
        due_next=deletion_due_next,
    )
)
