"""The reaper: claims whose sweeper died (the lease ran out) are settled.

- A pending deletion goes back to the queue: deleting twice is harmless (at-least-once).
- A broadcast delivery or sequence message caught mid-send becomes `interrupted` and is never re-sent: the user may
  already have it, and a user-visible send happens at most once.
"""

from __future__ import annotations

from botapp import clock
from botapp.models import BroadcastDelivery, ClaimStatus, PendingDeletion, SequenceMessage
from scheduler.jobs.registry import Job, Outcome, job_register


def reap_expired_claims(*, gateway=None, dry_run: bool = False) -> Outcome:
    now = clock.now()
    deletions = PendingDeletion.objects.filter(status=ClaimStatus.CLAIMED, lease_until__lt=now)
    sends = BroadcastDelivery.objects.filter(status=BroadcastDelivery.Status.SENDING, lease_until__lt=now)
    steps = SequenceMessage.objects.filter(status=SequenceMessage.Status.SENDING, lease_until__lt=now)
    if dry_run:
        d, s = deletions.count(), sends.count() + steps.count()
        return Outcome(d + s, detail=f"would requeue {d} deletions and mark {s} sends interrupted")
    d = deletions.update(status=ClaimStatus.PENDING, lease_until=None)
    s = sends.update(status=BroadcastDelivery.Status.INTERRUPTED, lease_until=None, error="worker stopped mid-send")
    s += steps.update(status=SequenceMessage.Status.INTERRUPTED, lease_until=None, error="worker stopped mid-send")
    return Outcome(d + s, detail=f"requeued {d} deletions, {s} sends interrupted")


job_register(Job("reap_expired_claims", reap_expired_claims, {"minute": "*/5"}, "Settle claims whose worker died"))
