"""python manage.py import_mongo: a file-store bot's MongoDB (shared/seeds/000, 001) from mongoexport
files, its schedulers' unfinished work done by Courier's own sweeps, on the in-memory Telegram."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from botapp import clock
from botapp.models import BotSettings, DailyTokenCount, PendingDeletion, TelegramUser
from botapp.telegram.gateway import TgUser
from scheduler.jobs.registry import job_run

pytestmark = pytest.mark.django_db

ALICE = 1001


def run(*args):
    out = StringIO()
    call_command("import_mongo", *map(str, args), stdout=out)
    return out.getvalue()


def date(moment) -> dict:
    """mongoexport's relaxed extended JSON for a date."""
    return {"$date": moment.isoformat().replace("+00:00", "Z")}


def long(n: int) -> dict:
    return {"$numberLong": str(n)}


def export(path, docs, *, array=False):
    """A collection as mongoexport writes it: JSON lines, or with --jsonArray one line."""
    path.write_text(json.dumps(docs) if array else "".join(json.dumps(d) + "\n" for d in docs))
    return path


@pytest.fixture
def old_bot_messages(telegram, gateway):
    """Alice started the old bot (the same account Courier now runs on) and it sent her two files:
    their message ids, as its pending_deletions hold them. Courier never saw her updates: it has
    no access hash for her, and reaches her by id alone."""
    telegram.users_meet([ALICE])
    return [gateway.send_text(ALICE, text).message_id for text in ("file 1", "file 2")]


@pytest.mark.django_db(transaction=True)  # the sweeps' pool threads read the imported rows
def test_a_pending_deletion_due_in_5_minutes_is_deleted_5_minutes_later_with_the_notice(
    tmp_path, telegram, gateway, old_bot_messages
):
    due = clock.now().replace(microsecond=0) + timedelta(minutes=5)
    export(tmp_path / "users.json", [{"_id": long(ALICE), "first_name": "Alice"}])
    export(
        tmp_path / "pending_deletions.json",
        [{"_id": {"$oid": "6761a0c2e4b0a1b2c3d4e5f6"}, "user_id": long(ALICE), "chat_id": long(ALICE),
          "message_ids": old_bot_messages, "delete_at": date(due), "unique_id": "abc123"}],
        array=True,
    )  # fmt: skip

    out = run(tmp_path)

    assert out.splitlines() == [
        "import_mongo: users: 1 read: 1 created, 0 updated, 0 skipped, 0 invalid",
        "pending_deletions: 1 read: 1 deletions scheduled, 0 already known, 0 with nothing to carry, 0 invalid",
    ]
    assert run(tmp_path).splitlines()[-1].startswith("pending_deletions: 1 read: 0 deletions scheduled, 1 already known")
    clock.clock_advance(due - clock.now() - timedelta(seconds=1))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert [m.text for m in telegram.bot_messages(ALICE)] == ["file 1", "file 2"]

    clock.clock_advance(timedelta(seconds=1))
    job_run("delete_due_messages", trigger="test", gateway=gateway)

    assert [m.text for m in telegram.bot_messages(ALICE)] == [BotSettings.load().deleted_notice_text]
    assert not PendingDeletion.objects.exists()  # done: the row goes, as the old bot removed its record


@pytest.mark.django_db(transaction=True)
def test_a_broadcast_with_a_deletion_time_is_deleted_when_due(tmp_path, telegram, gateway, old_bot_messages):
    due = clock.now().replace(microsecond=0) + timedelta(minutes=5)
    export(tmp_path / "users.json", [{"_id": ALICE}])
    export(
        tmp_path / "broadcasts.json",
        [
            {"_id": {"$oid": "6761a0c2e4b0a1b2c3d4e5f7"}, "message_ids": {str(ALICE): old_bot_messages[0]},
             "delete_at": date(due), "created_at": date(clock.now() - timedelta(hours=1))},
            {"_id": {"$oid": "6761a0c2e4b0a1b2c3d4e5f8"}, "message_ids": {str(ALICE): 1}},  # no deletion time
        ],
    )  # fmt: skip

    out = run(tmp_path / "users.json", tmp_path / "broadcasts.json")

    assert out.splitlines()[-1] == (
        "broadcasts: 2 read: 1 broadcast messages to delete, 0 already known, 1 with nothing to carry, 0 invalid"
    )
    clock.clock_advance(due - clock.now())
    job_run("delete_expired_broadcasts", trigger="test", gateway=gateway)
    assert [m.text for m in telegram.bot_messages(ALICE)] == ["file 2"]


def test_a_verified_user_with_a_valid_token_gets_files_without_verifying(tmp_path, chat, conf, stored):
    conf.verification_enabled = True
    conf.save()
    expires = clock.now().replace(microsecond=0) + timedelta(days=1)
    export(tmp_path / "users.json", [{"_id": long(ALICE)}, {"_id": long(1002)}])
    export(
        tmp_path / "tokens.json",
        [
            {"_id": {"$oid": "a1"}, "user_id": long(ALICE), "token": "t1", "status": "verified", "expires_at": date(expires)},
            {"_id": {"$oid": "a2"}, "user_id": long(1002), "token": "t2", "status": "verified",
             "expires_at": date(clock.now() - timedelta(minutes=1))},
            {"_id": {"$oid": "a3"}, "user_id": long(1002), "token": "t3", "status": "pending", "expires_at": date(expires)},
        ],
    )  # fmt: skip

    out = run(tmp_path)

    assert out.splitlines()[-1] == "tokens: 3 read: 1 users kept verified, 0 already known, 2 with nothing to carry, 0 invalid"
    assert TelegramUser.objects.get(telegram_id=ALICE).verified_until == expires
    alice = TgUser(id=ALICE, first_name="Alice")
    assert [e.text for e in chat(alice, f"/start {stored.share_id}") if e.action == "copy"] == ["Report", "Read me"]
    bob = TgUser(id=1002, first_name="Bob")
    assert chat(bob, f"/start {stored.share_id}")[0].text.startswith("Verify once to get your files")


def test_todays_token_counts_are_carried_and_older_days_are_not(tmp_path):
    today = clock.today()
    export(tmp_path / "users.json", [{"_id": ALICE}])
    export(
        tmp_path / "token_generator_count.json",
        [
            {"user_id": ALICE, "token_generated": 15, "date": today.isoformat()},
            {"user_id": ALICE, "token_generated": 4, "date": (today - timedelta(days=1)).isoformat()},
        ],
    )
    run(tmp_path)
    assert list(DailyTokenCount.objects.values_list("user__telegram_id", "date", "count")) == [(ALICE, today, 15)]


def test_bad_documents_are_listed_with_file_line_and_field_and_the_rest_imported(tmp_path):
    export(tmp_path / "users.json", [{"_id": ALICE}])
    export(
        tmp_path / "pending_deletions.json",
        [
            {"chat_id": ALICE, "message_ids": [5], "delete_at": date(clock.now())},
            {"chat_id": ALICE, "message_ids": "5", "delete_at": date(clock.now())},
            {"chat_id": ALICE, "message_ids": [5, 6]},
            {"message_ids": [7], "delete_at": date(clock.now())},
        ],
    )
    out = run(tmp_path)
    assert out.splitlines()[:3] == [
        "invalid: pending_deletions.json line 2: message_ids: not a list of message ids",
        "invalid: pending_deletions.json line 3: no delete_at",
        "invalid: pending_deletions.json line 4: no user (chat_id or user_id)",
    ]
    assert PendingDeletion.objects.count() == 1


@pytest.mark.parametrize(
    "name,content,error",
    [
        ("files.json", "[]", "files.json: not named after a collection Courier reads"),
        ("tokens.json", '[{"user_id": 1', "tokens.json: line 1: not valid JSON"),
    ],
)
def test_a_file_that_cannot_be_read_is_one_line_and_nothing_is_written(tmp_path, name, content, error):
    export(tmp_path / "users.json", [{"_id": ALICE}])
    (tmp_path / name).write_text(content)
    with pytest.raises(CommandError, match=error) as failure:
        run(tmp_path / "users.json", tmp_path / name)
    assert "\n" not in str(failure.value)
    assert not TelegramUser.objects.exists()
