"""What botapp announces, for whoever runs the background work to act on.

Dependencies flow one way: `scheduler` imports `botapp`, never the reverse (tests/test_layering.py
checks it). Where botapp needs a background process to do something now rather than at its next
scheduled run, it sends one of these signals; `scheduler` connects the receivers
(scheduler/receivers.py, in SchedulerConfig.ready).
"""

from datetime import datetime

from django.db import transaction
from django.dispatch import Signal

# A broadcast's deliveries were queued and committed: the sender may start now rather than at the
# next minute. Sent with send_robust from transaction.on_commit; kwargs: broadcast_id, send (wake the
# sender: False when the sender itself started it), preparing (rows are left for a worker to make,
# services/broadcasts.py: `broadcasts_prepare`). Receivers
# must not fail the operator's request: beat's periodic run is the fallback.
broadcast_queued = Signal()

# The operator asked for a test of a broadcast (to ADMIN_IDS). kwargs: broadcast_id. Sent with
# send(): a receiver that cannot queue the test (the broker is down) raises, and the admin says so.
broadcast_test_requested = Signal()

# The operator asked for backup copies of these stored files now. kwargs: share_ids. Sent with
# send(): a receiver that cannot queue the work (the broker is down) raises, and the admin says so.
backups_requested = Signal()

# Rows of due work were written: `work` (sequence | deletion | broadcast | premium), the earliest
# due time among them `due_at`. Sent with send_robust once committed (`work_scheduled_announce`):
# the scheduler wakes the job at that time rather than at its next minute (scheduler/wakeup.py).
# Receivers must never fail the write: beat's minute run is the fallback.
work_scheduled = Signal()


def work_scheduled_announce(*, work: str, due_at: datetime) -> None:
    """Announce `work_scheduled` when the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: work_scheduled.send_robust(sender=work, work=work, due_at=due_at))
