import os

from django.conf import settings
from django.core.cache import caches

from config.celery import app
from tests.conftest import SUITE_REDIS_URL
from tests.processes import redis_url_of_worker


def test_each_xdist_worker_gets_the_redis_database_below_the_previous_one():
    assert redis_url_of_worker("redis://127.0.0.1:6379/15", "gw0") == "redis://127.0.0.1:6379/15"
    assert redis_url_of_worker("redis://127.0.0.1:6379/15", "gw1") == "redis://127.0.0.1:6379/14"
    assert redis_url_of_worker("redis://127.0.0.1:6379/0", "gw1") == "redis://127.0.0.1:6379/15"  # wraps
    assert redis_url_of_worker("redis://127.0.0.1:6379", "gw2") == "redis://127.0.0.1:6379/14"  # no number: db 0
    assert redis_url_of_worker("redis://:secret@cache:6380/4?ssl_cert_reqs=none", "gw1") == (
        "redis://:secret@cache:6380/3?ssl_cert_reqs=none"
    )


def test_this_process_s_cache_broker_and_subprocesses_use_its_worker_s_redis_database():
    """Under pytest-xdist (make test), each worker's Redis is its own; with -n 0, the suite's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    assert settings.REDIS_URL == (redis_url_of_worker(SUITE_REDIS_URL, worker) if worker else SUITE_REDIS_URL)
    assert os.environ["REDIS_URL"] == settings.REDIS_URL  # what manage.py, celery and bench/ subprocesses get
    assert settings.CACHES["default"]["LOCATION"] == settings.REDIS_URL
    assert caches["default"]._servers == [settings.REDIS_URL]
    if "CELERY_BROKER_URL" not in os.environ:  # else the broker is a Redis named on its own
        assert app.conf.broker_url == settings.CELERY_BROKER_URL == settings.REDIS_URL
