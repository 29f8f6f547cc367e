"""Every input the API takes is checked at the boundary, as the admin and the bot check it: a
clear JSON error with the right status, never a 500, never a partial effect."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import Broadcast, StoredFile
from tests.factories import TelegramUserFactory

pytestmark = pytest.mark.django_db

EMOJI = "😀"  # two UTF-16 units
TOO_LONG_TEXT = EMOJI * 3000  # 6,000 units as Telegram counts: over 4096


def later(hours=1):
    return (clock.now() + timedelta(hours=hours)).isoformat()


# --- one validator per kind of content ----------------------------------------------------------------


def test_a_scheduled_message_gets_the_html_and_placeholder_checks_broadcasts_get(api):
    client = api()
    TelegramUserFactory()
    script = client.post(
        "/api/v1/messages/",
        {"send_at": later(), "recipients": "all", "text": "Sale <script>alert(1)</script> now <b>50% off"},
        format="json",
    )
    assert script.status_code == 400
    assert script.json()["text"] == [
        "Line 1: <script> is not a tag Telegram supports.",
        "Line 1: </script> is not a tag Telegram supports.",
        "<b> is never closed.",
    ]
    personal = client.post("/api/v1/messages/", {"send_at": later(), "recipients": "all", "text": "Hi {first_name}"})
    assert personal.status_code == 400 and personal.json()["text"][0].startswith("{first_name} would reach users as written")
    # The same texts, through the broadcasts endpoint: the same answers.
    for text, first in [
        ("Sale <script>alert(1)</script> now <b>50% off", "Line 1: <script>"),
        ("Hi {first_name}", "{first_name}"),
    ]:
        refused = client.post("/api/v1/broadcasts/", {"title": "x", "text": text}, format="json")
        assert refused.status_code == 400 and refused.json()["text"][0].startswith(first)
    assert not Broadcast.objects.exists()


def test_the_api_refuses_3000_emoji_in_a_broadcast_and_in_a_scheduled_message(api):
    client = api()
    broadcast = client.post("/api/v1/broadcasts/", {"title": "x", "text": TOO_LONG_TEXT}, format="json")
    assert broadcast.status_code == 400 and "has 6000" in broadcast.json()["text"][0]
    send_at = (clock.now() + timedelta(hours=1)).isoformat()
    message = client.post("/api/v1/messages/", {"send_at": send_at, "recipients": "all", "text": TOO_LONG_TEXT}, format="json")
    assert message.status_code == 400 and "has 6000" in message.json()["text"][0]
    caption = client.post(
        "/api/v1/messages/",
        {"send_at": send_at, "recipients": "all", "text": EMOJI * 600, "attachments": [{"kind": "photo", "file_id": "x"}]},
        format="json",
    )
    assert caption.status_code == 400 and any("A caption" in e and "has 1200" in e for e in caption.json()["text"])
    assert not Broadcast.objects.exists()


def test_a_button_label_of_33_emoji_is_refused(api):
    response = api().post(
        "/api/v1/broadcasts/",
        {"title": "x", "text": "Hi", "buttons": [[{"text": EMOJI * 33, "url": "https://example.com"}]]},
        format="json",
    )
    assert response.status_code == 400 and "this one has 66" in str(response.json()["buttons"])


# --- numbers and ranges -----------------------------------------------------------------------------------


@pytest.mark.parametrize("chat_id", [-99999999999999999999, -1, 5, -1997852516353, -1000000000000])
def test_a_files_channel_out_of_telegrams_range_is_a_400_naming_the_range(api, chat_id):
    response = api().post("/api/v1/files/", {"message_ids": [1], "source_chat_id": chat_id}, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["source_chat_id"]
    assert not StoredFile.objects.exists()


def test_a_files_channel_in_range_is_stored(api, conf):
    response = api().post("/api/v1/files/", {"message_ids": [1], "source_chat_id": -1001234567890}, format="json")
    assert response.status_code == 201 and StoredFile.objects.get().source_chat_id == -1001234567890


def test_user_ids_beyond_telegrams_are_a_400_not_a_500(api):
    response = api().post("/api/v1/messages/", {"send_at": later(), "user_ids": [2**60, 10**30], "text": "Hi"}, format="json")
    assert response.status_code == 400 and set(response.json()["user_ids"]) == {"0", "1"}


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/users/99999999999999999999999/",
        "/api/v1/messages/99999999999999999999999/",
        "/api/v1/broadcasts/99999999999999999999999/",
    ],
)
def test_ids_beyond_the_database_are_a_json_404(api, path):
    response = api().get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
