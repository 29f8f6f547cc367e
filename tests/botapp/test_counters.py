"""The live counters: deliveries, verifications and bypasses of the day, and each file's deliveries,
counted as one row each in PostgreSQL on the hot path (in the transaction of what they count) and
added to the database's totals when they are shown or every minute (botapp/services/stats.py)."""

from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from botapp import clock
from botapp.models import CounterEntry, DailyStat, StoredFile
from botapp.services import stats
from botapp.services.stats import counters_flush, delivery_count, stat_increment, stat_today
from botapp.telegram.gateway import TgUser
from scheduler.jobs.registry import job_run
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db


def db_totals(day=None):
    row = DailyStat.objects.filter(date=day or clock.today()).values("deliveries", "verifications", "bypasses").first()
    return row or {"deliveries": 0, "verifications": 0, "bypasses": 0}


def test_a_delivery_is_counted_once_by_the_next_flush(chat, alice, conf, stored):
    chat(alice, f"/start {stored.share_id}")
    chat(TgUser(id=1002, first_name="Bo"), f"/start {stored.share_id}")
    assert db_totals()["deliveries"] == 0 and StoredFile.objects.get().delivery_count == 0  # waiting
    assert CounterEntry.objects.count() == 2

    assert counters_flush() == {"deliveries": 2, "files": 1}
    row = StoredFile.objects.get()
    assert row.delivery_count == 2 and abs(row.last_delivered_at - clock.now()) < timedelta(seconds=5)
    assert db_totals() == {"deliveries": 2, "verifications": 0, "bypasses": 0}
    assert not CounterEntry.objects.exists()

    assert counters_flush() == {}  # nothing waits: nothing added twice
    assert db_totals()["deliveries"] == 2 and StoredFile.objects.get().delivery_count == 2


def test_redis_restarted_empty_before_the_flush_loses_no_count(chat, conf, stored, telegram):
    """The probe of issue 21 lost half of them: Daily stats said 50 of 100 deliveries. FLUSHDB of the
    test Redis database is the restart (nothing there survives it: the cache, the limiter, the
    keys of any run sharing the database)."""
    users = [TgUser(id=20_000 + n, first_name=f"U{n}") for n in range(100)]
    client = redis.Redis.from_url(settings.REDIS_URL)
    for half in (users[:50], users[50:]):
        for user in half:
            chat(user, f"/start {stored.share_id}")
        client.flushdb()  # Redis restarted, empty, between these deliveries and the flush

    assert job_run("flush_counters", trigger="beat").processed == 100
    assert db_totals()["deliveries"] == 100
    assert StoredFile.objects.get().delivery_count == 100
    assert len(telegram.received()) == 100  # the deliveries it counts


def test_stats_command_shows_exact_counts_before_the_minute_job(chat, alice, conf, stored, telegram):
    chat(alice, f"/start {stored.share_id}")
    stat_increment(field="verifications")
    stat_increment(field="bypasses", by=2)

    (reply,) = chat(TgUser(id=ADMIN, first_name="Op"), "/stats")

    assert "Today: 1 deliveries, 1 verifications, 2 bypasses" in telegram.message(ADMIN, reply.message_ids[0]).text


def test_counts_go_to_the_day_they_happened_on(stored):
    delivery_count(stored_id=stored.pk, at=clock.now())
    yesterday = clock.today()
    clock.clock_advance(timedelta(days=1))
    delivery_count(stored_id=stored.pk, at=clock.now())
    stat_increment(field="verifications")

    assert counters_flush() == {"deliveries": 2, "verifications": 1, "files": 1}

    assert db_totals(yesterday) == {"deliveries": 1, "verifications": 0, "bypasses": 0}
    assert db_totals() == {"deliveries": 1, "verifications": 1, "bypasses": 0}
    row = StoredFile.objects.get()
    assert row.delivery_count == 2 and abs(row.last_delivered_at - clock.now()) < timedelta(seconds=5)  # the later day's


def test_counts_add_to_what_the_database_holds_and_last_delivery_only_moves_forward(stored):
    later = clock.now()
    DailyStat.objects.create(date=clock.today(), deliveries=40)
    StoredFile.objects.filter(pk=stored.pk).update(delivery_count=7, last_delivered_at=later)
    delivery_count(stored_id=stored.pk, at=later - timedelta(minutes=5))  # recorded late, by a slow process

    counters_flush()

    row = StoredFile.objects.get()
    assert (row.delivery_count, row.last_delivered_at) == (8, later)
    assert db_totals()["deliveries"] == 41


def test_a_count_is_one_insert_in_the_transaction_of_what_it_counts(stored):
    with CaptureQueriesContext(connection) as ctx:
        delivery_count(stored_id=stored.pk, at=clock.now())
    (query,) = ctx.captured_queries
    assert query["sql"].startswith(f'INSERT INTO "{CounterEntry._meta.db_table}"')

    with pytest.raises(RuntimeError), transaction.atomic():  # what it counted never committed: nor does the count
        delivery_count(stored_id=stored.pk, at=clock.now())
        raise RuntimeError("the delivery's transaction failed")
    assert CounterEntry.objects.count() == 1


def test_a_flush_that_fails_leaves_its_entries_to_the_next(stored, monkeypatch):
    stat_increment(field="verifications")
    apply = stats._apply

    def broken(days, files):
        apply(days, files)  # the totals are written...
        raise RuntimeError("connection lost")  # ...and the transaction never commits

    monkeypatch.setattr(stats, "_apply", broken)
    with pytest.raises(RuntimeError):
        counters_flush()
    assert db_totals()["verifications"] == 0 and CounterEntry.objects.count() == 1

    monkeypatch.setattr(stats, "_apply", apply)
    stat_increment(field="verifications")
    assert counters_flush() == {"verifications": 2}
    assert counters_flush() == {}
    assert db_totals()["verifications"] == 2


def test_a_flush_takes_a_big_backlog_in_batches(stored, monkeypatch):
    monkeypatch.setattr(stats, "BATCH", 7)
    for _ in range(19):
        delivery_count(stored_id=stored.pk, at=clock.now())
    stat_increment(field="bypasses")

    with CaptureQueriesContext(connection) as ctx:
        assert counters_flush() == {"deliveries": 19, "bypasses": 1, "files": 1}
    takes = [q for q in ctx.captured_queries if q["sql"].lstrip().startswith("WITH taken")]
    assert len(takes) == 3  # 7 + 7 + 6 entries: the last batch not full, nothing left
    assert db_totals() == {"deliveries": 19, "verifications": 0, "bypasses": 1}
    assert StoredFile.objects.get().delivery_count == 19


def test_the_minute_job_flushes_and_its_dry_run_only_counts(stored):
    delivery_count(stored_id=stored.pk, at=clock.now())
    stat_increment(field="verifications")

    dry = job_run("flush_counters", trigger="test", dry_run=True)
    assert (dry.processed, dry.detail) == (2, "waiting: 1 deliveries, 1 verifications, 0 bypasses, 1 files")
    assert db_totals()["deliveries"] == 0

    outcome = job_run("flush_counters", trigger="test")
    assert (outcome.processed, outcome.detail) == (2, "added 1 deliveries, 1 verifications, 0 bypasses, 1 files")
    assert db_totals() == {"deliveries": 1, "verifications": 1, "bypasses": 0}
    assert stat_today() == {"deliveries": 1, "verifications": 1, "bypasses": 0}


@pytest.fixture
def operator(client, django_user_model, plain_http):
    client.force_login(django_user_model.objects.create_superuser("op", "op@example.com", "pw"))
    return client


def test_admin_pages_show_the_counts_waiting(operator, stored):
    for _ in range(3):
        delivery_count(stored_id=stored.pk, at=clock.now())

    response = operator.get(reverse("admin:botapp_dailystat_changelist"))
    assert [(row.date, row.deliveries) for row in response.context["cl"].result_list] == [(clock.today(), 3)]

    delivery_count(stored_id=stored.pk, at=clock.now())
    response = operator.get(reverse("admin:botapp_storedfile_changelist"))
    assert [row.delivery_count for row in response.context["cl"].result_list] == [4]
    response = operator.get(reverse("admin:botapp_storedfile_change", args=[stored.pk]))
    assert response.context["original"].delivery_count == 4


@pytest.mark.django_db(transaction=True)
def test_flushes_racing_each_other_and_deliveries_add_everything_once():
    from tests.concurrency import run_in_threads
    from tests.factories import StoredFileFactory

    stored = StoredFileFactory()

    def deliver_and_flush():
        for _ in range(20):
            delivery_count(stored_id=stored.pk, at=clock.now())
            counters_flush()

    run_in_threads(deliver_and_flush, n=6)
    counters_flush()

    assert StoredFile.objects.get().delivery_count == 120
    assert db_totals()["deliveries"] == 120
    assert not CounterEntry.objects.exists()
