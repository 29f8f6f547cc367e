"""python manage.py import_users: users of the bot an operator moved from."""

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp.models import ButtonClick, TelegramUser
from tests.factories import ButtonClickFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db

State = TelegramUser.State


def run(path, *args):
    out = StringIO()
    call_command("import_users", str(path), *args, stdout=out)
    return out.getvalue()


def snapshot():
    """Everything an import may write, as comparable values."""
    users = list(
        TelegramUser.objects.order_by("telegram_id").values_list(
            "telegram_id", "username", "first_name", "last_name", "language_code", "start_payload", "state", "joined_at"
        )
    )
    clicks = list(ButtonClick.objects.order_by("user__telegram_id", "button").values_list("user__telegram_id", "button", "count"))
    return users, clicks


def _line_of(path, text):
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def twice(path, *args):
    """Import twice: the second run must change nothing and say so."""
    first = run(path, *args)
    after_first = snapshot()
    second = run(path, *args)
    assert snapshot() == after_first
    return first, second


def test_csv_with_a_header_imports_once_and_reports_bad_lines(tmp_path):
    path = tmp_path / "users.csv"
    path.write_text(
        "user_id,username,first_name,joined_at,state\n"
        "101,@ann,Ann,2023-04-01T10:00:00Z,active\n"
        "102,,Bob,,blocked\n"
        "abc,x,y,,\n"
        "-1001234,chan,Channel,,\n"
        "101,ann,Ann again,,\n"
        "103,carl,Carl,not a date,\n"
    )
    first, second = twice(path)

    assert first.splitlines() == [
        "invalid: line 4: 'abc' is not a Telegram user id",
        "invalid: line 5: -1001234 is a group or channel, not a user",
        "invalid: line 7: 'not a date' is not a date (use ISO 8601, like 2024-05-01T12:00:00Z)",
        "repeated (skipped): line 6: the same user as line 2",
        "import_users: 6 read: 2 created, 0 updated, 1 skipped, 3 invalid",
    ]
    assert second.splitlines()[-1] == "import_users: 6 read: 0 created, 0 updated, 3 skipped, 3 invalid"
    ann = TelegramUser.objects.get(telegram_id=101)
    assert (ann.username, ann.first_name, ann.state) == ("ann", "Ann", State.ACTIVE)
    assert ann.joined_at == datetime(2023, 4, 1, 10, tzinfo=UTC)
    assert TelegramUser.objects.get(telegram_id=102).state == State.BLOCKED


def test_a_json_list_of_ids_objects_and_button_clicks(tmp_path):
    path = tmp_path / "users.json"
    path.write_text(
        json.dumps(
            [
                201,
                "202",
                {"id": 203, "first_name": "Dee"},
                {"user_id": 204, "button_clicks": {"channel": 3, "promo": {"count": 1, "clicked_at": "2024-01-02T00:00:00Z"}}},
                {"_id": 205, "button_clicks": ["channel"]},
                {"name": "no id here"},
            ],
            indent=1,
        )
    )
    first, second = twice(path)

    no_id_line = _line_of(path, '"name": "no id here"') - 1  # the line of its opening brace
    assert f"invalid: line {no_id_line} (item 6): no user id (one of id, user_id, _id, telegram_id, chat_id, userid)" in first
    assert first.splitlines()[-1] == "import_users: 6 read: 5 created, 0 updated, 0 skipped, 1 invalid"
    assert second.splitlines()[-1] == "import_users: 6 read: 0 created, 0 updated, 5 skipped, 1 invalid"
    assert snapshot()[1] == [(204, "channel", 3), (204, "promo", 1), (205, "channel", 1)]


def test_mongoexport_json_lines_and_json_array_of_a_codexbotz_users_collection(tmp_path):
    lines = tmp_path / "users.json"
    lines.write_text('{"_id":301}\n{"_id":{"$numberLong":"5123456789"}}\n{"_id":{"$numberInt":"302"}}\n\n{"_id":301}\n')
    first, second = twice(lines)
    assert first.splitlines()[-1] == "import_users: 4 read: 3 created, 0 updated, 1 skipped, 0 invalid"
    assert second.splitlines()[-1] == "import_users: 4 read: 0 created, 0 updated, 4 skipped, 0 invalid"

    array = tmp_path / "users-array.json"  # mongoexport --jsonArray: one line
    array.write_text('[{"_id":301},{"_id":{"$numberLong":"303"}},{"_id":"x"}]')
    first, _ = twice(array)
    assert first.splitlines() == [
        "invalid: line 1 (item 3): 'x' is not a Telegram user id",
        "import_users: 3 read: 1 created, 0 updated, 1 skipped, 1 invalid",
    ]
    assert sorted(TelegramUser.objects.values_list("telegram_id", flat=True)) == [301, 302, 303, 5123456789]


def test_a_sqlite_database_with_a_users_table(tmp_path):
    path = tmp_path / "bot.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (user_id INTEGER PRIMARY KEY, username TEXT, lang TEXT, created_at INTEGER)")
    db.executemany(
        "INSERT INTO users VALUES (?, ?, ?, ?)",
        [(401, "dan", "de", 1700000000), (402, None, None, None), (-5, "group", None, None)],
    )
    db.commit()
    db.close()

    first, second = twice(path)

    assert first.splitlines() == [
        "invalid: users rowid -5: -5 is a group or channel, not a user",  # the rowid is user_id here
        "import_users: 3 read: 2 created, 0 updated, 0 skipped, 1 invalid",
    ]
    dan = TelegramUser.objects.get(telegram_id=401)
    assert (dan.username, dan.language_code, dan.joined_at) == ("dan", "de", datetime.fromtimestamp(1700000000, tz=UTC))


def test_what_courier_knows_wins_a_stopped_user_stays_stopped(tmp_path):
    stopped = TelegramUserFactory(telegram_id=501, state=State.STOPPED, first_name="Eve", username="")
    active = TelegramUserFactory(telegram_id=502, state=State.ACTIVE, first_name="Finn")
    ButtonClickFactory(user=active, button="channel", count=7)
    path = tmp_path / "users.csv"
    path.write_text(
        "id,username,first_name,state,joined,button_clicks\n"
        "501,eve_old,Old Eve,active,2020-01-01T00:00:00Z,\n"
        '502,,Old Finn,blocked,,"{""channel"": 1, ""promo"": 2}"\n'
    )

    first, second = twice(path)

    assert first.splitlines()[-1] == "import_users: 2 read: 0 created, 2 updated, 0 skipped, 0 invalid"
    assert second.splitlines()[-1] == "import_users: 2 read: 0 created, 0 updated, 2 skipped, 0 invalid"
    stopped.refresh_from_db()
    active.refresh_from_db()
    assert (stopped.state, stopped.first_name, stopped.username) == (State.STOPPED, "Eve", "eve_old")  # only the blank filled
    assert stopped.joined_at == datetime(2020, 1, 1, tzinfo=UTC)  # they really joined earlier
    assert (active.state, active.first_name) == (State.ACTIVE, "Finn")
    assert snapshot()[1] == [(502, "channel", 7), (502, "promo", 2)]  # Courier's own count is newer


def test_dry_run_counts_and_writes_nothing(tmp_path):
    TelegramUserFactory(telegram_id=601, username="")
    path = tmp_path / "users.csv"
    path.write_text("id,username\n601,zed\n602,yan\n")
    out = run(path, "--dry-run")
    assert out.splitlines()[-1] == "import_users (dry run, nothing written): 2 read: 1 created, 1 updated, 0 skipped, 0 invalid"
    assert list(TelegramUser.objects.values_list("telegram_id", "username")) == [(601, "")]


def test_many_users_are_written_in_chunks_with_a_few_queries_each(tmp_path):
    path = tmp_path / "users.csv"
    path.write_text("id\n" + "".join(f"{700000 + i}\n" for i in range(12_000)))
    with CaptureQueriesContext(connection) as queries:
        out = run(path)
    assert out.splitlines()[-1] == "import_users: 12000 read: 12000 created, 0 updated, 0 skipped, 0 invalid"
    # 3 chunks of at most 5000: a SELECT and an INSERT each, inside a savepoint (2 more); and the
    # import's one entry on the audit trail.
    assert len(queries) <= 3 * 4 + 1
    assert TelegramUser.objects.count() == 12_000


@pytest.mark.parametrize(
    "name,content,fmt,error",
    [
        ("missing.csv", None, None, "no such file"),
        ("users.txt", "id\n1\n", None, "cannot tell the format from the extension; give --format csv, json or sqlite"),
        ("users.csv", "name,username\nann,ann\n", None, "has no id column"),
        ("users.csv", "", None, "empty CSV file"),
        ("users.json", '[{"_id": 1}, {"_id": 2', None, "line 1: not valid JSON"),
        ("users.json", "id,name\n1,x\n", None, "line 1: not valid JSON"),
        ("users.db", "not a database at all", None, "not a SQLite database"),
        ("users.txt", "id\n1\n", "sqlite", "not a SQLite database"),
        ("users.csv", b"id,name\n1,\xff\xfe\n", None, "line 2 is not UTF-8 text"),
    ],
)
def test_a_bad_file_is_one_clear_error_and_writes_nothing(tmp_path, name, content, fmt, error):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    args = ["--format", fmt] if fmt else []
    with pytest.raises(CommandError, match=error) as failure:
        run(path, *args)
    assert "\n" not in str(failure.value)
    assert not TelegramUser.objects.exists()


def test_sqlite_without_a_users_table(tmp_path):
    path = tmp_path / "bot.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE members (id INTEGER)")
    db.close()
    with pytest.raises(CommandError, match="has no users table \\(tables: members\\)"):
        run(path)


@pytest.mark.slow
def test_the_command_exits_non_zero_with_one_line(tmp_path):
    path = tmp_path / "users.xlsx"
    path.write_text("x")
    done = subprocess.run(
        [sys.executable, "manage.py", "import_users", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"CommandError: {path}: cannot tell the format from the extension; give --format csv, json or sqlite"
    ]


def test_a_deeply_nested_file_or_line_and_a_timestamp_beyond_the_calendar_are_refused_in_one_line(tmp_path):
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 50000 + "]" * 50000)
    with pytest.raises(CommandError, match="nested too deeply to read as JSON"):
        run(nested)
    lines = tmp_path / "lines.json"
    lines.write_text('{"_id": 1001}\n' + "[" * 50000 + "]" * 50000 + "\n" + '{"_id": 1002, "joined": 99999999999999999}\n')
    out = run(lines)
    assert "line 2: nested too deeply to read as JSON" in out and "is not a date" in out
    assert list(TelegramUser.objects.values_list("telegram_id", flat=True)) == [1001]


def test_broken_clicks_json_and_overlong_fields_are_reported_not_cut_or_turned_into_keys(tmp_path):
    path = tmp_path / "users.csv"
    path.write_text(
        "id,username,first_name,button_clicks\n"
        '1101,ann,Ann,"{""join_channel"": 1"\n'
        f"1102,{'b' * 33},Bob,\n"
        f"1103,carl,{'C' * 129},\n"
        '1104,dee,Dee,"[""Join Channel""]"\n'
        "1105,eve,Eve,join_channel\n"
    )
    out = run(path)
    assert out.splitlines() == [
        "invalid: line 2: button_clicks: not valid JSON (Expecting ',' delimiter): '{\"join_channel\": 1'",
        f"invalid: line 3: username '{'b' * 33}' is longer than 32 characters",
        f"invalid: line 4: first_name '{'C' * 39}… (129 characters) is longer than 128 characters",
        "invalid: line 5: button_clicks: 'Join Channel' is not a click key (a-z, 0-9, _ and -, at most 64 characters)",
        "import_users: 5 read: 1 created, 0 updated, 0 skipped, 4 invalid",
    ]
    assert snapshot() == (
        [(1105, "eve", "Eve", "", "", "", State.ACTIVE, TelegramUser.objects.get().joined_at)],
        [(1105, "join_channel", 1)],
    )
