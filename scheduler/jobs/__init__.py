"""Background jobs, one module per job (or family of jobs), named for what it does. Importing this
package registers every job in `registry.JOBS`, in this order: the jobs page lists them so, and
the sandbox runs the jobs that fell due during a `wait` so."""

# isort: off
from scheduler.jobs import (  # noqa: F401
    broadcast_send,
    broadcast_delete,
    claims,
    counters,
    deletions,
    housekeeping,
    premium_expiry,
    retention,
    sequence_send,
    tokens,
    backups,
    notices,
)
# isort: on
