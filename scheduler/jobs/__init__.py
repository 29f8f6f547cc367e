"""Background jobs. Importing this package registers every job in `registry.JOBS`, in this order."""

from scheduler.jobs import (  # noqa: F401
    broadcast_send,
    broadcasts,
    claims,
    counters,
    deletions,
    housekeeping,
    retention,
    sequence_send,
    tokens,
)
