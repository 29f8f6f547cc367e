"""python manage.py import_users on a drip bot's SQLite database: its users with their join dates
and payloads, its button clicks, and its pending timed posts as sequence messages."""

import sqlite3
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import ButtonClick, SequenceMessage, TelegramUser
from scheduler.jobs.registry import job_run
from tests.botapp.seed_drip import sqlite_db
from tests.factories import ButtonClickFactory, SequenceFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db

# The seed drip bot's schema (python-telegram-bot + sqlite3): ISO 8601 UTC text from
# datetime.utcnow().isoformat(), one button_clicks row per click, a tasks row per timed post.
SCHEMA = """
CREATE TABLE users (
    user_id INTEGER PRIMARY KEY, username TEXT, first_name TEXT, timestamp_utc TEXT NOT NULL, start_payload TEXT
);
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, message_id INTEGER NOT NULL,
    due_utc TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending'
);
CREATE TABLE button_clicks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, button TEXT NOT NULL, clicked_at TEXT NOT NULL
);
"""


def iso(moment: datetime) -> str:
    """As the drip bot writes it: naive UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat()


def drip_db(path, *, users=(), tasks=(), clicks=(), schema=SCHEMA):
    return sqlite_db(
        path,
        schema,
        [
            ("INSERT INTO users VALUES (?, ?, ?, ?, ?)", users),
            ("INSERT INTO tasks (user_id, message_id, due_utc, status) VALUES (?, ?, ?, ?)", tasks),
            ("INSERT INTO button_clicks (user_id, button, clicked_at) VALUES (?, ?, ?)", clicks),
        ],
    )


def run(path, *args):
    out = StringIO()
    call_command("import_users", str(path), *args, stdout=out)
    return out.getvalue()


def snapshot():
    users = list(
        TelegramUser.objects.order_by("telegram_id").values_list(
            "telegram_id", "username", "first_name", "start_payload", "last_start_payload", "joined_at"
        )
    )
    clicks = list(
        ButtonClick.objects.order_by("user__telegram_id", "button").values_list(
            "user__telegram_id", "button", "count", "clicked_at", "last_clicked_at"
        )
    )
    messages = list(
        SequenceMessage.objects.order_by("user__telegram_id", "due_at", "id").values_list(
            "user__telegram_id", "step_id", "chat_id", "due_at", "status"
        )
    )
    return users, clicks, messages


@pytest.fixture
def onboarding(settings):
    """The Courier sequence the operator rebuilt from the drip bot: a welcome, then 2 h later a
    reminder only for users who have not clicked join_channel."""
    settings.PUBLIC_URL = "https://courier.example"
    sequence = SequenceFactory(name="Onboarding")
    welcome = sequence.steps.create(delay_seconds=40, text="Welcome", buttons="Join | https://t.me/+news | join_channel")
    reminder = sequence.steps.create(
        delay_seconds=7200, text="Still not joined?", condition="not_clicked", condition_button="join_channel"
    )
    return welcome, reminder


def test_users_clicks_and_pending_tasks_come_over_and_a_rerun_changes_nothing(tmp_path, onboarding):
    welcome, reminder = onboarding
    now = clock.now().replace(microsecond=0)
    ann_joined, bob_joined = now - timedelta(minutes=30), now - timedelta(days=3)
    path = drip_db(
        tmp_path / "drip.db",
        users=[
            (1001, "ann", "Ann", iso(ann_joined), "spring"),
            (1002, None, "Bob", iso(bob_joined) + "+00:00", None),
        ],
        clicks=[
            (1001, "join_channel", iso(now - timedelta(minutes=20))),
            (1001, "join_channel", iso(now - timedelta(minutes=5))),
            (1002, "promo", iso(now - timedelta(days=2))),
        ],
        tasks=[
            (1001, 101, iso(ann_joined + timedelta(seconds=40)), "done"),
            (1001, 102, iso(ann_joined + timedelta(hours=2)), "pending"),
            (1002, 102, iso(now - timedelta(hours=1)), "pending"),  # due while the bots were swapped
        ],
    )
    steps = f"101={welcome.pk},102={reminder.pk}"

    before = clock.now()
    first = run(path, "--map-steps", steps)
    after = clock.now()
    after_first = snapshot()
    second = run(path, "--map-steps", steps)

    assert first.splitlines() == [
        "import_users: 2 read: 2 created, 0 updated, 0 skipped, 0 invalid",
        "button_clicks: 3 read: 2 clicks recorded, 0 already known, 0 invalid",
        "tasks: 3 read: 2 scheduled (1 of them overdue: due now), 0 already scheduled, 1 done (not imported), "
        "0 repeated, 0 invalid",
    ]
    assert second.splitlines() == [
        "import_users: 2 read: 0 created, 0 updated, 2 skipped, 0 invalid",
        "button_clicks: 3 read: 0 clicks recorded, 2 already known, 0 invalid",
        "tasks: 3 read: 0 scheduled, 2 already scheduled, 1 done (not imported), 0 repeated, 0 invalid",
    ]
    assert snapshot() == after_first
    users, clicks, messages = after_first
    assert users == [
        (1001, "ann", "Ann", "spring", "spring", ann_joined),
        (1002, "", "Bob", "", "", bob_joined),
    ]
    assert clicks == [
        (1001, "join_channel", 2, now - timedelta(minutes=20), now - timedelta(minutes=5)),
        (1002, "promo", 1, now - timedelta(days=2), now - timedelta(days=2)),
    ]
    ann_reminder, bob_reminder = messages
    assert ann_reminder == (1001, reminder.pk, 1001, ann_joined + timedelta(hours=2), "pending")
    assert bob_reminder[:3] + bob_reminder[4:] == (1002, reminder.pk, 1002, "pending")
    assert before <= bob_reminder[3] <= after  # overdue: due at the import


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read the imported rows
def test_an_imported_user_who_clicked_is_spared_the_not_clicked_step(tmp_path, onboarding, gateway, telegram):
    _, reminder = onboarding
    now = clock.now()
    path = drip_db(
        tmp_path / "drip.db",
        users=[(1001, "ann", "Ann", iso(now - timedelta(hours=3)), None), (1002, "bob", "Bob", iso(now), None)],
        clicks=[(1001, "join_channel", iso(now - timedelta(hours=2)))],
        tasks=[(1001, 102, iso(now - timedelta(hours=1)), "pending"), (1002, 102, iso(now + timedelta(hours=2)), "pending")],
    )
    run(path, "--map-steps", f"102={reminder.pk}")
    telegram.users_meet([1001, 1002])  # both started the old bot, the same bot account

    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    assert list(SequenceMessage.objects.order_by("user__telegram_id").values_list("user__telegram_id", "status", "error")) == [
        (1001, "skipped", "clicked join_channel"),
        (1002, "pending", ""),
    ]
    clock.clock_advance(timedelta(hours=2, minutes=1))
    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    bob = SequenceMessage.objects.get(user__telegram_id=1002)
    # Bob did not click, so his turn came. He never wrote to Courier (no access hash) but started
    # the old bot: addressed by id alone, he gets it. One who never started it would not: Telegram
    # answers PEER_ID_INVALID (test_reach.py).
    assert (bob.status, bob.error) == ("sent", "")
    assert len(telegram.bot_messages(1002)) == 1


def test_bad_rows_are_listed_by_table_and_rowid_and_the_good_ones_imported(tmp_path, onboarding):
    welcome, _ = onboarding
    now = clock.now()
    path = drip_db(
        tmp_path / "drip.db",
        users=[
            (1001, "ann", "Ann", iso(now), "spring"),
            (1002, "b" * 33, "Bob", iso(now), None),
            (1003, "carl", "C" * 129, iso(now), None),
            (1004, "dee", "Dee", "yesterday", None),
            (1005, "eve", "Eve", iso(now), "not a payload!"),
            (-1001234, "chan", "Channel", iso(now), None),
        ],
        clicks=[
            (1001, "Join Channel", iso(now)),
            (1001, "join_channel", "soon"),
            (1002, "join_channel", iso(now)),
            ("x", "join_channel", iso(now)),
        ],
        tasks=[
            (1001, 101, iso(now + timedelta(hours=1)), "pending"),
            (1001, 103, iso(now + timedelta(hours=1)), "pending"),
            (1001, 101, "tomorrow", "pending"),
            (1001, 101, iso(now), "paused"),
            (1003, 101, iso(now + timedelta(hours=1)), "pending"),
            (1001, 101, iso(now + timedelta(hours=2)), "pending"),
        ],
    )

    out = run(path, "--map-steps", f"101={welcome.pk}")  # returns: listed, not raised (exit status 0)

    assert out.splitlines() == [
        "invalid: users rowid -1001234: -1001234 is a group or channel, not a user",
        f"invalid: users rowid 1002: username '{'b' * 33}' is longer than 32 characters",
        f"invalid: users rowid 1003: first_name '{'C' * 39}… (129 characters) is longer than 128 characters",
        "invalid: users rowid 1004: 'yesterday' is not a date (use ISO 8601, like 2024-05-01T12:00:00Z)",
        "invalid: users rowid 1005: start payload 'not a payload!' is not a deep-link payload (1-64 of A-Z, a-z, 0-9, _, -)",
        "invalid: button_clicks rowid 1: button_clicks: 'Join Channel' is not a click key (a-z, 0-9, _ and -, at most 64 characters)",
        "invalid: button_clicks rowid 2: 'soon' is not a date (use ISO 8601, like 2024-05-01T12:00:00Z)",
        "invalid: button_clicks rowid 4: 'x' is not a Telegram user id",
        "invalid: button_clicks rowid 3: user 1002 is not among the imported users",
        "invalid: tasks rowid 2: no step mapping for '103' (give --map-steps 103=<step id>)",
        "invalid: tasks rowid 3: 'tomorrow' is not a date (use ISO 8601, like 2024-05-01T12:00:00Z)",
        "invalid: tasks rowid 4: unknown status 'paused' (pending; or done, sent, cancelled, failed)",
        "invalid: tasks rowid 5: user 1003 is not among the imported users",
        "repeated (skipped): tasks rowid 6: the same user and step as tasks rowid 1",
        "tasks without a step mapping: 103 (1 task): give --map-steps KEY=<step id> and run again",
        "import_users: 6 read: 1 created, 0 updated, 0 skipped, 5 invalid",
        "button_clicks: 4 read: 0 clicks recorded, 0 already known, 4 invalid",
        "tasks: 6 read: 1 scheduled, 0 already scheduled, 0 done (not imported), 1 repeated, 4 invalid",
    ]
    assert list(TelegramUser.objects.values_list("telegram_id", flat=True)) == [1001]
    assert not ButtonClick.objects.exists()
    assert list(SequenceMessage.objects.values_list("user__telegram_id", "step_id", "due_at")) == [
        (1001, welcome.pk, now + timedelta(hours=1))
    ]


def test_a_courier_user_keeps_their_clicks_and_steps_and_a_dry_run_writes_nothing(tmp_path, onboarding):
    welcome, reminder = onboarding
    now = clock.now()
    ann = TelegramUserFactory(telegram_id=1001, username="ann")
    ButtonClickFactory(user=ann, button="join_channel", count=1)
    SequenceMessage.objects.create(user=ann, step=welcome, chat_id=1001, due_at=now, status="sent")
    path = drip_db(
        tmp_path / "drip.db",
        users=[(1001, "ann", "Ann", iso(now - timedelta(days=9)), None), (1002, "bob", "Bob", iso(now), None)],
        clicks=[(1001, "join_channel", iso(now - timedelta(days=8))), (1002, "join_channel", iso(now))],
        tasks=[(1001, 101, iso(now + timedelta(hours=1)), "pending"), (1002, 102, iso(now - timedelta(hours=1)), "pending")],
    )
    steps = f"101={welcome.pk},102={reminder.pk}"
    before = snapshot()

    dry = run(path, "--map-steps", steps, "--dry-run")
    assert snapshot() == before
    out = run(path, "--map-steps", steps)

    assert dry.splitlines() == [
        "import_users (dry run, nothing written): 2 read: 1 created, 1 updated, 0 skipped, 0 invalid",
        "button_clicks: 2 read: 1 clicks recorded, 1 already known, 0 invalid",
        "tasks: 2 read: 1 scheduled (1 of them overdue: due now), 1 already scheduled, 0 done (not imported), "
        "0 repeated, 0 invalid",
    ]
    assert out.splitlines() == [line.replace(" (dry run, nothing written)", "") for line in dry.splitlines()]
    assert ButtonClick.objects.get(user=ann).count == 1  # Courier's click is newer
    assert SequenceMessage.objects.get(user=ann).status == "sent"


def test_overdue_tasks_can_be_left_out_and_the_mapping_read_from_a_file(tmp_path, onboarding):
    welcome, reminder = onboarding
    now = clock.now()
    path = drip_db(
        tmp_path / "drip.db",
        users=[(1001, "ann", "Ann", iso(now - timedelta(hours=3)), None)],
        tasks=[(1001, 101, iso(now - timedelta(hours=3)), "pending"), (1001, 102, iso(now + timedelta(hours=1)), "pending")],
    )
    mapping = tmp_path / "steps.txt"
    mapping.write_text(f"# drip post -> Courier step\n101 = {welcome.pk}\n\n102={reminder.pk}  # the reminder\n")

    out = run(path, "--map-steps-file", str(mapping), "--skip-overdue")

    assert out.splitlines()[-1] == (
        "tasks: 2 read: 1 scheduled, 0 already scheduled, 0 done (not imported), 1 overdue left out, 0 repeated, 0 invalid"
    )
    assert list(SequenceMessage.objects.values_list("step_id", flat=True)) == [reminder.pk]


def test_column_name_variants_and_a_file_known_by_its_header(tmp_path, onboarding):
    welcome, _ = onboarding
    now = clock.now()
    path = tmp_path / "bot-backup"  # no extension: the SQLite header tells
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, joined_utc TEXT, payload TEXT);"
        "CREATE TABLE tasks (user_id INTEGER, step TEXT, run_at TEXT, done INTEGER DEFAULT 0);"
        "CREATE TABLE button_clicks (telegram_id INTEGER, button_key TEXT, clicked_utc TEXT);"
    )
    db.execute("INSERT INTO users VALUES (1001, 'ann', ?, 'spring')", (iso(now),))
    db.executemany(
        "INSERT INTO tasks VALUES (1001, ?, ?, ?)",
        [("welcome", iso(now + timedelta(minutes=1)), 0), ("old", iso(now), 1), ("x", iso(now), 2)],
    )
    db.execute("INSERT INTO button_clicks VALUES (1001, 'join_channel', ?)", (iso(now),))
    db.commit()
    db.close()

    out = run(path, "--map-steps", f"welcome={welcome.pk}")

    assert out.splitlines() == [
        "invalid: tasks rowid 3: done 2 is neither 0 nor 1",
        "import_users: 1 read: 1 created, 0 updated, 0 skipped, 0 invalid",
        "button_clicks: 1 read: 1 clicks recorded, 0 already known, 0 invalid",
        "tasks: 3 read: 1 scheduled, 0 already scheduled, 1 done (not imported), 0 repeated, 1 invalid",
    ]
    assert TelegramUser.objects.get().start_payload == "spring"
    assert SequenceMessage.objects.get().step == welcome


@pytest.mark.parametrize(
    "schema,args,error",
    [
        (
            SCHEMA.replace("due_utc TEXT NOT NULL", "when_ TEXT"),
            [],
            "the tasks table has no column for due time (one of due_utc, due_at, run_at, run_at_utc, send_at, scheduled_at)",
        ),
        (
            SCHEMA.replace("button TEXT NOT NULL", "label TEXT").replace(
                "user_id INTEGER NOT NULL, label", "uid_ INTEGER, label"
            ),
            [],
            "the button_clicks table has no column for the user (one of user_id, telegram_id, chat_id, uid); "
            "button key (one of button, button_key, key, button_id, button_type)",
        ),
        (SCHEMA.split("CREATE TABLE tasks")[0], ["--map-steps", "101=<step>"], "has no tasks table (tables: users)"),
        (
            SCHEMA.replace(
                "id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, message_id", "user_id INTEGER, message_id"
            ).replace(
                "status TEXT NOT NULL DEFAULT 'pending'\n)", "status TEXT, PRIMARY KEY (user_id, message_id)) WITHOUT ROWID"
            ),
            [],
            "cannot read the tasks table (no such column: rowid)",
        ),
        (SCHEMA, ["--map-steps", "101=999999"], "--map-steps: no sequence step with id 999999"),
        (SCHEMA, ["--map-steps", "101:<step>"], "--map-steps: '101:<step>' is not OLD=STEP"),
        (SCHEMA, ["--map-steps", "101=<step>,101=999999"], "--map-steps: 101 is mapped to step <step> and to step 999999"),
    ],
)
def test_tables_or_a_mapping_that_do_not_fit_are_one_line_and_nothing_is_written(tmp_path, onboarding, schema, args, error):
    welcome, _ = onboarding
    args = [a.replace("<step>", str(welcome.pk)) for a in args]
    error = error.replace("<step>", str(welcome.pk))
    db = sqlite3.connect(tmp_path / "drip.db")
    db.executescript(schema)
    db.execute("INSERT INTO users (user_id, timestamp_utc) VALUES (1001, '2024-01-01T00:00:00')")
    db.commit()
    db.close()
    with pytest.raises(CommandError) as failure:
        run(tmp_path / "drip.db", *args)
    assert error in str(failure.value)
    assert "\n" not in str(failure.value)
    assert not TelegramUser.objects.exists()


def test_the_mapping_is_refused_for_a_file_that_is_not_a_drip_database(tmp_path, onboarding):
    path = tmp_path / "users.csv"
    path.write_text("id\n1001\n")
    with pytest.raises(
        CommandError, match=r"--map-steps and --skip-overdue are for a drip bot's tasks \(its SQLite database, or --tasks\)"
    ):
        run(path, "--map-steps", f"101={onboarding[0].pk}")
    assert not TelegramUser.objects.exists()


@pytest.mark.slow
def test_many_users_clicks_and_tasks_are_written_in_chunks_with_a_few_queries_each(tmp_path, onboarding):
    welcome, _ = onboarding
    now = clock.now()
    n = 12_000
    joined, due = iso(now - timedelta(days=1)), iso(now + timedelta(hours=1))
    path = drip_db(
        tmp_path / "drip.db",
        users=[(700_000 + i, f"u{i}", "User", joined, None) for i in range(n)],
        clicks=[(700_000 + i, "join_channel", joined) for i in range(n)],
        tasks=[(700_000 + i, 101, due, "pending") for i in range(n)],
    )
    with CaptureQueriesContext(connection) as queries:
        out = run(path, "--map-steps", f"101={welcome.pk}")
    assert out.splitlines()[-2:] == [
        f"button_clicks: {n} read: {n} clicks recorded, 0 already known, 0 invalid",
        f"tasks: {n} read: {n} scheduled, 0 already scheduled, 0 done (not imported), 0 repeated, 0 invalid",
    ]
    # The step check and the steps copying posts, then 3 chunks of 5,000 per table: users a SELECT
    # and an INSERT, clicks and tasks two SELECTs and an INSERT, each chunk inside a savepoint (2 more);
    # and each of the three imports' entry on the audit trail.
    assert len(queries) <= 2 + 3 * 4 + 2 * 3 * 5 + 3
    assert SequenceMessage.objects.count() == ButtonClick.objects.count() == n
