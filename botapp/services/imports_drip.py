"""What a drip bot keeps beside its users: button clicks and its pending timed posts.

A drip bot (python-telegram-bot or pyrogram with SQLite) sends timed onboarding posts after /start.
Its `users` table is read by imports.py like any other; this module reads the other two:

- `button_clicks`, a row per click (user, button key, time): recorded as ButtonClick rows, the store
  Courier's tracked buttons write, so a step's "clicked / not clicked" condition sees them;
- `tasks`, its timed posts (user, post or step key such as seed 002's `task_type`, due time, status,
  and optionally `retries` and a JSON `payload`): each pending one becomes the SequenceMessage of
  the Courier step the operator maps its key to (or, unmapped, of the one step copying the post its
  payload's `message_id` names), due when the drip bot would have sent it, its failed tries noted. A task already due is due now (the sender sends it at its next run), or left out
  and counted with `skip_overdue`; a task with no mapping is reported, never guessed.

`drip_tables_open` checks both tables before anything is written. The imports stream their rows
(in user order, so one user's rows stay together) and write in chunks of CHUNK: per chunk one SELECT
of the users, one of what Courier already has, one INSERT. Courier's rows win: a click Courier
recorded, or a step the user already has (sent, skipped or pending), is left as it is, so running
the import again changes nothing. A row that makes no sense is reported (table, rowid, why).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from django.db import transaction

from botapp import clock
from botapp.models import ButtonClick, SequenceMessage, SequenceStep, TelegramUser
from botapp.services.audit import audited
from botapp.services.import_files import ImportFileError, Unreadable, json_records_open
from botapp.services.imports import CHUNK, Invalid, click_key_parse, moment_parse, user_id_parse
from botapp.signals import work_scheduled_announce

# The columns each table may name a role with, in order of preference (case-insensitive).
USER_COLUMNS = ("user_id", "telegram_id", "chat_id", "uid")
CLICK_COLUMNS = {
    "user": ("the user", USER_COLUMNS),
    "button": ("button key", ("button", "button_key", "key", "button_id", "button_type")),
}
CLICK_TIME_COLUMNS = ("clicked_at", "clicked_utc", "timestamp_utc", "created_at", "ts", "timestamp")
TASK_COLUMNS = {
    "user": ("the user", USER_COLUMNS),
    "step": (
        "post or step key",
        ("message_id", "message_key", "post_id", "post", "step", "step_key", "step_id", "task_type", "type"),
    ),
    "due": ("due time", ("due_utc", "due_at", "run_at", "run_at_utc", "send_at", "scheduled_at")),
}
STATUS_COLUMNS = ("status", "state", "done", "sent", "is_done")  # none: every task is pending
RETRIES_COLUMNS = ("retries", "attempts", "tries")  # the drip bot's failed tries of a task so far
PAYLOAD_COLUMNS = ("payload",)  # JSON: its "message_id" names the post the task copies
FLAG_COLUMNS = ("done", "sent", "is_done")  # 0/1: 1 means the post went out
PENDING = {"pending", "queued", "scheduled", "waiting", "new"}
DONE = {"done", "sent", "completed", "cancelled", "canceled", "failed", "skipped", "error"}
TRUE_FLAGS = {1, "1", "true", "yes", "t", "y"}
FALSE_FLAGS = {0, "0", "false", "no", "f", "n"}


@dataclass
class DripTables:
    """A drip bot's database, checked: for each table found, the column of each role."""

    path: Path
    clicks: dict[str, str | None] | None = None  # None: no button_clicks table
    tasks: dict[str, str | None] | None = None  # None: no tasks table


@dataclass
class DripReport:
    REPEATED: ClassVar[str] = "the same user and step as"

    table: str
    read: int = 0
    written: int = 0  # clicks recorded (one per user and button) / messages scheduled
    known: int = 0  # already in Courier: left as they are
    overdue: int = 0  # tasks: of the scheduled, those already due (due now)
    overdue_skipped: int = 0  # tasks: already due, left out (skip_overdue)
    retried: int = 0  # tasks: of the scheduled, those the old bot had tried and failed before
    done: int = 0  # tasks: sent or cancelled by the drip bot, not imported
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    repeated: list[tuple[str, str]] = field(default_factory=list)  # (where, where it first was)
    unmapped: dict[str, int] = field(default_factory=dict)  # task key -> tasks without a mapping

    def summary(self) -> str:
        if self.table == "button_clicks":
            return (
                f"button_clicks: {self.read} read: {self.written} clicks recorded, {self.known} already known, "
                f"{len(self.invalid)} invalid"
            )
        overdue = f" ({self.overdue} of them overdue: due now)" if self.overdue else ""
        overdue += f" ({self.retried} of them tried before: their tries noted)" if self.retried else ""
        left_out = f", {self.overdue_skipped} overdue left out" if self.overdue_skipped else ""
        return (
            f"tasks: {self.read} read: {self.written} scheduled{overdue}, {self.known} already scheduled, "
            f"{self.done} done (not imported){left_out}, {len(self.repeated)} repeated, {len(self.invalid)} invalid"
        )


# --- the tables and the mapping -------------------------------------------------------------------


def drip_tables_open(*, path: Path, need_tasks: bool = False) -> DripTables:
    """Check a SQLite database's `button_clicks` and `tasks` tables, if it has them (a database
    with neither is a plain users table: both None). A table without a column for one of its roles,
    or no tasks table when `need_tasks`, raises ImportFileError naming what is missing."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0].lower(): r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
            columns = {
                name: {r[1].lower(): r[1] for r in conn.execute(f'PRAGMA table_info("{tables[name]}")')}
                for name in ("button_clicks", "tasks")
                if name in tables
            }
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"{path}: not a SQLite database ({exc})") from exc
    found = DripTables(path=path)
    if "button_clicks" in columns:
        found.clicks = _roles(path, "button_clicks", columns["button_clicks"], CLICK_COLUMNS)
        found.clicks["at"] = next(
            (columns["button_clicks"][c] for c in CLICK_TIME_COLUMNS if c in columns["button_clicks"]), None
        )
    if "tasks" in columns:
        found.tasks = _roles(path, "tasks", columns["tasks"], TASK_COLUMNS)
        for role, names in (("status", STATUS_COLUMNS), ("retries", RETRIES_COLUMNS), ("payload", PAYLOAD_COLUMNS)):
            found.tasks[role] = next((columns["tasks"][c] for c in names if c in columns["tasks"]), None)
    elif need_tasks:
        raise ImportFileError(
            f"{path}: --map-steps maps a drip bot's tasks, and this database has no tasks table "
            f"(tables: {', '.join(sorted(tables)) or 'none'})"
        )
    # The reads the import will make, prepared now (a WITHOUT ROWID table fails here, not after
    # the users are written).
    for table, sql in (
        ("button_clicks", found.clicks and _clicks_sql(found.clicks)),
        ("tasks", found.tasks and _tasks_sql(found.tasks)),
    ):
        if sql:
            try:
                next(_rows(found, f"{sql} LIMIT 0"), None)
            except sqlite3.DatabaseError as exc:
                raise ImportFileError(f"{path}: cannot read the {table} table ({exc})") from exc
    return found


def _roles(path: Path, table: str, columns: dict[str, str], roles: dict[str, tuple[str, tuple[str, ...]]]) -> dict:
    found, missing = {}, []
    for role, (what, names) in roles.items():
        column = next((columns[n] for n in names if n in columns), None)
        if column is None:
            missing.append(f"{what} (one of {', '.join(names)})")
        found[role] = column
    if missing:
        raise ImportFileError(f"{path}: the {table} table has no column for {'; '.join(missing)}")
    return found


def drip_step_map_parse(*, inline: str | None = None, path: str | Path | None = None) -> dict[str, int]:
    """The operator's mapping of the drip bot's post/step keys to Courier sequence step ids:
    `101=5,102=6` inline and/or a file with one `101=5` per line (blank lines and `# …` ignored).
    A malformed entry, a key mapped twice to different steps, or a step id that does not exist
    raises ImportFileError naming it."""
    entries: list[tuple[str, str]] = []
    if inline:
        entries += [("--map-steps", part) for part in inline.split(",")]
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportFileError(f"{path}: cannot read the step mapping ({exc})") from exc
        entries += [(f"{path} line {n}", line.split("#", 1)[0]) for n, line in enumerate(text.splitlines(), 1)]
    mapping: dict[str, int] = {}
    for where, entry in entries:
        if not entry.strip():
            continue
        old, sep, new = entry.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new.isdigit():
            raise ImportFileError(f"{where}: {entry.strip()!r} is not OLD=STEP (a task key = a sequence step id, like 101=5)")
        if mapping.setdefault(old, int(new)) != int(new):
            raise ImportFileError(f"{where}: {old} is mapped to step {mapping[old]} and to step {new}")
    missing = sorted(
        set(mapping.values()) - set(SequenceStep.objects.filter(id__in=mapping.values()).values_list("id", flat=True))
    )
    if missing:
        raise ImportFileError(
            f"--map-steps: no sequence step with id {', '.join(map(str, missing))} (the ids are on each sequence's page)"
        )
    return mapping


def _task_key(value) -> str:
    """A task's post/step key as the mapping spells it: 101 (or 101.0) is "101"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip() if value is not None else ""
    if not text:
        raise Invalid("no post or step key")
    return text


def _task_pending(value, column: str | None) -> bool:
    if column is None:
        return True
    if column.lower() in FLAG_COLUMNS:
        flag = value.strip().lower() if isinstance(value, str) else value
        if flag in TRUE_FLAGS or flag in FALSE_FLAGS:
            return flag in FALSE_FLAGS
        raise Invalid(f"{column} {value!r} is neither 0 nor 1")
    word = value.strip().lower() if isinstance(value, str) else None
    if word in PENDING:
        return True
    if word in DONE:
        return False
    raise Invalid(f"unknown status {value!r} (pending; or done, sent, cancelled, failed)")


def _clicks_sql(c: dict[str, str | None]) -> str:
    """Clicks in user and key order (one user's clicks of a key together). Column names are
    those found in the table, matched against the lists above: safe to quote."""
    at = f'"{c["at"]}"' if c["at"] else "NULL"
    return f'SELECT rowid, "{c["user"]}", "{c["button"]}", {at} FROM button_clicks ORDER BY 2, 3, rowid'


def _tasks_sql(t: dict[str, str | None]) -> str:
    """Tasks in user order (one user's tasks together), each in the order the bot wrote them."""
    state, retries, payload = (f'"{t[role]}"' if t[role] else "NULL" for role in ("status", "retries", "payload"))
    return f'SELECT rowid, "{t["user"]}", "{t["step"]}", "{t["due"]}", {state}, {retries}, {payload} FROM tasks ORDER BY 2, rowid'


def _rows(tables: DripTables, sql: str):
    conn = sqlite3.connect(f"file:{tables.path}?mode=ro", uri=True)
    try:
        yield from conn.execute(sql)
    finally:
        conn.close()


# --- button clicks -------------------------------------------------------------------------------


@dataclass
class _Clicks:
    rows: list[str]
    first: datetime
    last: datetime


@audited(action="import.drip_clicks")
def drip_clicks_import(*, tables: DripTables, user_ids: set[int], dry_run: bool = False) -> DripReport:
    """Record the drip bot's button clicks, one ButtonClick per user and key (the first click's
    time, the last one's, and how many rows), for users Courier has: a click Courier already
    recorded is kept. A click of a user Courier does not have is reported; with `dry_run`, users
    in `user_ids` (the file's valid users) count as had, and nothing is written."""
    report = DripReport("button_clicks")
    now = clock.now()
    groups: dict[tuple[int, str], _Clicks] = {}
    for rowid, user, button, clicked in _rows(tables, _clicks_sql(tables.clicks)):
        report.read += 1
        where = f"button_clicks rowid {rowid}"
        try:
            telegram_id = user_id_parse(value=user)
            key = click_key_parse(key=button)
            moment = now if clicked in (None, "") else moment_parse(value=clicked, now=now)
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        group = groups.get((telegram_id, key))
        if group is None:
            if len(groups) >= CHUNK:
                _clicks_write(groups, report, user_ids=user_ids, dry_run=dry_run)
                groups = {}
            groups[(telegram_id, key)] = _Clicks([where], moment, moment)
        else:
            group.rows.append(where)
            group.first, group.last = min(group.first, moment), max(group.last, moment)
    if groups:
        _clicks_write(groups, report, user_ids=user_ids, dry_run=dry_run)
    return report


def _clicks_write(groups: dict[tuple[int, str], _Clicks], report: DripReport, *, user_ids: set[int], dry_run: bool) -> None:
    with transaction.atomic():
        pks = dict(TelegramUser.objects.filter(telegram_id__in={t for t, _ in groups}).values_list("telegram_id", "pk"))
        known = set(
            ButtonClick.objects.filter(user_id__in=pks.values(), button__in={k for _, k in groups}).values_list(
                "user_id", "button"
            )
        )
        fresh = []
        for (telegram_id, key), group in groups.items():
            pk = pks.get(telegram_id)
            if pk is None and not (dry_run and telegram_id in user_ids):
                report.invalid += [(where, f"user {telegram_id} is not among the imported users") for where in group.rows]
            elif pk is not None and (pk, key) in known:
                report.known += 1
            else:
                report.written += 1
                if pk is not None:
                    fresh.append(
                        ButtonClick(
                            user_id=pk, button=key, count=len(group.rows), clicked_at=group.first, last_clicked_at=group.last
                        )
                    )
        if not dry_run:
            ButtonClick.objects.bulk_create(fresh, batch_size=CHUNK, ignore_conflicts=True)


# --- pending tasks --------------------------------------------------------------------------------


@dataclass
class TaskRecord:
    """One task of a drip bot as read from its database or its tasks.json, not yet understood."""

    where: str
    user: object
    key: object
    due: object
    status: object = None
    retries: object = None
    payload: object = None
    bad: str = ""  # why the record could not be read at all


@dataclass
class _Task:
    where: str
    telegram_id: int
    step_id: int
    due: datetime
    retries: int = 0


def drip_task_records(*, tables: DripTables):
    """The tasks of a drip bot's SQLite database, in user order."""
    for rowid, user, key, due, status, retries, payload in _rows(tables, _tasks_sql(tables.tasks)):
        yield TaskRecord(f"tasks rowid {rowid}", user, key, due, status, retries, payload)


def drip_task_records_json(*, path: str | Path) -> tuple[list[TaskRecord], str]:
    """The tasks of a drip bot's tasks.json from before its SQLite migration (a list of tasks, or
    an object keyed by task id, each `{chat_id, task_type, send_at, status, retries, payload}`,
    the columns of its tasks table), in user order, and the field naming their status. Raises
    ImportFileError when the file cannot be read as a whole."""
    source = json_records_open(path=path, holder="tasks")
    found = []
    for where, value in source.records:
        where = f"{Path(path).name} {where}"
        if not isinstance(value, dict):
            reason = value.reason if isinstance(value, Unreadable) else f"{value!r} is not a task (an object)"
            found.append(TaskRecord(where, None, None, None, bad=reason))
            continue
        task = {str(k).lower(): v for k, v in value.items()}
        roles = {role: next((task[c] for c in names if c in task), None) for role, (_, names) in TASK_COLUMNS.items()}
        missing = [what for role, (what, _) in TASK_COLUMNS.items() if roles[role] in (None, "")]
        found.append(
            TaskRecord(
                where, roles["user"], roles["step"], roles["due"],
                status=next((task[c] for c in STATUS_COLUMNS if c in task), "pending"),
                retries=next((task[c] for c in RETRIES_COLUMNS if c in task), None),
                payload=next((task[c] for c in PAYLOAD_COLUMNS if c in task), None),
                bad=f"no {' and no '.join(missing)}" if missing else "",
            )
        )  # fmt: skip
    found.sort(key=lambda r: str(r.user))
    return found, "status"


def drip_post_steps() -> dict[int, int]:
    """The sequence steps that copy a post, by the post's message id: a drip bot's task naming
    that post in its payload (`{"message_id": 56}`) is that step's message. A post two steps
    copy names neither (the operator maps such tasks)."""
    found: dict[int, list[int]] = {}
    for step_id, post_id in SequenceStep.objects.filter(post_id__isnull=False).values_list("id", "post_id"):
        found.setdefault(post_id, []).append(step_id)
    return {post_id: ids[0] for post_id, ids in found.items() if len(ids) == 1}


def _payload_post(value) -> int | None:
    """The post a task's payload names (its "message_id"), or None; a payload that is not JSON
    raises Invalid."""
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise Invalid(f"payload: not valid JSON ({getattr(exc, 'msg', 'nested too deeply')})") from exc
    if not isinstance(value, dict):
        raise Invalid(f"payload: {value!r} is not a JSON object")
    post = value.get("message_id")
    if isinstance(post, int) and not isinstance(post, bool) and post > 0:
        return post
    return None


def _retries(value) -> int:
    if value in (None, ""):
        return 0
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise Invalid(f"retries {value!r} is not a count of tries")
    return int(str(value).strip())


@audited(action="import.drip_tasks")
def drip_tasks_import(
    *,
    records,
    status_column: str | None,
    steps: dict[str, int],
    user_ids: set[int],
    skip_overdue: bool = False,
    dry_run: bool = False,
) -> DripReport:
    """Schedule each pending task (`records`: TaskRecord, one user's together) as the
    SequenceMessage of its step: the one `steps` maps its key (post id or task type) to, else the
    one step copying the post its payload names. It is due at its due time; a task already due
    is due now (its user's tasks keep their order), or with `skip_overdue` left out and counted.
    The drip bot's failed tries (`retries`) are carried on the row's note until it is sent. Done
    tasks are counted, not imported; a task with no step, whose user Courier does not have, or
    whose row makes no sense is reported. A step the user already has is left as it is (one
    message per user and step), so a rerun schedules nothing. `dry_run`: users in `user_ids`
    count as had; nothing is written. `status_column` names the status field (None: all pending)."""
    report = DripReport("tasks")
    now = clock.now()
    posts = drip_post_steps()
    chunk: list[_Task] = []
    for record in records:
        report.read += 1
        try:
            if record.bad:
                raise Invalid(record.bad)
            if not _task_pending(record.status, status_column):
                report.done += 1
                continue
            telegram_id = user_id_parse(value=record.user)
            key = _task_key(record.key)
            post = _payload_post(record.payload)
            step_id = steps.get(key, posts.get(post) if post else None)
            if step_id is None:
                report.unmapped[key] = report.unmapped.get(key, 0) + 1
                raise Invalid(f"no step mapping for {key!r} (give --map-steps {key}=<step id>)")
            retries = _retries(record.retries)
            moment = moment_parse(value=record.due, now=None)
        except Invalid as exc:
            report.invalid.append((record.where, str(exc)))
            continue
        if moment <= now and skip_overdue:
            report.overdue_skipped += 1
            continue
        if len(chunk) >= CHUNK and chunk[-1].telegram_id != telegram_id:  # a user's tasks in one chunk
            _tasks_write(chunk, report, user_ids=user_ids, now=now, dry_run=dry_run)
            chunk = []
        chunk.append(_Task(record.where, telegram_id, step_id, moment, retries))
    if chunk:
        _tasks_write(chunk, report, user_ids=user_ids, now=now, dry_run=dry_run)
    return report


def retries_note(*, retries: int) -> str:
    """The note a carried task's row holds until it is sent: the tries the old bot made."""
    return f"{retries} failed {'try' if retries == 1 else 'tries'} in the bot moved from"


def _tasks_write(tasks: list[_Task], report: DripReport, *, user_ids: set[int], now: datetime, dry_run: bool) -> None:
    with transaction.atomic():
        pks = dict(TelegramUser.objects.filter(telegram_id__in={t.telegram_id for t in tasks}).values_list("telegram_id", "pk"))
        had = set(
            SequenceMessage.objects.filter(user_id__in=pks.values(), step_id__in={t.step_id for t in tasks}).values_list(
                "user_id", "step_id"
            )
        )
        first: dict[tuple[int, int], str] = {}
        fresh = []
        # Inserted in due order: overdue tasks all fall due now, and the sender takes a user's
        # rows of one due time by id.
        for task in sorted(tasks, key=lambda t: (t.telegram_id, t.due)):
            pk = pks.get(task.telegram_id)
            if pk is None and not (dry_run and task.telegram_id in user_ids):
                report.invalid.append((task.where, f"user {task.telegram_id} is not among the imported users"))
                continue
            pair = (task.telegram_id, task.step_id)
            if pair in first:
                report.repeated.append((task.where, first[pair]))
                continue
            first[pair] = task.where
            if pk is not None and (pk, task.step_id) in had:
                report.known += 1
                continue
            report.written += 1
            report.overdue += task.due <= now
            report.retried += task.retries > 0
            if pk is not None:
                fresh.append(
                    SequenceMessage(
                        user_id=pk, step_id=task.step_id, chat_id=task.telegram_id, due_at=max(task.due, now),
                        error=retries_note(retries=task.retries) if task.retries else "",
                    )
                )  # fmt: skip
        if not dry_run:
            SequenceMessage.objects.bulk_create(fresh, batch_size=CHUNK, ignore_conflicts=True)
            if fresh:  # the sequence sender wakes at the earliest, not at beat's next minute
                work_scheduled_announce(work="sequence", due_at=min(m.due_at for m in fresh))
