"""Background jobs. Importing this package registers every job in `registry.JOBS`."""

from scheduler.jobs import deletions, tokens  # noqa: F401
