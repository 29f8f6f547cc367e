"""Every input the API takes is checked at the boundary, as the admin and the bot check it: a
clear JSON error with the right status, never a 500, never a partial effect."""

import errno
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

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


# --- the API and web under faults --------------------------------------------------------------------------


def test_with_redis_down_the_api_keeps_answering_and_health_says_degraded(api, settings, client, monkeypatch, plain_http):
    from django.core.cache.backends.redis import RedisCache

    from botapp.cache import cache_answered

    reader = api("read", rate="2/min")
    dead = RedisCache("redis://127.0.0.1:1/0", {"OPTIONS": {"socket_connect_timeout": 0.2}})  # nothing listens there
    monkeypatch.setattr("api.authentication.ClientRateThrottle.cache", dead)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    try:
        assert [reader.get("/api/v1/users/").status_code for _ in range(3)] == [200, 200, 200]  # uncounted, not refused
        health = client.get("/health/")
        assert health.status_code == 200 and health.json()["status"] == "degraded" and health.json()["degraded"] == ["redis"]
    finally:
        cache_answered()


def test_a_deeply_nested_body_is_a_400(api):
    body = "[" * 50000 + "]" * 50000
    client = api()
    for path in ("/api/v1/messages/", "/api/v1/files/", "/api/v1/broadcasts/"):
        response = client.post(path, body, content_type="application/json")
        assert response.status_code == 400 and response.json() == {"detail": "The JSON body is nested too deeply to read."}
    nested_buttons = client.post(
        "/api/v1/messages/", {"send_at": later(), "recipients": "all", "text": "Hi", "buttons": body}, format="multipart"
    )
    assert nested_buttons.status_code == 400 and "buttons" in nested_buttons.json()


def test_the_api_root_lists_the_endpoints_and_every_other_path_is_a_json_404(api):
    reader = api("read")
    root = reader.get("/api/v1/")
    assert root.status_code == 200 and root.json()["endpoints"]["users"] == "http://testserver/api/v1/users/"
    assert reader.get("/api/v1/users/-5/").status_code == 404
    for path in ("/api/v1/users/-5/", "/api/v1/nothing-here/", "/api/v1/files/bad id!/"):
        response = APIClient().get(path)
        assert response.status_code == 404 and response.json()["detail"].startswith("No endpoint /api/v1/"), path
    assert APIClient().get("/api/v1/").status_code == 401  # not the admin's login page


def test_a_server_error_under_the_api_is_json(api, settings, monkeypatch):
    from django.test import RequestFactory

    from botapp.views import server_error

    response = server_error(RequestFactory().get("/api/v1/users/"))
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert server_error(RequestFactory().get("/files/")).status_code == 500


def test_user_ids_in_a_multipart_form_may_be_comma_separated(api, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    ann, bob = TelegramUserFactory(), TelegramUserFactory()
    client = api()
    response = client.post(
        "/api/v1/messages/",
        {"send_at": later(), "user_ids": f"{ann.telegram_id},{bob.telegram_id}", "text": "Hi"},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["user_ids"] == [ann.telegram_id, bob.telegram_id]
    wrong = client.post("/api/v1/messages/", {"send_at": later(), "user_ids": "1001;x", "text": "Hi"}, format="multipart")
    assert wrong.status_code == 400 and "user_ids" in wrong.json()


@pytest.mark.parametrize("error, status", [(errno.ENOSPC, 507), (errno.EROFS, 503)])
def test_an_upload_onto_a_full_or_read_only_storage_is_refused_and_leaves_no_file(
    api, settings, tmp_path, monkeypatch, error, status
):
    import os

    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MEDIA_ROOT = tmp_path
    written = []
    real_fdopen = os.fdopen

    class HalfWritten:
        """The file Django writes an upload to: part of it reaches the disk, then the disk is full."""

        def __init__(self, fd, mode):
            self.file = real_fdopen(fd, mode)

        def write(self, data):
            self.file.write(data[:10])
            self.file.flush()
            written.append(10)
            raise OSError(error, os.strerror(error))

        def close(self):
            self.file.close()

    monkeypatch.setattr("django.core.files.storage.filesystem.os.fdopen", HalfWritten)
    files = [SimpleUploadedFile("a.pdf", b"x" * 100_000, content_type="application/pdf")]
    response = api().post("/api/v1/messages/", {"send_at": later(), "recipients": "all", "files": files}, format="multipart")
    assert response.status_code == status and set(response.json()) == {"detail"}
    assert written and [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert not Broadcast.objects.exists()


# --- uploaded file names ----------------------------------------------------------------------------------


def stored_files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_file_name_of_300_characters_is_stored_under_a_generated_name_and_cut_for_display(api, settings, tmp_path):
    import io

    settings.MEDIA_ROOT = tmp_path
    name = "r" * 296 + ".pdf"
    sent = io.BytesIO(b"%PDF long")
    sent.name = name  # as a client sends it (Django's own SimpleUploadedFile would cut it first)
    files = [sent]
    response = api().post("/api/v1/messages/", {"send_at": later(), "recipients": "all", "files": files}, format="multipart")

    assert response.status_code == 201, response.content
    shown = response.json()["attachments"][0]["file_name"]
    assert len(shown) == 255 and shown.endswith("….pdf") and shown.startswith("rrrr")
    assert response.json()["notes"] == [f"Attachment 1: its file name was cut to 255 characters (it had {len(name)})."]
    [stored] = stored_files(tmp_path)
    assert stored.startswith("attachments/") and stored.endswith(".pdf") and "rrr" not in stored
    assert (tmp_path / stored).read_bytes() == b"%PDF long"


@pytest.mark.parametrize("name", [".htaccess", "page.html", "logo.svg", "shell.php", "x.pdf.js", "../../etc/passwd"])
def test_dotfiles_and_active_types_are_stored_inert_under_their_display_name(api, settings, tmp_path, name):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MEDIA_ROOT = tmp_path
    files = [SimpleUploadedFile(name, b"<?php echo 1; ?>", content_type="application/octet-stream")]
    response = api().post("/api/v1/messages/", {"send_at": later(), "recipients": "all", "files": files}, format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()["attachments"][0]["file_name"] == name.rsplit("/", 1)[-1]
    assert "notes" not in response.json()
    [stored] = stored_files(tmp_path)
    stem = stored.rsplit("/", 1)[-1]
    assert stored.startswith("attachments/") and stem.endswith(".bin") and not stem.startswith(".")
    assert name.rsplit("/", 1)[-1].lstrip(".").split(".")[0] not in stem
