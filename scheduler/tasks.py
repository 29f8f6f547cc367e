"""Celery tasks: one thin task per job (`scheduler.<job name>`), fired by beat from the schedules
in the database, by the admin's "Run now", or by a wake-up at a due row (scheduler/wakeup.py)."""

import logging

from celery import shared_task

from botapp.config import admin_ids_load
from botapp.models import Broadcast
from botapp.services.broadcasts import broadcast_test_send
from scheduler import sender
from scheduler.dashboard import job_queued_taken
from scheduler.jobs.registry import JOBS, job_run
from scheduler.wakeup import wakeup_after_run, wakeup_current, wakeup_linger

log = logging.getLogger(__name__)


def _task_for(name: str):
    @shared_task(name=f"scheduler.{name}", acks_late=True, ignore_result=True, bind=True)
    def run(task, trigger: str = "beat", wakeup: str | None = None) -> str:
        if trigger == "admin":  # "Run now": the jobs page stops showing this press as queued
            job_queued_taken(name=name, press=task.request.id)
        if wakeup is not None and not wakeup_current(job=name, token=wakeup):
            return "superseded by an earlier wake-up"  # which does this work
        outcome = job_run(name, trigger=trigger, linger=wakeup_linger if wakeup is not None else None)
        wakeup_after_run(JOBS[name], outcome, token=wakeup)  # not after a failed run: beat retries
        if outcome.more:  # the budget ran out with work left: on at once, not at beat's next minute
            try:
                TASKS[name].apply_async(kwargs={"trigger": "more"}, retry=False)
            except Exception:  # the broker is down: beat's run picks it up
                log.warning("could not queue %s again; beat will run it", name, exc_info=True)
        return str(outcome)

    run.__doc__ = JOBS[name].summary
    return run


TASKS = {name: _task_for(name) for name in JOBS}


@shared_task(name="scheduler.send_broadcast_test", ignore_result=True)
def send_broadcast_test(broadcast_id: int) -> str:
    """The admin's "Send a test to the admins": through a worker, which holds a Telegram session."""
    broadcast = Broadcast.objects.get(pk=broadcast_id)
    results = broadcast_test_send(gateway=sender.worker_gateway(), broadcast=broadcast, chat_ids=admin_ids_load())
    return f"test of broadcast {broadcast_id} delivered to {sum(r['ok'] for r in results)} of {len(results)} admin(s)"


@shared_task(name="scheduler.backup_files", ignore_result=True)
def backup_files(share_ids: list[str]) -> str:
    """The admin's "Back up now": these files (those still without a backup) to the backup channel."""
    return str(job_run("backfill_backups", trigger="admin", gateway=sender.worker_gateway(), share_ids=share_ids))
