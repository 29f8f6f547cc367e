"""scheduler's answers to botapp's signals (botapp/signals.py); connected in SchedulerConfig.ready.

botapp never imports scheduler: it announces, and these receivers publish the Celery tasks or run
the jobs."""

from __future__ import annotations

import logging

from botapp.services.health import heartbeat_forget, heartbeat_start
from scheduler.jobs.registry import JOBS
from scheduler.tasks import TASKS, backup_files, send_broadcast_test
from scheduler.wakeup import wakeup_arm

log = logging.getLogger(__name__)


def broadcast_sender_wake(sender, *, broadcast_id: int, send: bool = True, preparing: bool = False, **kwargs) -> None:
    """Start sending now rather than at the next minute (`send`), and making the rest of its rows
    (`preparing`: an audience too large to queue at once); beat's schedules are the fallback."""
    jobs = {"send_broadcasts": ("sender", send), "prepare_broadcasts": ("preparer", preparing)}
    for name, (who, wanted) in jobs.items():
        if not wanted:
            continue
        try:
            TASKS[name].apply_async(kwargs={"trigger": "start"}, retry=False)
        except Exception:  # the broker is down: the periodic run picks it up
            log.warning("could not wake the broadcast %s for broadcast %s; beat will start it", who, broadcast_id, exc_info=True)


def work_wake(sender, *, work: str, due_at, **kwargs) -> None:
    """Wake the job that does `work` at `due_at` (scheduler/wakeup.py); never raises."""
    for job in JOBS.values():
        if job.wakes_on == work:
            wakeup_arm(job=job.name, due=due_at)


def broadcast_test_queue(sender, *, broadcast_id: int, **kwargs) -> None:
    """Queue the test for a worker, which holds a Telegram session. Raises when the broker is down."""
    send_broadcast_test.apply_async(args=[broadcast_id], retry=False)


def backups_queue(sender, *, share_ids: list[str], **kwargs) -> None:
    """Queue the backup copies for a worker, which holds a Telegram session. Raises when the broker is down."""
    backup_files.apply_async(args=[list(share_ids)], retry=False)


# --- Heartbeats of the Celery processes (botapp/services/health.py): the dashboard and the jobs
# page tell a running worker or beat from a stopped one. Connected in SchedulerConfig.ready.
_beating: dict[str, object] = {}


def worker_heartbeat_start(sender=None, **kwargs) -> None:
    """celery's worker_ready: beat until the worker shuts down."""
    name = getattr(sender, "hostname", "") or ""
    _beating["worker"] = (heartbeat_start(process="worker", name=name), name)


def worker_heartbeat_stop(sender=None, **kwargs) -> None:
    """celery's worker_shutdown: a worker stopped cleanly is gone at once, not stale later."""
    if entry := _beating.pop("worker", None):
        stop, name = entry
        stop.set()
        heartbeat_forget(process="worker", name=name)


def beat_heartbeat_start(sender=None, **kwargs) -> None:
    """celery's beat_init: beat for as long as beat runs (a stopped beat goes stale)."""
    _beating["beat"] = (heartbeat_start(process="beat"), "")
