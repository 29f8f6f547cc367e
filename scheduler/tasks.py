"""Celery tasks: one thin task per job (`scheduler.<job name>`), fired by beat from the schedules
in the database, or by the admin's "Run now"."""

from celery import shared_task

from scheduler.jobs.registry import JOBS, job_run


def _task_for(name: str):
    @shared_task(name=f"scheduler.{name}", acks_late=True, ignore_result=True)
    def run(trigger: str = "beat") -> str:
        return str(job_run(name, trigger=trigger))

    run.__doc__ = JOBS[name].summary
    return run


TASKS = {name: _task_for(name) for name in JOBS}
