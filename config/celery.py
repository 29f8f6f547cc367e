"""The Celery app: configured from Django settings (CELERY_*), tasks found in each app's tasks.py."""

import os

from celery import Celery
from celery.signals import setup_logging
from django.conf import settings
from django.utils.log import configure_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("courier")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def logging_from_django(**kwargs):
    """Worker and beat log like every other process: Django's LOGGING (root at LOG_LEVEL, to
    stderr). With a receiver here Celery leaves logging alone, so `--loglevel` has no effect."""
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
