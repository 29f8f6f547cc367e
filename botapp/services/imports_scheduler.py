"""The database of the scheduled-message system Courier replaces (shared/seeds/003): its
`subscribed_users` and the `scheduled_messages` it had not sent, with their files.

Its tables, as its SQLAlchemy models create them in SQLite:

    subscribed_users(user_id VARCHAR PK, chat_id VARCHAR UNIQUE, chat_name VARCHAR, created_at DATETIME)
    scheduled_messages(id VARCHAR PK, target_user_id JSON, message TEXT, scheduled_timestamp DATETIME,
                       file_paths JSON, is_sent BOOLEAN, created_at DATETIME)

Each subscriber becomes a subscriber of Courier's under the same user_id (its clients keep
addressing users by it; a user Courier has not met is created with no access hash and reached by
id). Each message not sent yet becomes a scheduled message of Courier's (services/subscribers.py:
the same rows the API makes), keeping its id and its time; one already due is due at once, as the
old scheduler would have sent it at its next look. Its files are read where the old system wrote
them: `file_paths` are relative to its working directory, taken as the database's own directory
(keep its `uploads/` folder beside the file). What cannot be imported is reported with its table
and rowid, never cut or guessed: a recipient list that is not a JSON list, a file that is not
there (copy it and run again), a time that is not one. Recipients no subscriber has are left out
and counted, as the old system failed them when it sent. Running it again changes nothing: a
subscriber id or message id Courier has is left as it is.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from django.core.exceptions import ValidationError
from django.core.files import File

from botapp import clock
from botapp.models import Subscriber, SubscriberMessage
from botapp.services.audit import audited
from botapp.services.import_files import ImportFileError
from botapp.services.imports import Invalid, moment_parse, user_id_parse
from botapp.services.subscribers import SubscribedAlready, subscriber_create, subscriber_message_schedule

TABLES = {
    "subscribed_users": ("user_id", "chat_id", "chat_name", "created_at"),
    "scheduled_messages": ("id", "target_user_id", "message", "scheduled_timestamp", "file_paths", "is_sent", "created_at"),
}
SENT = {"1", "true", "t"}  # SQLite's BOOLEAN is 0/1; a hand-made row may say true


@dataclass
class SchedulerImportReport:
    REPEATED: ClassVar[str] = "the same id as"

    subscribers_read: int = 0
    subscribers_created: int = 0
    subscribers_known: int = 0  # their user_id is Courier's already: left as they are
    messages_read: int = 0
    messages_scheduled: int = 0
    messages_overdue: int = 0  # of the scheduled, those already due (sent at once)
    messages_sent: int = 0  # sent by the old system: not imported
    messages_known: int = 0
    recipients_unknown: int = 0  # listed ids no subscriber has: left out, as the old system failed them
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    repeated: list[tuple[str, str]] = field(default_factory=list)  # the command lists these beside invalid ones

    def summary(self) -> str:
        return (
            f"subscribed_users: {self.subscribers_read} read: {self.subscribers_created} created, "
            f"{self.subscribers_known} already in Courier\n"
            f"scheduled_messages: {self.messages_read} read: {self.messages_scheduled} scheduled "
            f"({self.messages_overdue} due now), {self.messages_sent} sent before, {self.messages_known} already in Courier, "
            f"{self.recipients_unknown} recipients with no subscriber left out; {len(self.invalid)} invalid"
        )


def scheduler_tables_found(*, path: str | Path) -> bool:
    """Whether `path` is a SQLite database of the scheduled-message system: a subscribed_users or
    scheduled_messages table, and no users table (that is a bot's, read by imports.py)."""
    tables = _tables(Path(path))
    return bool(tables & TABLES.keys()) and "users" not in tables


def _tables(path: Path) -> set[str]:
    try:
        with path.open("rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return set()
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            conn.close()
    except (OSError, sqlite3.DatabaseError):
        return set()


@audited(action="import.scheduler")
def scheduler_import(*, path: str | Path, dry_run: bool = False) -> SchedulerImportReport:
    """Import the database at `path` (its subscribers first, then its messages not sent yet); a
    table without the columns above raises ImportFileError before anything is written. `dry_run`:
    count what would be done, write nothing."""
    path = Path(path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        found = {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, columns in TABLES.items():
            if table not in found:
                continue
            have = {r[1].lower() for r in conn.execute(f"PRAGMA table_info({table})")}
            if missing := [c for c in columns if c not in have]:
                raise ImportFileError(
                    f"{path}: the {table} table has no {', '.join(missing)} column (its columns: {', '.join(sorted(have))})"
                )
        report = SchedulerImportReport()
        if "subscribed_users" in found:
            _subscribers(conn, report, dry_run=dry_run)
        if "scheduled_messages" in found:
            # A dry run wrote no subscriber: the file's own count as known.
            listed = (
                {str(r[0]).strip() for r in conn.execute("SELECT user_id FROM subscribed_users")}
                if dry_run and "subscribed_users" in found
                else set()
            )
            _messages(conn, report, base=path.parent, dry_run=dry_run, listed=listed)
        return report
    finally:
        conn.close()


def _subscribers(conn: sqlite3.Connection, report: SchedulerImportReport, *, dry_run: bool) -> None:
    known = set(Subscriber.objects.values_list("subscriber_id", flat=True))
    seen: dict[str, str] = {}
    for row in conn.execute("SELECT rowid AS rowid_, * FROM subscribed_users ORDER BY rowid"):
        where = f"subscribed_users rowid {row['rowid_']}"
        report.subscribers_read += 1
        subscriber_id = str(row["user_id"] or "").strip()
        if not subscriber_id:
            report.invalid.append((where, "no user_id"))
            continue
        if subscriber_id in seen:
            report.repeated.append((where, seen[subscriber_id]))
            continue
        seen[subscriber_id] = where
        if subscriber_id in known:
            report.subscribers_known += 1
            continue
        try:
            user_id_parse(value=row["chat_id"])
            created_at = moment_parse(value=row["created_at"], now=None) if row["created_at"] else None
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        if dry_run:
            report.subscribers_created += 1
            continue
        try:
            subscriber_create(
                chat_id=row["chat_id"], chat_name=str(row["chat_name"] or ""), subscriber_id=subscriber_id, created_at=created_at
            )
        except SubscribedAlready:
            report.invalid.append((where, f"chat {row['chat_id']} has a subscriber already (under another user_id)"))
            continue
        except ValidationError as exc:
            report.invalid.append((where, " ".join(exc.messages)))
            continue
        report.subscribers_created += 1


def _messages(conn: sqlite3.Connection, report: SchedulerImportReport, *, base: Path, dry_run: bool, listed: set[str]) -> None:
    known = set(SubscriberMessage.objects.values_list("message_id", flat=True))
    subscribers = set(Subscriber.objects.values_list("subscriber_id", flat=True)) | listed
    for row in conn.execute("SELECT rowid AS rowid_, * FROM scheduled_messages ORDER BY rowid"):
        where = f"scheduled_messages rowid {row['rowid_']}"
        report.messages_read += 1
        if str(row["is_sent"]).strip().lower() in SENT:
            report.messages_sent += 1
            continue
        message_id = str(row["id"] or "").strip()
        if message_id in known:
            report.messages_known += 1
            continue
        try:
            targets = _id_list(row["target_user_id"])
            due = moment_parse(value=row["scheduled_timestamp"], now=None)
            created_at = moment_parse(value=row["created_at"], now=None) if row["created_at"] else None
            files = [_file(base, name) for name in _path_list(row["file_paths"])]
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        unknown = [t for t in targets if t not in subscribers]
        if len(unknown) == len(targets):
            report.invalid.append((where, f"no subscriber has any of its recipients ({', '.join(targets) or 'none listed'})"))
            continue
        if dry_run:
            _counted(report, targets=targets, unknown=unknown, due=due)
            continue
        try:
            with ExitStack() as opened:
                message = subscriber_message_schedule(
                    target_ids=targets,
                    message=str(row["message"] or ""),
                    scheduled_for=due,
                    files=[File(opened.enter_context(path.open("rb")), name=path.name) for path in files],
                    message_id=message_id,
                    created_at=created_at,
                    skip_unknown=True,
                )
        except ValidationError as exc:
            report.invalid.append((where, " ".join(exc.messages)))
            continue
        _counted(report, targets=targets, unknown=unknown, due=message.broadcast.scheduled_at)


def _counted(report: SchedulerImportReport, *, targets, unknown, due) -> None:
    report.messages_scheduled += 1
    report.recipients_unknown += len(unknown)
    if due <= clock.now():
        report.messages_overdue += 1


def _id_list(value) -> list[str]:
    """`target_user_id`: a JSON list of user_id strings."""
    try:
        ids = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise Invalid(f"target_user_id is not JSON ({exc.msg})") from exc
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
        raise Invalid(f"target_user_id is not a list of user ids: {str(value)[:60]!r}")
    return [str(i).strip() for i in ids if str(i).strip()]


def _path_list(value) -> list[str]:
    """`file_paths`: NULL, or a JSON list of paths."""
    if value in (None, "", "null"):
        return []
    try:
        paths = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise Invalid(f"file_paths is not JSON ({exc.msg})") from exc
    if paths is None:
        return []
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise Invalid(f"file_paths is not a list of paths: {str(value)[:60]!r}")
    return paths


def _file(base: Path, name: str) -> Path:
    path = Path(name) if Path(name).is_absolute() else base / name
    if not path.is_file():
        raise Invalid(f"file not found: {path} (copy the old uploads/ folder beside the database and run again)")
    return path
