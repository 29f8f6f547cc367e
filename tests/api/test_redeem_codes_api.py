"""/api/v1/redeem-codes/: codes made through the API are in that one answer only, and listed with
who redeemed them; bad input gets field errors."""

import pytest

from botapp.models import RedeemCode
from botapp.services.redeem import Redeem, code_hash, code_redeem
from tests.factories import TelegramUserFactory

pytestmark = pytest.mark.django_db


def test_codes_made_through_the_api_are_shown_once_and_listed_with_their_redemptions(api, conf):
    client = api()
    response = client.post("/api/v1/redeem-codes/", {"premium": "30d", "count": 2, "uses": 1}, format="json")
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    body = response.json()
    assert len(body["codes"]) == 2 and [i["premium_seconds"] for i in body["items"]] == [30 * 86400] * 2
    assert {c.code_hash for c in RedeemCode.objects.all()} == {code_hash(code=c) for c in body["codes"]}
    assert RedeemCode.objects.get(hint=body["codes"][0][:4]).created_by == f"api:{client.record.name}"

    user = TelegramUserFactory(telegram_id=4242)
    assert code_redeem(user=user, text=body["codes"][0]).result is Redeem.REDEEMED
    listing = client.get("/api/v1/redeem-codes/").json()["results"]
    assert [len(c["redemptions"]) for c in listing] == [1, 0]
    assert listing[0]["redemptions"][0]["telegram_id"] == 4242 and listing[0]["uses"] == 1
    assert all(body["codes"][0] not in str(c) for c in listing)  # the codes themselves are never shown again


def test_bad_input_gets_field_errors_and_reading_needs_no_write_scope(api, conf):
    client = api()
    response = client.post("/api/v1/redeem-codes/", {"premium": "soon", "count": 0}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"premium", "count"} and RedeemCode.objects.count() == 0
    reader = api(scopes="read")
    assert reader.get("/api/v1/redeem-codes/").status_code == 200
    assert reader.post("/api/v1/redeem-codes/", {"premium": "1d"}, format="json").status_code == 403
