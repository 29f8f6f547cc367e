from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Background jobs"

    def ready(self):
        import scheduler.jobs  # noqa: F401 - registers every job
        from scheduler.schedules import schedules_install

        post_migrate.connect(schedules_install, sender=self, dispatch_uid="scheduler.schedules_install")
