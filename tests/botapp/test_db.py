"""row_by: a lookup by a unique column, compiled once, returns what `.first()` returns."""

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
