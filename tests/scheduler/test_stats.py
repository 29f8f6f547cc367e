"""Scheduler statistics: what waits, what went out in the last 24 h, each job's last run; the same
figures on the admin's Background jobs page."""

from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.models import Broadcast
from scheduler.jobs.registry import JOBS
from scheduler.stats import scheduler_stats
from tests.factories import (
    BroadcastDeliveryFactory,
    BroadcastFactory,
    JobRunFactory,
    PendingDeletionFactory,
    SequenceMessageFactory,
)

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def test_pending_work_its_due_range_and_the_last_24_hours(django_assert_num_queries):
    now = clock.now()
    BroadcastFactory(status=Broadcast.Status.SCHEDULED, scheduled_at=now + 3 * HOUR)
    BroadcastFactory(status=Broadcast.Status.DRAFT, scheduled_at=now + 9 * HOUR)  # not started: not pending
    # Its counters as the preparation and the sender keep them: 4 rows made, 2 recorded sent.
    sending = BroadcastFactory(status=Broadcast.Status.SENDING, started_at=now - HOUR, total=4, sent=2)
    BroadcastDeliveryFactory.create_batch(2, broadcast=sending)
    BroadcastDeliveryFactory(broadcast=sending, status="sent", sent_at=now - 2 * HOUR)
    BroadcastDeliveryFactory(broadcast=sending, status="sent", sent_at=now - 30 * HOUR)  # older than a day
    SequenceMessageFactory(due_at=now + 5 * HOUR)
    SequenceMessageFactory(status="sent", sent_at=now - HOUR)
    PendingDeletionFactory(delete_at=now + 10 * HOUR)
    JobRunFactory(job="send_broadcasts", failed=3, processed=10, detail="1 batch(es)")
    JobRunFactory(job="send_broadcasts", failed=1, started_at=now - 2 * HOUR)
    JobRunFactory(job="cleanup_tokens", status="failed", error="Boom\ntrace", started_at=now - 25 * HOUR)

    with django_assert_num_queries(9):  # whatever the number of rows and jobs
        stats = scheduler_stats()

    assert stats.pending_by_kind == {"scheduled_broadcasts": 1, "broadcast_deliveries": 2, "sequence_messages": 1, "deletions": 1}
    assert stats.pending == 5
    assert (stats.earliest_due, stats.latest_due) == (now - HOUR, now + 10 * HOUR)
    assert (stats.sent_24h, stats.failed_24h, stats.failed_runs_24h) == (2, 4, 0)
    jobs = {j.job: j for j in stats.jobs}
    assert list(jobs) == list(JOBS)
    assert (jobs["send_broadcasts"].status, jobs["send_broadcasts"].processed, jobs["send_broadcasts"].failed) == ("ok", 10, 3)
    assert (jobs["cleanup_tokens"].status, jobs["cleanup_tokens"].error) == ("failed", "Boom")
    assert jobs["prune_job_runs"].last_run_at is None and jobs["prune_job_runs"].status == ""


def test_nothing_waiting_is_all_zeros():
    stats = scheduler_stats()
    assert (stats.pending, stats.earliest_due, stats.latest_due, stats.sent_24h, stats.failed_24h) == (0, None, None, 0, 0)


def test_the_jobs_page_shows_the_figures(admin_client, plain_http):
    BroadcastFactory(status=Broadcast.Status.SCHEDULED, scheduled_at=clock.now() + HOUR)
    response = admin_client.get(reverse("admin:scheduler_backgroundjob_changelist"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Sent (24 h)" in html and "1 scheduled broadcast or message" in html
    assert response.context["scheduler_stats"].pending == 1
