"""botapp/db.py: row_by (a lookup by a unique column, compiled once, returns what `.first()` returns),
row_insert and row_update (one row written as the ORM writes it), ids_update and ids_delete."""

import pytest

from botapp.db import row_by
from botapp.models import StoredFile, TelegramUser
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db


def fields(obj):
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_row_by_returns_the_row_first_returns_json_fields_converted():
    stored = StoredFile.objects.create(source_chat_id=STORAGE, message_ids=[5, 6, 7], title="Report")
    found = row_by(StoredFile, "share_id", stored.share_id)
    assert found is not None and not found._state.adding
    assert found.message_ids == [5, 6, 7]  # JSON, not its text
    assert fields(found) == fields(StoredFile.objects.filter(share_id=stored.share_id).first())


def test_row_by_binds_each_value_and_finds_nothing_as_none():
    for telegram_id in (11, 12):
        TelegramUser.objects.create(telegram_id=telegram_id, first_name=f"U{telegram_id}")
    assert row_by(TelegramUser, "telegram_id", 11).first_name == "U11"
    assert row_by(TelegramUser, "telegram_id", 12).first_name == "U12"  # the second call reuses the SQL
    assert row_by(TelegramUser, "telegram_id", 13) is None
    found = row_by(TelegramUser, "telegram_id", 12)
    found.first_name = "Renamed"
    found.save(update_fields=["first_name"])  # a model instance like any other
    assert TelegramUser.objects.get(telegram_id=12).first_name == "Renamed"


def test_row_by_refuses_a_column_that_is_not_unique():
    with pytest.raises(ValueError, match="not unique"):
        row_by(TelegramUser, "first_name", "Ann")


def test_ids_update_and_ids_delete_touch_exactly_those_rows():
    from datetime import timedelta

    from botapp import clock
    from botapp.db import ids_delete, ids_update
    from botapp.models import ClaimStatus, PendingDeletion

    now = clock.now()
    rows = [PendingDeletion.objects.create(chat_id=100 + i, message_ids=[i], delete_at=now) for i in range(5)]
    ids = [r.pk for r in rows]
    assert ids_update(PendingDeletion, ids[:3], status=ClaimStatus.CLAIMED, lease_until=now + timedelta(minutes=5)) == 3
    claimed = PendingDeletion.objects.filter(status=ClaimStatus.CLAIMED)
    assert sorted(claimed.values_list("pk", flat=True)) == ids[:3]
    assert all(r.lease_until == now + timedelta(minutes=5) for r in claimed)
    assert ids_update(PendingDeletion, [], status=ClaimStatus.PENDING) == 0
    assert ids_delete(PendingDeletion, ids[1:4]) == 3
    assert sorted(PendingDeletion.objects.values_list("pk", flat=True)) == [ids[0], ids[4]]
    assert ids_delete(PendingDeletion, []) == 0


def test_row_insert_saves_what_create_saves_and_sets_the_primary_key():
    from botapp import clock
    from botapp.db import row_insert
    from botapp.models import ClaimStatus, PendingDeletion

    now = clock.now()
    values = dict(chat_id=7, message_ids=[1, 2], delete_at=now, share_id="abc", status=ClaimStatus.DELIVERING, after_id=9)
    made = row_insert(PendingDeletion(delivery_key="k1", **values))
    created = PendingDeletion.objects.create(delivery_key="k2", **values)
    assert made.pk is not None and not made._state.adding and made.pk != created.pk
    stored = fields(PendingDeletion.objects.get(pk=made.pk))
    assert stored == fields(made)  # defaults (created_at, attempts, notice_due) written as the object has them
    assert {k: v for k, v in stored.items() if k not in ("id", "delivery_key", "created_at")} == {
        k: v
        for k, v in fields(PendingDeletion.objects.get(pk=created.pk)).items()
        if k not in ("id", "delivery_key", "created_at")
    }


def test_row_update_changes_the_row_only_where_its_conditions_hold():
    from botapp import clock
    from botapp.db import row_update
    from botapp.models import ClaimStatus, PendingDeletion

    row = PendingDeletion.objects.create(chat_id=7, message_ids=[], delete_at=clock.now(), status=ClaimStatus.DELIVERING)
    other = PendingDeletion.objects.create(chat_id=8, message_ids=[], delete_at=clock.now(), status=ClaimStatus.DELIVERING)
    assert (
        row_update(PendingDeletion, row.pk, where={"status": ClaimStatus.DELIVERING}, message_ids=[4, 5], status="pending") == 1
    )
    assert row_update(PendingDeletion, row.pk, where={"status": ClaimStatus.DELIVERING}, message_ids=[6]) == 0  # no longer
    row.refresh_from_db()
    other.refresh_from_db()
    assert (row.message_ids, row.status) == ([4, 5], ClaimStatus.PENDING)
    assert (other.message_ids, other.status) == ([], ClaimStatus.DELIVERING)


def _health_checks(monkeypatch):
    """The "SELECT 1" health checks Django runs (each call of is_usable), counted; the check itself is real."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    checks = []
    real = DatabaseWrapper.is_usable
    monkeypatch.setattr(DatabaseWrapper, "is_usable", lambda self: checks.append(1) or real(self))
    return checks


def _handled(results):
    from django.db import connection

    def handle(_):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            results.append(cursor.fetchone()[0])

    return handle


@pytest.mark.django_db(transaction=True)
def test_updates_on_a_quiet_connection_ask_postgresql_no_health_check_first(monkeypatch):
    import time

    from botapp.telegram.updates import _with_db

    checks, backends = _health_checks(monkeypatch), []
    for _ in range(3):
        _with_db(_handled(backends), None, time.monotonic())
    assert len(backends) == 3 and len(set(backends)) == 1  # one connection, kept
    assert checks == []


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_ended_is_checked_and_replaced_before_the_next_update(monkeypatch):
    import select
    import time

    import psycopg
    from django.db import connection

    from botapp.telegram.updates import _with_db

    checks, backends = _health_checks(monkeypatch), []
    _with_db(_handled(backends), None, time.monotonic())
    db = connection.settings_dict
    with psycopg.connect(
        dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None, host=db["HOST"], port=db["PORT"], autocommit=True
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [backends[0]])
    assert select.select([connection.connection.pgconn.socket], [], [], 10)[0]  # the server's goodbye arrived
    _with_db(_handled(backends), None, time.monotonic())
    assert checks == [1]  # asked, failed, replaced: the update ran on a new connection
    assert len(backends) == 2 and backends[1] != backends[0]


@pytest.mark.django_db(transaction=True)
def test_the_quiet_check_works_for_a_connection_whose_descriptor_is_past_1023(monkeypatch):
    """runbot holds many sockets (a Redis pool of up to 1024): select.select refuses such a descriptor."""
    import os
    import time

    from django.db import connection

    from botapp.telegram.updates import _with_db

    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        connection.close()
        checks, backends = _health_checks(monkeypatch), []
        _with_db(_handled(backends), None, time.monotonic())  # connects: its socket past 1100
        assert connection.connection.pgconn.socket > 1023
        _with_db(_handled(backends), None, time.monotonic())
        assert checks == [] and len(backends) == 2
    finally:
        connection.close()
        for fd in held:
            os.close(fd)


def test_the_installed_django_is_the_one_botapp_db_was_checked_against():
    """botapp/db.py uses Django internals (the connection's health-check flags, `_meta`): an
    upgrade must re-read them, then move DJANGO_CHECKED."""
    from botapp.db import DJANGO_CHECKED, RECHECK, django_version

    installed = django_version()
    assert installed == DJANGO_CHECKED, (
        f"Django {installed} is installed; botapp/db.py was checked against {DJANGO_CHECKED}. "
        "Re-read, then set DJANGO_CHECKED:\n  " + "\n  ".join(RECHECK)
    )
