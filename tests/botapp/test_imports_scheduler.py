"""`import_users scheduled_messages.db`: the scheduled-message system's database (shared/seeds/003),
built here with the tables its SQLAlchemy models create in SQLite, becomes Courier's subscribers
and scheduled messages; its files come along, and a message already due is sent at once."""

import io
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from botapp import clock
from botapp.models import Broadcast, Subscriber, SubscriberMessage, TelegramUser
from scheduler.jobs.registry import job_run
from tests.factories import met_user

pytestmark = pytest.mark.django_db

# What SQLAlchemy's create_all writes for the document's two models (String, JSON, DateTime, Boolean).
DDL = """
CREATE TABLE scheduled_messages (
    id VARCHAR NOT NULL,
    target_user_id JSON,
    message VARCHAR NOT NULL,
    scheduled_timestamp DATETIME NOT NULL,
    file_paths JSON,
    is_sent BOOLEAN,
    created_at DATETIME,
    PRIMARY KEY (id)
);
CREATE TABLE subscribed_users (
    user_id VARCHAR NOT NULL,
    chat_id VARCHAR NOT NULL,
    chat_name VARCHAR NOT NULL,
    created_at DATETIME,
    PRIMARY KEY (user_id),
    UNIQUE (chat_id)
);
CREATE INDEX idx_scheduled_messages_is_sent ON scheduled_messages(is_sent);
"""


def sqlalchemy_time(moment: datetime) -> str:
    """How SQLAlchemy keeps a DateTime in SQLite: naive (UTC here), with microseconds."""
    return moment.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def old_database(tmp_path, subscribers, messages):
    (tmp_path / "uploads").mkdir(exist_ok=True)
    path = tmp_path / "scheduled_messages.db"
    conn = sqlite3.connect(path)
    conn.executescript(DDL)
    conn.executemany("INSERT INTO subscribed_users VALUES (?, ?, ?, ?)", subscribers)
    conn.executemany("INSERT INTO scheduled_messages VALUES (?, ?, ?, ?, ?, ?, ?)", messages)
    conn.commit()
    conn.close()
    return path


def run(path, *args):
    out = io.StringIO()
    call_command("import_users", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_subscribers_and_pending_messages_with_their_files_are_imported_once(tmp_path, telegram, media):
    ann = met_user(telegram)
    now = clock.now()
    (tmp_path / "uploads" / "550e8400_abc123_doc.pdf").parent.mkdir()
    (tmp_path / "uploads" / "550e8400_abc123_doc.pdf").write_bytes(b"%PDF the brochure")
    path = old_database(
        tmp_path,
        subscribers=[
            ("660e9511-f39c-52e5-b827-557766551111", "123456789", "JohnDoe", "2025-12-04 12:00:00.000000"),
            ("user-abc-123", str(ann.telegram_id), "ann", sqlalchemy_time(now - timedelta(days=3))),
            ("user-group", "-1001234567890", "A group", None),
        ],
        messages=[
            (
                "550e8400-e29b-41d4-a716-446655440000",
                '["user-abc-123", "user-def-456"]',
                "Hello! This is a scheduled message.",
                sqlalchemy_time(now + timedelta(hours=2)),
                '["uploads/550e8400_abc123_doc.pdf"]',
                0,
                "2025-12-04 15:20:00.000000",
            ),
            ("done-1", '["user-abc-123"]', "Sent long ago", "2025-01-01 09:00:00.000000", None, 1, None),
            (
                "due-1",
                '["660e9511-f39c-52e5-b827-557766551111"]',
                "Overdue",
                sqlalchemy_time(now - timedelta(minutes=1)),
                None,
                0,
                None,
            ),
            ("lost-file", '["user-abc-123"]', "Where is it", sqlalchemy_time(now), '["uploads/gone.pdf"]', 0, None),
            ("bad-json", "user-abc-123", "Not a list", sqlalchemy_time(now), None, 0, None),
            ("nobody", '["user-zzz"]', "To no one", sqlalchemy_time(now), None, 0, None),
        ],
    )

    dry = run(path, "--dry-run")
    assert "dry run" in dry and "3 read: 2 created" in dry and "2 scheduled (1 due now)" in dry
    assert not Subscriber.objects.exists() and not Broadcast.objects.exists()

    output = run(path)
    assert "subscribed_users: 3 read: 2 created, 0 already in Courier" in output
    assert "scheduled_messages: 6 read: 2 scheduled (1 due now), 1 sent before, 0 already in Courier" in output
    assert "1 recipients with no subscriber left out; 4 invalid" in output
    assert "invalid: subscribed_users rowid 3: -1001234567890 is a group or channel, not a user" in output
    assert "invalid: scheduled_messages rowid 4: file not found:" in output and "gone.pdf" in output
    assert "invalid: scheduled_messages rowid 5: target_user_id is not JSON" in output
    assert "invalid: scheduled_messages rowid 6: no subscriber has any of its recipients (user-zzz)" in output

    john = Subscriber.objects.get(subscriber_id="660e9511-f39c-52e5-b827-557766551111")
    assert (john.user.telegram_id, john.user.access_hash, john.chat_name) == (123456789, None, "JohnDoe")
    assert john.created_at == datetime(2025, 12, 4, 12, tzinfo=UTC) and john.user.joined_at == john.created_at
    assert Subscriber.objects.get(subscriber_id="user-abc-123").user == ann
    assert TelegramUser.objects.get(pk=ann.pk).access_hash == ann.access_hash

    brochure = SubscriberMessage.objects.get(message_id="550e8400-e29b-41d4-a716-446655440000")
    assert brochure.target_ids == ["user-abc-123", "user-def-456"]
    assert brochure.created_at == datetime(2025, 12, 4, 15, 20, tzinfo=UTC)
    message = brochure.broadcast
    assert (message.status, message.recipient_ids, message.text) == (
        "scheduled",
        [ann.telegram_id],
        "Hello! This is a scheduled message.",
    )
    assert message.scheduled_at == now + timedelta(hours=2)
    (attachment,) = message.attachments.all()
    assert (attachment.kind, attachment.file_name, attachment.upload.read()) == (
        "document",
        "550e8400_abc123_doc.pdf",
        b"%PDF the brochure",
    )
    assert SubscriberMessage.objects.get(message_id="due-1").broadcast.scheduled_at <= clock.now()

    again = run(path)
    assert "0 created, 2 already in Courier" in again and "0 scheduled (0 due now), 1 sent before, 2 already in Courier" in again
    assert Broadcast.objects.count() == 2


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_an_imported_message_already_due_is_sent_by_the_worker_at_once(tmp_path, telegram, gateway, media):
    ann = met_user(telegram)
    path = old_database(
        tmp_path,
        subscribers=[("user-abc-123", str(ann.telegram_id), "ann", None)],
        messages=[
            (
                "m1",
                '["user-abc-123"]',
                "Missed while we moved",
                sqlalchemy_time(clock.now() - timedelta(minutes=3)),
                None,
                0,
                None,
            )
        ],
    )
    run(path)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert [m.text for m in telegram.bot_messages(ann.telegram_id)] == ["Missed while we moved"]


def test_a_table_without_the_documents_columns_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "scheduled_messages.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE subscribed_users (user_id VARCHAR PRIMARY KEY, chat_id VARCHAR, chat_name VARCHAR, created_at DATETIME);"
        "CREATE TABLE scheduled_messages (id VARCHAR PRIMARY KEY, message TEXT);"
        "INSERT INTO subscribed_users VALUES ('u1', '5001', 'x', NULL);"
    )
    conn.close()
    with pytest.raises(CommandError, match="the scheduled_messages table has no target_user_id, scheduled_timestamp"):
        run(path)
    assert not Subscriber.objects.exists()
