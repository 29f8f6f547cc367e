"""The broadcast delivery table's frequent queries each have an index (migration 0020 merged the two
partial indexes of `sending` rows into one): PostgreSQL's plan, with sequential scans priced out,
names the index and never scans the table (10,000,000 rows in production)."""

from datetime import timedelta
from importlib import import_module

import pytest
from django.db import connection, transaction

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery
from botapp.services.broadcasts import broadcasts_settled
from tests.factories import BroadcastDeliveryFactory, BroadcastFactory

Status = BroadcastDelivery.Status
TABLE = BroadcastDelivery._meta.db_table


@pytest.fixture
def rows(db):
    broadcast = BroadcastFactory(status=Broadcast.Status.SENDING)
    for n in range(30):
        sending = n % 3 == 0
        BroadcastDeliveryFactory(
            broadcast=broadcast,
            status=Status.SENDING if sending else Status.PENDING,
            lease_until=clock.now() - timedelta(minutes=n) if sending else None,
        )
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {TABLE}")
    return broadcast


def plan(sql: str, params=()) -> str:
    """The plan of a statement, sequential scans priced out (a few test rows would take one)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cur.fetchall())


def queryset_plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    return plan(sql, params)


def scans_of_table(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if f"Seq Scan on {TABLE}" in line]


def test_the_two_sending_indexes_are_one(rows):
    with connection.cursor() as cur:
        cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE])
        indexes = dict(cur.fetchall())
    assert "delivery_lease" not in indexes
    assert "(broadcast_id, lease_until) WHERE ((status)::text = 'sending'::text)" in indexes["delivery_sending"]


def test_the_reapers_query_walks_the_sending_index(rows):
    now = clock.now()
    text = queryset_plan(BroadcastDelivery.objects.filter(status=Status.SENDING, lease_until__lt=now).values("id"))
    assert "delivery_sending" in text, text
    assert not scans_of_table(text), text


def test_is_the_broadcast_done_uses_the_pending_and_sending_indexes(rows):
    """The check of broadcasts_finish and the reaper (`broadcasts_settled`): a status IN (pending,
    sending) matched neither partial index, and PostgreSQL scanned the table (1 s at 10M rows)."""
    text = queryset_plan(broadcasts_settled(broadcasts=Broadcast.objects.filter(pk=rows.pk)).values("id"))
    assert "delivery_sending" in text and "delivery_pending" in text, text
    assert not scans_of_table(text), text


def test_the_claim_walks_the_pending_index(rows):
    """The gap's statement of `courier_broadcast_claim` (migration 0022 runs it with EXECUTE: planned
    with its values, as here), the last gap of all: the walk from the sender's mark to the end."""
    gap = import_module("botapp.migrations.0022_broadcast_claim_function").GAP_SQL
    now = clock.now()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute(f"PREPARE gap_walk AS {gap}")
        try:
            cur.execute(
                "EXPLAIN EXECUTE gap_walk(%s, %s, %s, %s, %s, %s, %s)",
                [rows.pk, Status.PENDING.value, 0, 2**63 - 1, 200, now, now],
            )
            text = "\n".join(row[0] for row in cur.fetchall())
        finally:
            cur.execute("DEALLOCATE gap_walk")
    assert "delivery_pending" in text, text
    assert not scans_of_table(text), text
