"""Background jobs. Importing this package registers every job in `registry.JOBS`, in this order."""

from scheduler.jobs import broadcasts, claims, deletions, tokens  # noqa: F401
