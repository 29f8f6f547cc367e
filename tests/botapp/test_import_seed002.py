"""import_users on seed 002's drip bot exactly as its document gives it: the SQLite database made by
its own DDL (no column renamed), and the users.json / tasks.json it had before its SQLite migration."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from botapp import clock
from botapp.models import ButtonClick, SequenceMessage, TelegramUser
from tests.botapp.seed_drip import CHANNEL, USER, drip_db, iso, payloads, sample, two_users_db, unix
from tests.factories import SequenceFactory

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("import_users", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def steps():
    """The operator's sequence rebuilt from the drip bot: three posts of its channel, the farewell
    text, and the 2 h post only for users who did not click join_channel."""
    sequence = SequenceFactory(name="Drip")
    make = sequence.steps.create
    return {
        "msg_30s": make(delay_seconds=40, post_id=56, post_chat_id=CHANNEL),
        "msg_3min": make(delay_seconds=180, post_id=57, post_chat_id=CHANNEL),
        "msg_cleanup": make(delay_seconds=1080, text="Thanks for using this bot!"),
        "msg_2h": make(
            delay_seconds=7200, post_id=50, post_chat_id=CHANNEL, condition="not_clicked", condition_button="join_channel"
        ),
    }


def messages():
    return list(
        SequenceMessage.objects.order_by("user__telegram_id", "due_at").values_list(
            "user__telegram_id", "step__delay_seconds", "due_at", "status", "error"
        )
    )


def test_the_documents_own_schema_imports_users_clicks_per_type_and_pending_tasks_as_steps(tmp_path, steps):
    now = clock.now().replace(microsecond=0)
    joined = now - timedelta(minutes=2)
    path = two_users_db(
        tmp_path / "drip.db", joined, other_joined=now - timedelta(minutes=1),
        clicks=[("join_channel", 80), ("verify", 95), ("join_channel", 100)], other_retries=2,
    )  # fmt: skip

    out = run(path, "--map-steps", f"msg_cleanup={steps['msg_cleanup'].pk}")

    assert out.splitlines() == [
        "import_users: 2 read: 2 created, 0 updated, 0 skipped, 0 invalid",
        "button_clicks: 3 read: 2 clicks recorded, 0 already known, 0 invalid",
        "tasks: 8 read: 6 scheduled (1 of them tried before: their tries noted), 0 already scheduled, "
        "2 done (not imported), 0 repeated, 0 invalid",
    ]
    assert list(TelegramUser.objects.order_by("telegram_id").values_list("telegram_id", "username", "joined_at")) == [
        (USER, "cogitosk", joined),
        (1977988207, "cogitosk", now - timedelta(minutes=1)),
    ]
    assert list(ButtonClick.objects.order_by("button").values_list("button", "count", "clicked_at", "last_clicked_at")) == [
        ("join_channel", 2, joined + timedelta(seconds=80), joined + timedelta(seconds=100)),
        ("verify", 1, joined + timedelta(seconds=95), joined + timedelta(seconds=95)),
    ]
    # task_type msg_cleanup by the mapping; the others by the post their payload's message_id names.
    later = now - timedelta(minutes=1)
    assert messages() == [
        (USER, 180, joined + timedelta(seconds=180), "pending", ""),
        (USER, 1080, joined + timedelta(seconds=1080), "pending", ""),
        (USER, 7200, joined + timedelta(seconds=7200), "pending", ""),
        (1977988207, 180, later + timedelta(seconds=180), "pending", "2 failed tries in the bot moved from"),
        (1977988207, 1080, later + timedelta(seconds=1080), "pending", ""),
        (1977988207, 7200, later + timedelta(seconds=7200), "pending", ""),
    ]
    assert (
        run(path, "--map-steps", f"msg_cleanup={steps['msg_cleanup'].pk}")
        .splitlines()[-1]
        .startswith("tasks: 8 read: 0 scheduled, 6 already scheduled")
    )


def test_a_task_type_no_step_copies_is_listed_with_the_mapping_to_give(tmp_path, steps):
    user, tasks = sample(clock.now() - timedelta(minutes=2))
    path = drip_db(tmp_path / "drip.db", users=[user], tasks=tasks)

    out = run(path)

    assert out.splitlines()[:2] == [
        "invalid: tasks rowid 3: no step mapping for 'msg_cleanup' (give --map-steps msg_cleanup=<step id>)",
        "tasks without a step mapping: msg_cleanup (1 task): give --map-steps KEY=<step id> and run again",
    ]
    assert [m[1] for m in messages()] == [180, 7200]


def test_a_bad_payload_or_retries_is_reported_by_table_rowid_and_field(tmp_path, steps):
    user, tasks = sample(clock.now())
    tasks[1] = (*tasks[1][:6], "{not json")
    tasks[2] = (*tasks[2][:5], "two", tasks[2][6])
    path = drip_db(tmp_path / "drip.db", users=[user], tasks=tasks)

    out = run(path, "--map-steps", f"msg_cleanup={steps['msg_cleanup'].pk}")

    assert out.splitlines()[:2] == [
        "invalid: tasks rowid 2: payload: not valid JSON (Expecting property name enclosed in double quotes)",
        "invalid: tasks rowid 3: retries 'two' is not a count of tries",
    ]
    assert [m[1] for m in messages()] == [7200]


# --- before the SQLite migration: users.json and tasks.json -------------------------------------


def test_users_json_keyed_by_id_with_each_users_clicks_and_tasks_json_keyed_by_task_id(tmp_path, steps):
    now = clock.now().replace(microsecond=0)
    joined = now - timedelta(minutes=2)
    users = tmp_path / "users.json"
    users.write_text(
        json.dumps(
            {
                str(USER): {
                    "chat_id": USER, "user_id": USER, "username": "cogitosk", "first_name": "F", "last_name": None,
                    "start_payload": "fb_ad_123456", "timestamp_utc": iso(joined),
                    "button_clicks": [
                        {"button_type": "join_channel", "timestamp": iso(joined + timedelta(seconds=80))},
                        {"button_type": "verify", "timestamp": iso(joined + timedelta(seconds=95))},
                        {"button_type": "join_channel", "timestamp": iso(joined + timedelta(seconds=99))},
                    ],
                },
                "1977988207": {"username": "second", "timestamp_utc": iso(joined), "button_clicks": []},
            },
            indent=2,
        )
    )  # fmt: skip
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            {
                f"t{n}": {
                    "id": f"t{n}", "chat_id": USER, "task_type": kind, "send_at": unix(joined) + delay,
                    "status": "sent" if kind == "msg_30s" else "pending", "retries": 0, "payload": payloads()[kind],
                }
                for n, (kind, delay) in enumerate({"msg_30s": 40, "msg_3min": 180, "msg_2h": 7200}.items())
            },
            indent=2,
        )
    )  # fmt: skip

    out = run(users, "--tasks", tasks)

    assert out.splitlines() == [
        "import_users: 2 read: 2 created, 0 updated, 0 skipped, 0 invalid",
        "tasks: 3 read: 2 scheduled, 0 already scheduled, 1 done (not imported), 0 repeated, 0 invalid",
    ]
    ann = TelegramUser.objects.get(telegram_id=USER)
    assert (ann.start_payload, ann.joined_at) == ("fb_ad_123456", joined)
    assert TelegramUser.objects.filter(telegram_id=1977988207).exists()  # its id is its key
    assert list(ButtonClick.objects.order_by("button").values_list("button", "count", "clicked_at", "last_clicked_at")) == [
        ("join_channel", 2, joined + timedelta(seconds=80), joined + timedelta(seconds=99)),
        ("verify", 1, joined + timedelta(seconds=95), joined + timedelta(seconds=95)),
    ]
    assert [(m[1], m[2]) for m in messages()] == [(180, joined + timedelta(seconds=180)), (7200, joined + timedelta(hours=2))]


def test_a_tasks_json_list_with_a_bad_task_names_the_file_line_and_field(tmp_path, steps):
    users = tmp_path / "users.json"
    users.write_text(json.dumps([{"chat_id": USER, "timestamp_utc": iso(clock.now())}]))
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        "[\n"
        + ",\n".join(
            json.dumps(t)
            for t in [
                {"chat_id": USER, "task_type": "msg_2h", "send_at": unix(clock.now()) + 60, "status": "pending",
                 "payload": json.dumps(payloads()["msg_2h"])},
                {"chat_id": USER, "task_type": "msg_3min", "status": "pending"},
                "not a task",
            ]
        )
        + "\n]\n"
    )  # fmt: skip

    out = run(users, "--tasks", tasks)

    assert out.splitlines()[:2] == [
        "invalid: tasks.json line 3 (item 2): no due time",
        "invalid: tasks.json line 4 (item 3): 'not a task' is not a task (an object)",
    ]
    assert [m[1] for m in messages()] == [7200]


@pytest.mark.parametrize(
    "content,error",
    [
        ('{"tasks": 3}', 'tasks.json: a JSON object must hold a list under "tasks", or be keyed by id'),
        ("", "tasks.json: empty file"),
        ('[{"chat_id": 1}', "tasks.json: line 1: not valid JSON"),
    ],
)
def test_a_tasks_json_that_cannot_be_read_is_one_line_and_nothing_is_written(tmp_path, steps, content, error):
    users = tmp_path / "users.json"
    users.write_text(json.dumps([{"chat_id": USER}]))
    tasks = tmp_path / "tasks.json"
    tasks.write_text(content)
    with pytest.raises(CommandError, match=error) as failure:
        run(users, "--tasks", tasks)
    assert "\n" not in str(failure.value)
    assert not TelegramUser.objects.exists()
