"""/api/v1/allowed-users/: list, add, remove; bad input is a 400 naming the field."""

import pytest

from botapp.models import AllowedUser, AuditEntry

pytestmark = pytest.mark.django_db


def test_add_list_and_remove_allowed_users(api):
    client = api()
    added = client.post("/api/v1/allowed-users/", {"telegram_ids": [1001, 2002, 1001], "note": "beta"}, format="json")
    assert added.status_code == 201 and added.json() == {"added": 2, "already": 0}
    again = client.post("/api/v1/allowed-users/", {"telegram_ids": [1001]}, format="json")
    assert again.json() == {"added": 0, "already": 1}
    listed = client.get("/api/v1/allowed-users/").json()["results"]
    assert [(u["telegram_id"], u["note"]) for u in listed] == [(1001, "beta"), (2002, "beta")]
    assert client.get("/api/v1/allowed-users/1001/").json()["telegram_id"] == 1001
    assert client.delete("/api/v1/allowed-users/1001/").status_code == 204
    assert client.delete("/api/v1/allowed-users/1001/").status_code == 404
    assert list(AllowedUser.objects.values_list("telegram_id", flat=True)) == [2002]
    assert AuditEntry.objects.filter(action="allowlist.remove").exists()


def test_bad_ids_are_refused_naming_the_field_and_nothing_is_added(api):
    client = api()
    for body in ({"telegram_ids": [1001, -5]}, {"telegram_ids": []}, {"telegram_ids": "1001"}, {}):
        answer = client.post("/api/v1/allowed-users/", body, format="json")
        assert answer.status_code == 400 and "telegram_ids" in answer.json(), body
    assert not AllowedUser.objects.exists()


def test_a_read_only_token_cannot_change_the_list(api):
    answer = api(scopes="read").post("/api/v1/allowed-users/", {"telegram_ids": [1001]}, format="json")
    assert answer.status_code == 403 and not AllowedUser.objects.exists()
