from celery import signals as celery_signals
from django.apps import AppConfig
from django.db.models.signals import post_migrate

from botapp import signals


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Background jobs"

    def ready(self):
        # here: the jobs, receivers and schedules import models, which load once the registry is ready
        import scheduler.jobs  # noqa: F401 - registers every job
        from scheduler import receivers
        from scheduler.schedules import schedules_install

        post_migrate.connect(schedules_install, sender=self, dispatch_uid="scheduler.schedules_install")
        # botapp announces; the scheduler acts (botapp never imports scheduler).
        signals.broadcast_queued.connect(receivers.broadcast_sender_wake, dispatch_uid="scheduler.broadcast_sender_wake")
        signals.work_scheduled.connect(receivers.work_wake, dispatch_uid="scheduler.work_wake")
        signals.broadcast_test_requested.connect(receivers.broadcast_test_queue, dispatch_uid="scheduler.broadcast_test_queue")
        signals.backups_requested.connect(receivers.backups_queue, dispatch_uid="scheduler.backups_queue")
        # Heartbeats of the worker and beat processes, for the dashboard and the jobs page.
        celery_signals.worker_ready.connect(receivers.worker_heartbeat_start, dispatch_uid="scheduler.worker_heartbeat")
        celery_signals.worker_shutdown.connect(receivers.worker_heartbeat_stop, dispatch_uid="scheduler.worker_heartbeat_stop")
        celery_signals.beat_init.connect(receivers.beat_heartbeat_start, dispatch_uid="scheduler.beat_heartbeat")
