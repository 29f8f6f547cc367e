"""The live counters: deliveries, verifications and bypasses of the day, and each file's deliveries,
counted in Redis on the hot path and flushed to the database exactly when they are shown or every
minute (botapp/services/stats.py)."""

from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from botapp import clock
from botapp.models import DailyStat, StoredFile
from botapp.services import stats
from botapp.services.stats import counters_flush, delivery_count, stat_increment, stat_today
from botapp.telegram.gateway import TgUser
from scheduler.jobs.registry import job_run
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db


def db_totals(day=None):
    row = DailyStat.objects.filter(date=day or clock.today()).values("deliveries", "verifications", "bypasses").first()
    return row or {"deliveries": 0, "verifications": 0, "bypasses": 0}


def test_a_delivery_counts_in_redis_and_a_flush_writes_it_once(chat, alice, conf, stored):
    chat(alice, f"/start {stored.share_id}")
    chat(TgUser(id=1002, first_name="Bo"), f"/start {stored.share_id}")
    assert db_totals()["deliveries"] == 0 and StoredFile.objects.get().delivery_count == 0  # still in Redis

    assert counters_flush() == {"deliveries": 2, "files": 1}
    row = StoredFile.objects.get()
    assert row.delivery_count == 2 and abs(row.last_delivered_at - clock.now()) < timedelta(seconds=5)
    assert db_totals() == {"deliveries": 2, "verifications": 0, "bypasses": 0}

    assert counters_flush() == {}  # nothing waits: nothing added twice
    assert db_totals()["deliveries"] == 2 and StoredFile.objects.get().delivery_count == 2


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

    counters_flush()

    assert db_totals(yesterday) == {"deliveries": 1, "verifications": 0, "bypasses": 0}
    assert db_totals() == {"deliveries": 1, "verifications": 1, "bypasses": 0}
    assert StoredFile.objects.get().delivery_count == 2


def test_counts_add_to_what_the_database_holds_and_last_delivery_only_moves_forward(stored):
    later = clock.now()
    DailyStat.objects.create(date=clock.today(), deliveries=40)
    StoredFile.objects.filter(pk=stored.pk).update(delivery_count=7, last_delivered_at=later)
    delivery_count(stored_id=stored.pk, at=later - timedelta(minutes=5))  # recorded late, by a slow process

    counters_flush()

    row = StoredFile.objects.get()
    assert (row.delivery_count, row.last_delivered_at) == (8, later)
    assert db_totals()["deliveries"] == 41


def test_two_flushes_holding_the_same_batch_commit_it_once(stored):
    client = stats._redis()
    delivery_count(stored_id=stored.pk, at=clock.now())
    first = stats.batch_take(client=client)
    delivery_count(stored_id=stored.pk, at=clock.now())  # made meanwhile: waits for the next batch
    second = stats.batch_take(client=client)  # another flush finds the first one's batch, unfinished
    assert first == second

    assert stats.batch_commit(client=client, batch=first[0], counts=first[1]) == {"deliveries": 1, "files": 1}
    assert stats.batch_commit(client=client, batch=second[0], counts=second[1]) == {}  # claimed by the first: rolled back
    assert StoredFile.objects.get().delivery_count == 1

    assert counters_flush() == {"deliveries": 1, "files": 1}
    assert StoredFile.objects.get().delivery_count == 2 and db_totals()["deliveries"] == 2


def test_a_flush_that_fails_leaves_its_batch_to_the_next(stored, monkeypatch):
    stat_increment(field="verifications")
    apply = stats._apply

    def broken(counts):
        apply(counts)  # the rows are written...
        raise RuntimeError("connection lost")  # ...and the transaction never commits

    monkeypatch.setattr(stats, "_apply", broken)
    with pytest.raises(RuntimeError):
        counters_flush()
    assert db_totals()["verifications"] == 0

    monkeypatch.setattr(stats, "_apply", apply)
    stat_increment(field="verifications")
    assert counters_flush() == {"verifications": 1, "files": 0}  # the unfinished batch first
    assert counters_flush() == {"verifications": 1, "files": 0}
    assert db_totals()["verifications"] == 2


def test_a_delivery_is_counted_without_a_query(stored):
    at = clock.now()
    with CaptureQueriesContext(connection) as ctx:
        delivery_count(stored_id=stored.pk, at=at)
    assert ctx.captured_queries == []
    waiting = {k.decode(): v.decode() for k, v in stats._redis().hgetall(stats._key(stats.PENDING)).items()}
    assert waiting == {
        f"day|{clock.today().isoformat()}|deliveries": "1",
        f"file|{stored.pk}|n": "1",
        f"file|{stored.pk}|at": at.isoformat(),
    }


def test_without_redis_counts_go_straight_to_the_database(stored, monkeypatch, caplog):
    dead = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    monkeypatch.setattr(stats, "_redis", lambda: dead)

    delivery_count(stored_id=stored.pk, at=clock.now())
    stat_increment(field="bypasses")

    assert db_totals() == {"deliveries": 1, "verifications": 0, "bypasses": 1}
    assert StoredFile.objects.get().delivery_count == 1
    assert "cache unreachable (counters go straight to the database)" in caplog.text
    assert counters_flush() == {}  # logged, nothing lost: the counts are in the database already
    assert stat_today() == {"deliveries": 1, "verifications": 0, "bypasses": 1}


def test_a_cache_in_the_process_counts_in_the_database(stored, monkeypatch):
    """The sandbox (CACHE_URL=locmemcache://): one process, no Redis."""
    monkeypatch.setattr(stats, "_redis", lambda: None)
    delivery_count(stored_id=stored.pk, at=clock.now())
    assert db_totals()["deliveries"] == 1 and StoredFile.objects.get().delivery_count == 1
    assert counters_flush() == {}


def test_the_minute_job_flushes_and_its_dry_run_only_counts(stored):
    delivery_count(stored_id=stored.pk, at=clock.now())
    stat_increment(field="verifications")

    dry = job_run("flush_counters", trigger="test", dry_run=True)
    assert (dry.processed, dry.detail) == (2, "waiting: 1 deliveries, 1 verifications, 0 bypasses, 1 files")
    assert db_totals()["deliveries"] == 0

    outcome = job_run("flush_counters", trigger="test")
    assert (outcome.processed, outcome.detail) == (2, "added 1 deliveries, 1 verifications, 0 bypasses, 1 files")
    assert db_totals() == {"deliveries": 1, "verifications": 1, "bypasses": 0}


@pytest.fixture
def operator(client, django_user_model, plain_http):
    client.force_login(django_user_model.objects.create_superuser("op", "op@example.com", "pw"))
    return client


def test_admin_pages_show_the_counts_waiting_in_redis(operator, stored):
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
