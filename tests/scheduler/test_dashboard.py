"""The console's home page: user numbers, 30-day charts from the real rows, broadcasts being sent,
jobs that failed or missed their run, and the health of each process."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.services.health import heartbeat_record
from tests.factories import BroadcastFactory, DailyStatFactory, JobRunFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def test_the_dashboard_counts_users_and_charts_thirty_days(operator):
    TelegramUserFactory.create_batch(3)  # joined today
    TelegramUserFactory(state="blocked", joined_at=clock.now() - timedelta(days=2))
    TelegramUserFactory(state="stopped", joined_at=clock.now() - timedelta(days=40))  # before the chart
    DailyStatFactory(date=clock.today() - timedelta(days=1), deliveries=7, verifications=2, bypasses=1)

    response = operator.get(reverse("admin:index"))
    assert response.status_code == 200
    users = response.context["users"]
    assert (users["total"], users["by_state"]["active"], users["by_state"]["blocked"], users["new_today"]) == (5, 3, 1, 3)
    joined = json.loads(response.context["chart_users"])
    assert len(joined["labels"]) == 30 and joined["datasets"][0]["data"][-1] == 3 and joined["datasets"][0]["data"][-3] == 1
    assert sum(joined["datasets"][0]["data"]) == 4
    activity = {d["label"]: d["data"] for d in json.loads(response.context["chart_activity"])["datasets"]}
    assert (activity["deliveries"][-2], activity["verifications"][-2], activity["bypasses"][-2]) == (7, 2, 1)
    assert 'data-type="bar"' in response.content.decode() and 'data-type="line"' in response.content.decode()


def test_the_dashboard_shows_broadcasts_being_sent_and_job_problems(operator):
    BroadcastFactory(title="Autumn sale", status="sending", total=10, sent=4)
    BroadcastFactory(title="Old news", status="done", total=3, sent=3)
    JobRunFactory(job="cleanup_tokens", status="failed", error="ValueError: broken\n\ntrace")
    page = operator.get(reverse("admin:index")).content.decode()
    assert "Autumn sale" in page and "Old news" not in page
    assert "cleanup_tokens" in page and "failed: ValueError: broken" in page


def test_jobs_that_never_ran_are_not_called_on_time(operator):
    from django_celery_beat.models import PeriodicTask

    from scheduler.jobs.registry import JOBS

    PeriodicTask.objects.update(date_changed=clock.now())  # just installed by migrate: nothing missed yet
    assert "No job has run yet: they start with beat and a worker" in operator.get(reverse("admin:index")).content.decode()
    for name in JOBS:
        if name != "cleanup_tokens":
            JobRunFactory(job=name, status="ok")
    page = operator.get(reverse("admin:index")).content.decode()
    assert "Every job that ran did so on time and succeeded; 1 never ran yet: cleanup_tokens." in page
    JobRunFactory(job="cleanup_tokens", status="ok")
    assert "Every job ran on time and its last run succeeded." in operator.get(reverse("admin:index")).content.decode()


def test_health_lines_follow_the_heartbeats(operator):
    heartbeat_record(process="bot", name="bot-host")
    health = {line["name"]: line for line in operator.get(reverse("admin:index")).context["health"]}
    assert health["Bot (runbot)"]["ok"] and health["Bot (runbot)"]["text"] == "1 running"
    assert not health["Workers"]["ok"] and health["Workers"]["text"] == "not running"
    assert health["Redis"]["ok"] and health["Database"]["ok"] and health["Task queue"]["ok"]
