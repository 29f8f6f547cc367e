"""The clients of the systems Courier replaces, calling it as their documents say
(shared/seeds/003: the scheduled-message API; 004: the scheduler statistics) with one header more:
the same paths, fields, answers and status codes, and the same rows and sender as /api/v1/."""

import re
import uuid
from datetime import UTC, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import include, path
from rest_framework.test import APIClient

from api.compat.urls import compat_urlpatterns
from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment, Subscriber, SubscriberMessage, TelegramUser
from botapp.services.subscribers import subscriber_create
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, met_user

pytestmark = pytest.mark.django_db
SEED003_PATHS = ("/schedule-message", "/subscribe-user", "/pending-messages", "/subscribed-users", "/legacy/")
NAIVE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")  # how seed 003 writes a time: UTC, no zone
JS_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")  # JavaScript's toISOString


def naive(moment):
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def files_kept(media):
    return sorted(p.name for p in media.rglob("*") if p.is_file())


# --- the token ------------------------------------------------------------------------------------------


def test_every_path_wants_a_courier_token_and_its_scope(api, plain_http):
    anonymous = APIClient()
    for where in (*SEED003_PATHS, "/api/messages/scheduler/stats"):
        for method in ("get", "post"):
            response = getattr(anonymous, method)(where)
            assert response.status_code == 401, (method, where, response)
            assert response.json() == {"detail": "Authentication credentials were not provided."}
    reader, writer = api("read"), api("write")
    assert reader.post("/subscribe-user", {"chat_id": "1", "chat_name": "a"}).status_code == 403
    assert writer.get("/subscribed-users").status_code == 403
    assert reader.get("/subscribed-users").status_code == 200


# --- POST /subscribe-user -----------------------------------------------------------------------------------


def test_subscribe_user_as_the_documents_curl_registers_a_user_courier_never_met(api):
    client = api()
    response = client.post(
        "/subscribe-user", '{\n    "chat_id": "123456789",\n    "chat_name": "JohnDoe"\n  }', content_type="application/json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert list(body) == ["user_id", "chat_id", "chat_name", "created_at"]
    assert uuid.UUID(body["user_id"]) and (body["chat_id"], body["chat_name"]) == ("123456789", "JohnDoe")
    assert NAIVE.match(body["created_at"]) and body["created_at"] == naive(clock.now())
    user = TelegramUser.objects.get(telegram_id=123456789)
    assert (user.first_name, user.access_hash, user.state) == ("JohnDoe", None, "active")  # reached by id, no hash

    again = client.post("/subscribe-user", {"chat_id": "123456789", "chat_name": "Johnny"})
    assert again.status_code == 400 and again.json() == {"detail": "User with this chat_id already exists"}
    assert client.get("/subscribed-users").json() == [body]


def test_a_user_courier_knows_keeps_their_hash_names_and_state_when_subscribed(api, telegram):
    ann = met_user(telegram, first_name="Ann", state="stopped")
    body = api().post("/subscribe-user", {"chat_id": ann.telegram_id, "chat_name": "ann_w"}).json()
    assert body["chat_id"] == str(ann.telegram_id) and body["chat_name"] == "ann_w"
    fresh = TelegramUser.objects.get(pk=ann.pk)
    assert (fresh.access_hash, fresh.first_name, fresh.state) == (ann.access_hash, "Ann", "stopped")


def test_bad_subscriptions_get_field_errors_and_write_nothing(api):
    client = api()
    cases = {
        "group": ({"chat_id": "-1001234567890", "chat_name": "A group"}, "chat_id", "is a group or channel, not a user"),
        "name": ({"chat_id": "@johndoe", "chat_name": "JohnDoe"}, "chat_id", "is not a Telegram user id"),
        "missing": ({"chat_id": "123"}, "chat_name", "This field is required."),
        "null": ({"chat_id": None, "chat_name": "x"}, "chat_id", "This field may not be null."),
    }
    for case, (body, field, words) in cases.items():
        response = client.post("/subscribe-user", body)
        assert response.status_code == 400, case
        assert words in response.json()[field][0], (case, response.json())
    broken = client.post("/subscribe-user", "{", content_type="application/json")
    assert broken.status_code == 400 and "JSON parse error" in broken.json()["detail"]
    assert not Subscriber.objects.exists() and not TelegramUser.objects.exists()


# --- POST /schedule-message ---------------------------------------------------------------------------------


@pytest.fixture
def subscribers(db):
    """The subscribers the document's examples name, as its database holds them (imported)."""
    return [
        subscriber_create(chat_id=1001, chat_name="One", subscriber_id="user-123"),
        subscriber_create(chat_id=1002, chat_name="Two", subscriber_id="user-456"),
    ]


def test_schedule_message_as_the_documents_curl(api, subscribers, media):
    client = api()
    response = client.post(
        "/schedule-message",
        {
            "target_user_id": "user-123,user-456",
            "message": "Hello from the scheduler!",
            "scheduled_timestamp": "2025-12-05T10:30:00Z",  # the document's: past now, so due at once
            "files": [
                SimpleUploadedFile("document.pdf", b"%PDF-1.4 doc", content_type="application/pdf"),
                SimpleUploadedFile("image.jpg", b"\xff\xd8\xff jpeg", content_type="image/jpeg"),
            ],
        },
        format="multipart",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert list(body) == ["id", "target_user_id", "message", "scheduled_timestamp", "file_paths", "is_sent", "created_at"]
    assert uuid.UUID(body["id"])
    assert body["target_user_id"] == ["user-123", "user-456"] and body["message"] == "Hello from the scheduler!"
    assert body["scheduled_timestamp"] == "2025-12-05T10:30:00" and body["is_sent"] is False
    # Names in Courier's storage: its own (botapp/models/uploads.py), with the files' extensions.
    assert [p.startswith("attachments/") and p.rsplit(".", 1)[-1] for p in body["file_paths"]] == ["pdf", "jpg"]
    assert sorted(files_kept(media)) == sorted(p.rsplit("/", 1)[-1] for p in body["file_paths"])
    assert NAIVE.match(body["created_at"])

    # The same rows as /api/v1/messages/ makes: a scheduled message to the subscribers' Telegram ids.
    message = Broadcast.objects.get()
    assert (message.kind, message.status, message.recipient_ids) == ("message", "scheduled", [1001, 1002])
    assert message.scheduled_at.isoformat() == "2025-12-05T10:30:00+00:00" and message.api_client == client.record.name
    assert [a.kind for a in message.attachments.all()] == ["document", "document"]  # as the old sendDocument
    assert api("read").get(f"/api/v1/messages/{message.pk}/").json()["user_ids"] == [1001, 1002]

    pending = client.get("/pending-messages")
    assert pending.status_code == 200 and pending.json() == [body]


def test_a_time_without_a_zone_is_utc_and_one_with_a_zone_is_turned_to_utc(api, subscribers):
    client = api()
    for given, shown in (("2030-01-01T09:00:00", "2030-01-01T09:00:00"), ("2030-01-01T09:00:00+02:00", "2030-01-01T07:00:00")):
        body = client.post(
            "/schedule-message", {"target_user_id": "user-123", "message": "Hi", "scheduled_timestamp": given}, format="multipart"
        ).json()
        assert body["scheduled_timestamp"] == shown, given
        assert naive(Broadcast.objects.get(subscriber_message__message_id=body["id"]).scheduled_at) == shown


def test_bad_messages_get_the_documents_400_or_field_errors_and_keep_nothing(api, subscribers, media):
    client = api()

    def post(**changes):
        form = {"target_user_id": "user-123", "message": "Hi", "scheduled_timestamp": "2030-01-01T09:00:00Z", **changes}
        form = {k: v for k, v in form.items() if v is not None}
        if "files" not in form:
            form["files"] = [SimpleUploadedFile("a.pdf", b"%PDF", content_type="application/pdf")]
        return client.post("/schedule-message", form, format="multipart")

    invalid = post(scheduled_timestamp="tomorrow at nine")
    assert invalid.status_code == 400 and invalid.json()["detail"].startswith("Invalid timestamp format")
    assert post(scheduled_timestamp="2030-13-01T09:00:00").json()["detail"].startswith("Invalid timestamp format")
    unknown = post(target_user_id="user-123, user-999,user-998")
    assert unknown.status_code == 400 and unknown.json() == {
        "target_user_id": ["No subscriber has these ids: user-999, user-998."]
    }
    assert post(target_user_id=" , ").json() == {"target_user_id": ["List at least one subscriber id."]}
    assert post(message=None).json() == {"message": ["This field is required."]}
    assert post(scheduled_timestamp=None).json() == {"scheduled_timestamp": ["This field is required."]}
    empty = post(files=[SimpleUploadedFile("empty.pdf", b"", content_type="application/pdf")])
    assert empty.status_code == 400 and "files" in empty.json()
    json_body = client.post(
        "/schedule-message", {"target_user_id": "user-123", "message": "Hi", "scheduled_timestamp": "2030-01-01"}
    )
    assert json_body.status_code == 415 and "detail" in json_body.json()
    assert not Broadcast.objects.exists() and not SubscriberMessage.objects.exists()
    assert files_kept(media) == []


def test_text_is_plain_text_as_the_old_system_sent_it(api, subscribers):
    text = "Price < 5 & >2 <b>not bold</b> &amp; as typed"
    body = (
        api()
        .post(
            "/schedule-message",
            {"target_user_id": "user-123", "message": text, "scheduled_timestamp": "2030-01-01T09:00:00Z"},
            format="multipart",
        )
        .json()
    )
    assert body["message"] == text and body["file_paths"] is None
    assert Broadcast.objects.get().text == "Price &lt; 5 &amp; &gt;2 &lt;b&gt;not bold&lt;/b&gt; &amp;amp; as typed"


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_message_scheduled_just_past_is_sent_at_once_by_the_worker_to_its_subscribers(api, telegram, gateway, media):
    client = api()
    ann, bob = met_user(telegram), met_user(telegram)
    ids = [
        client.post("/subscribe-user", {"chat_id": str(u.telegram_id), "chat_name": u.first_name}).json()["user_id"]
        for u in (ann, bob)
    ]
    just_past = naive(clock.now() - timedelta(seconds=2))  # as seed 003's clients write it: UTC, no zone
    created = client.post(
        "/schedule-message",
        {
            "target_user_id": ",".join(ids),
            "message": "Report <attached> & due",
            "scheduled_timestamp": just_past,
            "files": [SimpleUploadedFile("report.pdf", b"%PDF report", content_type="application/pdf")],
        },
        format="multipart",
    )
    assert created.status_code == 200, created.json()

    job_run("send_broadcasts", trigger="test", gateway=gateway)  # no clock moved: it is due already

    for user in (ann, bob):
        (received,) = telegram.bot_messages(user.telegram_id)
        assert (received.file.name, received.text) == ("report.pdf", "Report <attached> & due")
    assert client.get("/pending-messages").json() == []
    assert SubscriberMessage.objects.get().broadcast.status == "done"


def test_pending_messages_leave_out_sent_and_cancelled_ones_and_courier_own(api, subscribers):
    client = api()
    form = {"target_user_id": "user-456", "message": "Later", "scheduled_timestamp": "2030-01-01T09:00:00Z"}
    kept, sent, cancelled = (client.post("/schedule-message", form, format="multipart").json() for _ in range(3))
    Broadcast.objects.filter(subscriber_message__message_id=sent["id"]).update(status=Broadcast.Status.DONE)
    Broadcast.objects.filter(subscriber_message__message_id=cancelled["id"]).update(status=Broadcast.Status.CANCELLED)
    BroadcastFactory(kind=Broadcast.Kind.MESSAGE, status=Broadcast.Status.SCHEDULED)  # made through /api/v1/
    assert [m["id"] for m in client.get("/pending-messages").json()] == [kept["id"]]


# --- GET / under LEGACY_API_PREFIX, and anything else -------------------------------------------------------------


def test_the_root_is_under_the_prefix_and_slash_stays_the_console(api, plain_http):
    client = api("read")
    root = client.get("/legacy/")
    assert root.status_code == 200 and root.json() == {
        "message": "Scheduled Message API",
        "endpoints": {
            "POST /schedule-message": "Schedule a new message",
            "POST /subscribe-user": "Subscribe a new user",
            "GET /pending-messages": "Get all pending messages",
            "GET /subscribed-users": "Get all subscribed users",
        },
    }
    assert client.get("/legacy").json() == root.json()
    assert client.get("/legacy/subscribed-users").status_code == 200  # every path under the prefix too
    assert client.get("/subscribed-users/").status_code == 200  # a trailing slash as the old API took it
    missing = client.get("/legacy/nothing-here")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    console = client.get("/")
    assert console.status_code == 302 and "/login/" in console["Location"]


urlpatterns = [path("", include(compat_urlpatterns(prefix="/ops/scheduled/")))]


@pytest.mark.urls(__name__)
def test_an_operator_sets_the_prefix(api, plain_http):
    client = api("read")
    assert client.get("/ops/scheduled/").json()["message"] == "Scheduled Message API"
    assert client.get("/ops/scheduled/pending-messages").json() == []
    assert client.get("/legacy/").status_code == 404


def test_an_empty_prefix_serves_the_root_nowhere():
    names = [p.name for p in compat_urlpatterns(prefix="")]
    assert "compat-root" not in names and "compat-schedule-message" in names


# --- shared/seeds/004: GET /api/messages/scheduler/stats ------------------------------------------------------


def test_scheduler_stats_in_the_dashboards_shape(api):
    client = api("read")
    empty = client.get("/api/messages/scheduler/stats")
    assert empty.status_code == 200
    body = empty.json()
    assert body["success"] is True and JS_ISO.match(body["timestamp"])
    assert body["stats"] == {"pendingCount": 0, "earliestScheduled": None, "latestScheduled": None}

    first, last = clock.now() + timedelta(hours=1), clock.now() + timedelta(hours=5, milliseconds=250)
    for when in (first, last):
        BroadcastFactory(kind=Broadcast.Kind.MESSAGE, status=Broadcast.Status.SCHEDULED, scheduled_at=when)
    stats = client.get("/api/messages/scheduler/stats").json()["stats"]
    ours = client.get("/api/v1/scheduler/stats/").json()
    assert stats["pendingCount"] == ours["pending"] == 2
    assert stats["earliestScheduled"] == first.strftime("%Y-%m-%dT%H:%M:%S.") + f"{first.microsecond // 1000:03d}Z"
    assert stats["latestScheduled"] == last.strftime("%Y-%m-%dT%H:%M:%S.") + f"{last.microsecond // 1000:03d}Z"
    assert list(client.get("/api/messages/scheduler/stats").json()) == ["success", "stats", "timestamp"]


def test_attachments_are_documents_whatever_their_type(api, subscribers, media):
    api().post(
        "/schedule-message",
        {
            "target_user_id": "user-123",
            "message": "Photo as a file",
            "scheduled_timestamp": "2030-01-01T09:00:00Z",
            "files": [SimpleUploadedFile("p.jpg", b"\xff\xd8\xff", content_type="image/jpeg")],
        },
        format="multipart",
    )
    assert list(BroadcastAttachment.objects.values_list("kind", flat=True)) == ["document"]
