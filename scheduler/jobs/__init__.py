"""Background jobs. Importing this package registers every job in `registry.JOBS`, in this order."""

from scheduler.jobs import broadcast_send, broadcasts, claims, deletions, housekeeping, retention, sequence_send, tokens  # noqa: F401
