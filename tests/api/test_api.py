"""The HTTP API as a caller sees it: tokens, scopes, every endpoint, the errors, the rate limit."""

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from api.clients import apiclient_revoke, token_hash
from api.models import ApiClient
from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, StoredFile, TelegramUser
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, JobRunFactory, TelegramUserFactory, met_user

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def later(hours=1):
    return (clock.now() + timedelta(hours=hours)).isoformat()


# --- authentication and scopes ----------------------------------------------------------------------


def test_nothing_is_anonymous_and_a_wrong_or_revoked_token_is_401(api, plain_http):
    anonymous = APIClient()
    for path in ("/api/v1/messages/", "/api/v1/users/", "/api/v1/scheduler/stats/", "/api/v1/files/", "/api/v1/broadcasts/"):
        response = anonymous.get(path)
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Bearer courier_not-a-token")
    assert wrong.get("/api/v1/users/").json() == {"detail": "Unknown or revoked token."}
    basic = APIClient()
    basic.credentials(HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert basic.get("/api/v1/users/").status_code == 401

    client = api("read")
    assert client.get("/api/v1/users/").status_code == 200
    apiclient_revoke(client=client.record)
    assert client.get("/api/v1/users/").status_code == 401


def test_a_missing_scope_is_403(api):
    reader, writer = api("read"), api("write")
    assert reader.post("/api/v1/files/", {"message_ids": [1], "source_chat_id": -1001}).status_code == 403
    response = writer.get("/api/v1/users/")
    assert response.status_code == 403 and response.json() == {"detail": "This token lacks the read scope."}


def test_apiclient_create_prints_the_token_once_and_keeps_only_its_hash(capsys):
    call_command("apiclient_create", "crm", "--scopes", "read,write")
    token = capsys.readouterr().out.strip()
    client = ApiClient.objects.get(name="crm")
    assert token.startswith("courier_") and len(token) > 40
    assert client.token_hash == token_hash(token) and token not in str(client.__dict__)
    assert client.scope_set == {"read", "write"}
    with pytest.raises(CommandError, match="exists already"):
        call_command("apiclient_create", "crm")
    with pytest.raises(CommandError, match="Scopes are read and write"):
        call_command("apiclient_create", "other", "--scopes", "admin")


def test_each_client_has_its_own_rate_and_429_says_when_to_retry(api):
    slow, other = api("read", rate="3/min"), api("read")
    assert [slow.get("/api/v1/users/").status_code for _ in range(3)] == [200, 200, 200]
    refused = slow.get("/api/v1/users/")
    assert refused.status_code == 429 and 50 <= int(refused["Retry-After"]) <= 60
    assert other.get("/api/v1/users/").status_code == 200  # another client is not slowed down


# --- scheduled messages --------------------------------------------------------------------------------


def test_schedule_list_read_change_and_cancel_a_message(api, telegram):
    client = api()
    photo = telegram.file_id("photo", "sale.jpg")  # a file id Telegram gave the bot
    ann, bob = TelegramUserFactory(), TelegramUserFactory()
    created = client.post(
        "/api/v1/messages/",
        {
            "send_at": later(),
            "user_ids": [ann.telegram_id, bob.telegram_id],
            "text": "<b>Sale</b> today",
            "buttons": [[{"text": "Shop", "url": "https://shop.example"}]],
            "attachments": [{"kind": "photo", "file_id": photo}],
        },
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (
        body["status"] == "scheduled" and body["recipients"] == "users" and body["user_ids"] == [ann.telegram_id, bob.telegram_id]
    )
    assert body["buttons"] == [[{"text": "Shop", "url": "https://shop.example"}]]
    assert body["attachments"][0]["kind"] == "photo" and body["attachments"][0]["uploaded"]
    assert Broadcast.objects.get(pk=body["id"]).api_client == client.record.name
    message = f"/api/v1/messages/{body['id']}/"

    assert [m["id"] for m in client.get("/api/v1/messages/?status=scheduled").json()] == [body["id"]]
    assert client.get("/api/v1/messages/?status=done").json() == []
    assert client.get("/api/v1/messages/?status=nonsense").status_code == 400

    changed = client.patch(message, {"text": "Sale tomorrow", "user_ids": [ann.telegram_id]})
    assert (
        changed.status_code == 200
        and changed.json()["text"] == "Sale tomorrow"
        and changed.json()["user_ids"] == [ann.telegram_id]
    )
    assert changed.json()["attachments"][0]["file_id"] == photo  # untouched

    cancelled = client.post(f"{message}cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    late = client.patch(message, {"text": "again"})
    assert late.status_code == 400 and "has not started" in late.json()["status"][0]
    assert client.get("/api/v1/messages/999999/").status_code == 404


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_multipart_message_with_two_files_is_sent_and_its_results_read_back(api, telegram, gateway, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client = api()
    ann, bob = met_user(telegram), met_user(telegram)
    telegram.block(bob.telegram_id)
    created = client.post(
        "/api/v1/messages/",
        {
            "send_at": later(),
            "user_ids": [ann.telegram_id, bob.telegram_id],
            "text": "Brochure",
            "files": [
                SimpleUploadedFile("a.pdf", b"%PDF one", content_type="application/pdf"),
                SimpleUploadedFile("b.pdf", b"%PDF two", content_type="application/pdf"),
            ],
        },
        format="multipart",
    )
    assert created.status_code == 201, created.json()
    assert [(a["kind"], a["file_name"], a["uploaded"]) for a in created.json()["attachments"]] == [
        ("document", "a.pdf", False),
        ("document", "b.pdf", False),
    ]
    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    detail = client.get(f"/api/v1/messages/{created.json()['id']}/").json()
    assert detail["status"] == "done" and detail["progress"]["sent"] == 1 and detail["progress"]["blocked"] == 1
    assert [(r["telegram_id"], r["status"]) for r in detail["results"]] == [
        (ann.telegram_id, "sent"),
        (bob.telegram_id, "blocked"),
    ]
    assert [m.file.name for m in telegram.bot_messages(ann.telegram_id)] == ["a.pdf", "b.pdf"]
    assert telegram.bot_messages(ann.telegram_id)[0].text == "Brochure"  # the album's caption
    assert all(a["uploaded"] for a in detail["attachments"])


def test_bad_messages_get_field_errors(api, settings, tmp_path, telegram):
    settings.MEDIA_ROOT = tmp_path
    client = api()
    known = TelegramUserFactory()
    unknown = client.post("/api/v1/messages/", {"send_at": later(), "user_ids": [known.telegram_id, 77, 88], "text": "Hi"})
    assert unknown.status_code == 400
    assert unknown.json() == {"user_ids": ["Not users of the bot (they never wrote to it): 77, 88."]}

    past = client.post("/api/v1/messages/", {"send_at": (clock.now() - HOUR).isoformat(), "recipients": "all", "text": "Hi"})
    assert past.json() == {"send_at": ["This time is in the past."]}
    naive = client.post("/api/v1/messages/", {"send_at": "2030-01-01T10:00:00", "recipients": "all", "text": "Hi"})
    assert naive.status_code == 400 and "send_at" in naive.json()

    many = client.post(
        "/api/v1/messages/",
        {
            "send_at": later(),
            "recipients": "all",
            "text": "Hi",
            "attachments": [{"kind": "document", "file_id": telegram.file_id("document")}] * 51,
        },
    )
    assert many.status_code == 400 and many.json()["attachments"] == ["At most 50 attachments (got 51)."]
    secret = tmp_path / "secret.env"
    secret.write_text("SECRET_KEY=x")
    for file_id, error in [
        (str(secret), "Attachment 1: That is neither an http(s):// address nor a Telegram file id."),
        ("https://files.example/a.pdf", "Attachment 1: give a Telegram file id, not an address (or send the file itself)."),
        (
            telegram.file_id("photo"),
            "Attachment 1: That file id is a photo, not a document: choose the kind it is, or give another file.",
        ),
    ]:
        refused = client.post(
            "/api/v1/messages/",
            {"send_at": later(), "recipients": "all", "text": "Hi", "attachments": [{"kind": "document", "file_id": file_id}]},
        )
        assert refused.status_code == 400 and refused.json()["attachments"] == [error]

    huge = client.post(
        "/api/v1/messages/",
        {
            "send_at": later(),
            "recipients": "all",
            "files": [SimpleUploadedFile("big.jpg", b"x" * (10 * 1024 * 1024 + 1), content_type="image/jpeg")],
        },
        format="multipart",
    )
    assert huge.status_code == 400
    assert huge.json()["attachments"] == [
        "Attachment 1 (big.jpg): 10485761 bytes is over Telegram's limit for a photo (10485760 bytes)."
    ]
    buttons = client.post(
        "/api/v1/messages/",
        {"send_at": later(), "recipients": "all", "text": "Hi", "buttons": [[{"text": "x", "url": "ftp://x"}]]},
    )
    assert buttons.status_code == 400 and "is not a link" in buttons.json()["buttons"][0]
    nothing = client.post("/api/v1/messages/", {"send_at": later(), "recipients": "payload"})
    assert set(nothing.json()) == {"payload", "text"}
    spaced = client.post(
        "/api/v1/messages/", {"send_at": later(), "recipients": "payload", "payload": "spring sale", "text": "Hi"}
    )
    assert spaced.json() == {
        "payload": ["A start payload uses A-Z, a-z, 0-9, _ and - only (Telegram's deep links carry no other)."]
    }
    assert not Broadcast.objects.exists()


# --- users, stats, files, broadcasts ----------------------------------------------------------------------


def test_users_page_by_cursor_with_filters(api):
    client = api("read")
    early = [TelegramUserFactory(joined_at=clock.now() - 10 * HOUR, start_payload="spring") for _ in range(3)]
    TelegramUserFactory(state="blocked", start_payload="spring")
    late = TelegramUserFactory()
    first = client.get("/api/v1/users/?page_size=2").json()
    assert [u["telegram_id"] for u in first["results"]] == [u.telegram_id for u in early[:2]]
    second = client.get(first["next"]).json()
    assert [u["telegram_id"] for u in second["results"]][0] == early[2].telegram_id

    ids = lambda query: [u["telegram_id"] for u in client.get(f"/api/v1/users/?{query}").json()["results"]]  # noqa: E731
    assert ids("state=active&payload=spring") == [u.telegram_id for u in early]
    assert ids(f"joined_after={(clock.now() - HOUR).isoformat().replace('+', '%2B')}") == [
        u.telegram_id for u in TelegramUser.objects.filter(joined_at__gte=clock.now() - HOUR).order_by("id")
    ]
    assert client.get("/api/v1/users/?state=gone").status_code == 400
    one = client.get(f"/api/v1/users/{late.telegram_id}/")
    assert one.status_code == 200 and one.json()["state"] == "active"
    assert client.get("/api/v1/users/1/").status_code == 404


def test_scheduler_stats(api):
    BroadcastFactory(status=Broadcast.Status.SCHEDULED, scheduled_at=clock.now() + HOUR)
    JobRunFactory(job="send_broadcasts", processed=5, failed=2)
    stats = api("read").get("/api/v1/scheduler/stats/").json()
    assert stats["pending"] == 1 and stats["failed_24h"] == 2
    assert stats["earliest_due"] == stats["latest_due"] is not None
    jobs = {j["job"]: j for j in stats["jobs"]}
    assert (jobs["send_broadcasts"]["status"], jobs["send_broadcasts"]["processed"]) == ("ok", 5)


def test_files_register_storage_messages_and_return_the_deep_link(api, conf, settings):
    settings.STORAGE_CHANNEL_ID = "-1001000000001"
    client = api()
    created = client.post("/api/v1/files/", {"message_ids": [12, 13], "title": "Chapter 1"})
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["link"] == f"https://t.me/CourierBot?start={body['share_id']}" and body["source_chat_id"] == -1001000000001
    assert client.get("/api/v1/files/").json()["results"][0]["share_id"] == body["share_id"]
    assert client.get(f"/api/v1/files/{body['share_id']}/").json()["message_ids"] == [12, 13]
    problems = {
        "too many": (list(range(1, 202)), "A link holds at most 200 messages (got 201)."),
        "beyond Telegram's ids": (
            [99999999999999999999],
            "99999999999999999999 is not a Telegram message id (they go from 1 to 2,147,483,647).",
        ),
        "twice": ([3, 3], "Message 3 is listed twice: a link delivers each message once."),
        "none": ([], "Give a list of positive message ids, e.g. [12] or [12, 13, 14]."),
    }
    for ids, error in problems.values():
        refused = client.post("/api/v1/files/", {"message_ids": ids})
        assert refused.status_code == 400 and refused.json() == {"message_ids": [error]}
    assert StoredFile.objects.count() == 1


def test_a_files_own_link_settings_are_set_through_the_api(api, conf, settings):
    settings.STORAGE_CHANNEL_ID = "-1001000000001"
    client = api()
    body = client.post(
        "/api/v1/files/",
        {
            "message_ids": [7],
            "protect_content": True,
            "auto_delete_minutes": 15,
            "skip_verification": True,
            "expires_at": "2030-01-01T00:00:00Z",
        },
    ).json()
    stored = StoredFile.objects.get(share_id=body["share_id"])
    assert (stored.protect_content, stored.auto_delete_minutes, stored.skip_verification) == (True, 15, True)
    assert stored.expires_at.isoformat() == "2030-01-01T00:00:00+00:00" and body["expires_at"].startswith("2030-01-01")
    plain = StoredFile.objects.get(share_id=client.post("/api/v1/files/", {"message_ids": [8]}).json()["share_id"])
    assert (plain.protect_content, plain.auto_delete_minutes, plain.expires_at) == (None, None, None)  # as Bot settings
    too_long = client.post("/api/v1/files/", {"message_ids": [9], "auto_delete_minutes": 5000})
    assert too_long.status_code == 400 and "auto_delete_minutes" in too_long.json()


def test_broadcasts_start_progress_and_cancel(api, sender_wakeups):
    client = api()
    TelegramUserFactory.create_batch(3)
    bad = client.post("/api/v1/broadcasts/", {"title": "x", "text": "hi", "media_kind": "photo"})
    assert bad.status_code == 400 and "detail" in bad.json()
    draft = client.post(
        "/api/v1/broadcasts/", {"title": "News", "text": "Hello", "buttons": [[{"text": "Read", "url": "https://news.example"}]]}
    )
    assert draft.status_code == 201 and draft.json()["status"] == "draft"
    url = f"/api/v1/broadcasts/{draft.json()['id']}/"
    started = client.post(f"{url}start/")
    assert started.status_code == 200 and started.json()["status"] == "queued" and started.json()["progress"]["total"] == 3
    assert client.post(f"{url}start/").status_code == 400  # only a draft starts
    BroadcastDelivery.objects.filter(broadcast_id=draft.json()["id"]).update(status="sent")
    Broadcast.objects.filter(pk=draft.json()["id"]).update(sent=3)
    assert client.get(url).json()["progress"]["done"] == 3
    assert client.post(f"{url}cancel/").json()["status"] == "cancelled"
    assert [b["id"] for b in client.get("/api/v1/broadcasts/").json()] == [draft.json()["id"]]


def test_the_docs_page_is_for_clients_and_staff_only(api, admin_client, plain_http):
    assert APIClient().get("/api/v1/docs/").status_code in (401, 403)
    assert APIClient().get("/api/v1/schema/").status_code == 401
    page = admin_client.get("/api/v1/docs/")
    assert page.status_code == 200 and b"swagger-ui" in page.content
    assert api("read").get("/api/v1/schema/").status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/docs/", "/api/v1/schema/"])
def test_the_docs_and_schema_are_for_staff_with_the_api_permission_only(client, django_user_model, plain_http, path):
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("plain-staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(path).status_code == 403  # staff with no permissions at all

    staff.user_permissions.add(Permission.objects.get(codename="view_apiclient"))
    assert client.get(path).status_code == 200

    staff.is_active = False  # a disabled account's session is refused however it got one
    staff.save()
    assert client.get(path).status_code in (401, 403)


def test_the_admin_adds_a_client_shows_its_token_once_and_revokes_it(admin_client, plain_http):
    refused = admin_client.post(reverse("admin:api_apiclient_add"), {"name": "crm", "scopes": "admin", "rate": "fast"})
    assert set(refused.context["adminform"].form.errors) == {"scopes", "rate"}
    added = admin_client.post(
        reverse("admin:api_apiclient_add"), {"name": "crm", "scopes": "read, write", "rate": "600/min"}, follow=True
    )
    shown = [str(m) for m in added.context["messages"] if "shown once" in str(m)]
    token = shown[0].rsplit(" ", 1)[1]
    client = ApiClient.objects.get(name="crm")
    assert client.token_hash == token_hash(token) and client.scopes == "read,write" and client.rate == "600/min"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/users/").status_code == 200
    admin_client.post(reverse("admin:api_apiclient_changelist"), {"action": "revoke", "_selected_action": [client.pk]})
    assert api.get("/api/v1/users/").status_code == 401


def test_starting_a_large_broadcast_answers_with_its_rows_in_preparation(api, telegram, monkeypatch):
    """The first START_ROWS rows when it starts, the rest by the worker: `progress` says so."""
    from botapp.services import broadcasts
    from scheduler.jobs.registry import job_run
    from tests.factories import met_user

    monkeypatch.setattr(broadcasts, "START_ROWS", 2)
    for _ in range(5):
        met_user(telegram)
    client = api()
    pk = client.post("/api/v1/broadcasts/", {"title": "Big", "text": "Hello"}, format="json").json()["id"]

    progress = client.post(f"/api/v1/broadcasts/{pk}/start/").json()["progress"]
    assert (progress["total"], progress["preparing"], progress["audience_size"]) == (2, True, None)

    job_run("prepare_broadcasts", trigger="test")
    progress = client.get(f"/api/v1/broadcasts/{pk}/").json()["progress"]
    assert (progress["total"], progress["preparing"], progress["audience_size"]) == (5, False, None)
