"""Users of the bot an operator moved from: read from its export, written in bulk.

import_files.py opens the export (`import_source_open`: CSV, JSON, mongoexport, SQLite) and yields
one record per user with where it was found; this module understands each record, and
`users_import` writes them in chunks of 5,000 users: one SELECT, one INSERT, and one UPDATE per 1,000 users it fills in (none on a
second run). A value that does not fit (a name longer than its column, a username longer than
Telegram's, a payload no deep link carries, broken clicks JSON) makes its record invalid: nothing
is cut to fit.

What Courier already knows wins: a user who exists keeps their state (a user who sent /stop stays
stopped, whatever the file says), their names and their payload; the file only fills what is
empty, moves the join date back to when they really joined, and adds button clicks Courier has
not recorded. So running an import again changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import ClassVar

from django.db import transaction

from botapp import clock
from botapp.models import ButtonClick, TelegramUser
from botapp.models.buttons import KEY_RE
from botapp.models.sequences import START_PAYLOAD_RE
from botapp.services.audit import audited
from botapp.services.import_files import ID_KEYS, KEY_FIELD, Unreadable

CHUNK = 5000  # users per SELECT / INSERT / UPDATE
MAX_USER_ID = 2**53  # Telegram: user ids fit in 52 bits

FIELD_KEYS = {
    "username": ("username", "user_name"),
    "first_name": ("first_name", "firstname", "first"),
    "last_name": ("last_name", "lastname", "last"),
    "language_code": ("language_code", "lang", "language"),
    "start_payload": ("start_payload", "payload", "start_param"),
}
# Longer values are refused with the row, never cut: a cut name or payload is not the user's.
# Telegram: usernames are 5 to 32 characters of a-z, 0-9 and _ (its username rules); the others are
# Courier's columns (PostgreSQL counts characters, as len() does).
USERNAME_MAX = 32
FIELD_LENGTHS = {
    "username": USERNAME_MAX,
    **{name: TelegramUser._meta.get_field(name).max_length for name in ("first_name", "last_name", "language_code")},
}
JOINED_KEYS = ("joined_at", "joined", "join_date", "created_at", "timestamp_utc", "joined_utc", "date")
STATE_WORDS = {
    "active": TelegramUser.State.ACTIVE,
    "stopped": TelegramUser.State.STOPPED,
    "blocked": TelegramUser.State.BLOCKED,
    "deactivated": TelegramUser.State.DEACTIVATED,
    "deleted": TelegramUser.State.DEACTIVATED,
}
STATE_FLAGS = {
    "blocked": TelegramUser.State.BLOCKED,
    "is_blocked": TelegramUser.State.BLOCKED,
    "deactivated": TelegramUser.State.DEACTIVATED,
    "deleted": TelegramUser.State.DEACTIVATED,
}
TRUE_WORDS = {"1", "true", "yes", "y", "t"}
UNNAMED_CLICKS = "imported"  # the key of a bare click count (`"button_clicks": 3`)
CLICK_KEY_FIELDS = ("button", "key", "name", "button_type", "type")
CLICK_TIME_FIELDS = ("clicked_at", "first", "timestamp", "timestamp_utc", "time")


@dataclass
class Click:
    count: int = 1
    clicked_at: datetime | None = None
    last_clicked_at: datetime | None = None


@dataclass
class Row:
    where: str
    telegram_id: int
    fields: dict[str, str] = field(default_factory=dict)
    joined_at: datetime | None = None
    state: str | None = None
    clicks: dict[str, Click] = field(default_factory=dict)


@dataclass
class ImportReport:
    REPEATED: ClassVar[str] = "the same user as"  # how the command introduces a repeat's first place

    read: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    repeated: list[tuple[str, str]] = field(default_factory=list)  # (where, where it first was)
    ids: set[int] = field(default_factory=set)  # the Telegram ids of the valid records

    def summary(self) -> str:
        return (
            f"{self.read} read: {self.created} created, {self.updated} updated, {self.skipped} skipped, "
            f"{len(self.invalid)} invalid"
        )


# --- understanding one record ------------------------------------------------------------------------


class Invalid(ValueError):
    pass


def _unwrap(value):
    """mongoexport's extended JSON: {"$numberLong": "123"}, {"$date": ...}."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key in ("$numberLong", "$numberInt", "$numberDouble", "$numberDecimal"):
            return inner
        if key == "$date":
            return ("date", _unwrap(inner))
    return value


def user_id_parse(*, value) -> int:
    """A Telegram user id from an export's value (a number, digits, mongo's {"$numberLong": …});
    a group, a channel or anything else raises Invalid saying so."""
    value = _unwrap(value)
    if isinstance(value, bool) or value is None:
        raise Invalid(f"{value!r} is not a Telegram user id")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            raise Invalid(f"{value!r} is not a Telegram user id")
        value = int(value)
    if not isinstance(value, int):
        raise Invalid(f"{value!r} is not a Telegram user id")
    if value < 0:
        raise Invalid(f"{value} is a group or channel, not a user")
    if value == 0 or value >= MAX_USER_ID:
        raise Invalid(f"{value} is not a Telegram user id")
    return value


def moment_parse(*, value, now: datetime | None) -> datetime:
    """A date in any of the forms exports use (ISO 8601, naive read as UTC; Unix seconds or
    milliseconds; mongo's {"$date": …}) as an aware UTC datetime; one after `now` raises Invalid
    (None: any date will do)."""
    value = _unwrap(value)
    if isinstance(value, tuple):  # {"$date": ...}: an ISO string, or milliseconds
        value = value[1]
        if isinstance(value, (int, float, str)) and str(value).lstrip("-").isdigit():
            value = int(value) / 1000
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 10**11 else value  # milliseconds or seconds since 1970
        moment = _from_timestamp(seconds, value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if text.replace(".", "", 1).isdigit():  # seconds (or milliseconds) since 1970
            moment = _from_timestamp(float(text) / (1000 if float(text) > 10**11 else 1), value)
        else:
            try:
                moment = datetime.fromisoformat(text)
            except ValueError as exc:
                raise Invalid(f"{value!r} is not a date (use ISO 8601, like 2024-05-01T12:00:00Z)") from exc
    else:
        raise Invalid(f"{value!r} is not a date")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if now is not None and moment > now:
        raise Invalid(f"{value!r} is in the future")
    return moment


def _from_timestamp(seconds: float, value) -> datetime:
    """Seconds since 1970 as a time; a number no calendar holds is the row's error, not a crash."""
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise Invalid(f"{value!r} is not a date (too far from 1970)") from exc


def _truthy(value) -> bool:
    value = _unwrap(value)
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return bool(value)


def _clicks(value, now: datetime) -> dict[str, Click]:
    """`button_clicks` as older bots keep it: {key: count}, {key: {count, clicked_at, last_clicked_at}},
    [key, ...], [{button|key|name, count, ...}, ...], or a bare count (kept as key "imported")."""
    value = _unwrap(value)
    if value in (None, "", [], {}):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)  # a CSV or SQLite column holding JSON
        except RecursionError:
            raise Invalid("button_clicks: nested too deeply to read as JSON") from None
        except json.JSONDecodeError as exc:
            if value.lstrip()[:1] in ("{", "[", '"'):  # JSON that is broken, not a list of keys
                raise Invalid(f"button_clicks: not valid JSON ({exc.msg}): {_shown(value)}") from exc
            value = [k for k in (part.strip() for part in value.split(",")) if k]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {UNNAMED_CLICKS: Click(count=max(1, int(value)))} if value > 0 else {}
    entries: list[tuple[object, object]]
    if isinstance(value, dict):
        entries = list(value.items())
    elif isinstance(value, list):
        entries = []
        for item in value:
            if isinstance(item, dict):
                key = next((item[k] for k in CLICK_KEY_FIELDS if k in item), None)
                entries.append((key, item))
            else:
                entries.append((item, 1))
    else:
        raise Invalid("button_clicks must be a count, a list or an object")
    clicks: dict[str, Click] = {}
    for key, detail in entries:
        key = click_key_parse(key=key)
        detail = _unwrap(detail)
        if isinstance(detail, dict):
            count = _unwrap(detail.get("count", 1))
            first = next((detail[k] for k in CLICK_TIME_FIELDS if detail.get(k)), None)
            last = detail.get("last_clicked_at") or detail.get("last")
            click = Click(
                count=int(count) if str(count).isdigit() else 1,
                clicked_at=moment_parse(value=first, now=now) if first else None,
                last_clicked_at=moment_parse(value=last, now=now) if last else None,
            )
        elif isinstance(detail, (int, str)) and str(detail).isdigit():
            click = Click(count=int(detail))
        else:
            raise Invalid(f"button_clicks: {detail!r} is not a click count")
        if click.count > 0:
            clicks[key] = _clicks_add(clicks[key], click) if key in clicks else click
    return clicks


def _clicks_add(one: Click, other: Click) -> Click:
    """Two records of clicks on one key: the count of both, the first first, the last last."""
    firsts = [m for m in (one.clicked_at, other.clicked_at) if m]
    lasts = [m for m in (one.last_clicked_at, other.last_clicked_at, *firsts) if m]
    return Click(
        count=one.count + other.count, clicked_at=min(firsts) if firsts else None, last_clicked_at=max(lasts) if lasts else None
    )


def click_key_parse(*, key) -> str:
    """A tracked button's key as buttons record it (a-z, 0-9, _ and -, at most 64): anything else
    raises Invalid, as no step condition could ever name it."""
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str) or not key.strip():
        raise Invalid(f"button_clicks: {key!r} is not a button key")
    if not KEY_RE.match(key.strip()):
        raise Invalid(f"button_clicks: {_shown(key)} is not a click key (a-z, 0-9, _ and -, at most 64 characters)")
    return key.strip()


def _shown(value, limit: int = 40) -> str:
    """A value as a report line shows it: repr, and cut (saying so) when long."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(str(value))} characters)"


def import_row_parse(*, where: str, value, now: datetime | None = None) -> Row:
    """One record of an export as a Row; raises Invalid (a ValueError) saying what is wrong.
    Dates after `now` (default: the clock's) are refused."""
    now = now or clock.now()
    if isinstance(value, Unreadable):
        raise Invalid(value.reason)
    if not isinstance(value, dict):
        return Row(where=where, telegram_id=user_id_parse(value=value))
    record = {(k if isinstance(k, str) else str(k)).lower(): v for k, v in value.items()}
    telegram_id = None
    for key in (*ID_KEYS, KEY_FIELD):
        found = record.get(key)
        if found is not None and found != "":
            telegram_id = user_id_parse(value=found)
            break
    if telegram_id is None:
        raise Invalid(f"no user id (one of {', '.join(ID_KEYS)})")
    row = Row(where=where, telegram_id=telegram_id)
    for name, keys in FIELD_KEYS.items():
        for key in keys:
            raw = record.get(key)
            if raw is None or raw == "":
                continue
            text = str(_unwrap(raw)).strip().replace("\x00", "")
            if name == "username":
                text = text.lstrip("@")
            if not text:
                break
            if name == "start_payload":
                if not START_PAYLOAD_RE.match(text):
                    raise Invalid(f"start payload {_shown(text)} is not a deep-link payload (1-64 of A-Z, a-z, 0-9, _, -)")
            elif len(text) > FIELD_LENGTHS[name]:
                raise Invalid(f"{name} {_shown(text)} is longer than {FIELD_LENGTHS[name]} characters")
            row.fields[name] = text
            break
    joined = next((record[k] for k in JOINED_KEYS if record.get(k) not in (None, "")), None)
    if joined is not None:
        row.joined_at = moment_parse(value=joined, now=now)
    word = record.get("state", record.get("status"))
    if isinstance(word, str) and word.strip():
        if word.strip().lower() not in STATE_WORDS:
            raise Invalid(f"unknown state {word!r} (active, stopped, blocked or deactivated)")
        row.state = STATE_WORDS[word.strip().lower()]
    for flag, state in STATE_FLAGS.items():
        if flag in record and _truthy(record[flag]):
            row.state = state
    if "button_clicks" in record:
        row.clicks = _clicks(record["button_clicks"], now)
    return row


# --- writing ---------------------------------------------------------------------------------------


@audited(action="import.users")
def users_import(*, records: Iterable[tuple[str, object]], dry_run: bool = False) -> ImportReport:
    """Create the users an export names that Courier does not have; for those it has, fill only
    what is empty, move the join date back when the file knows an earlier one, and add button
    clicks not yet recorded. A user's state is never changed (a user who sent /stop stays
    stopped). A user named twice counts once (the first); later ones are skipped and reported.
    Idempotent: a second run creates and updates nothing. `dry_run`: count, write nothing."""
    report = ImportReport()
    now = clock.now()
    seen: dict[int, str] = {}
    chunk: list[Row] = []
    for where, value in records:
        report.read += 1
        try:
            row = import_row_parse(where=where, value=value, now=now)
        except Invalid as exc:
            report.invalid.append((where, str(exc)))
            continue
        first = seen.get(row.telegram_id)
        if first is not None:
            report.skipped += 1
            report.repeated.append((where, first))
            continue
        seen[row.telegram_id] = where
        report.ids.add(row.telegram_id)
        chunk.append(row)
        if len(chunk) >= CHUNK:
            _write(chunk, report, dry_run=dry_run)
            chunk = []
    if chunk:
        _write(chunk, report, dry_run=dry_run)
    return report


UPDATABLE = ("username", "first_name", "last_name", "language_code", "start_payload", "last_start_payload", "joined_at")


def _write(rows: list[Row], report: ImportReport, *, dry_run: bool) -> None:
    now = clock.now()
    with transaction.atomic():
        # Only what an import may read or fill: whole rows would cost a model instance each.
        existing = {
            values[0]: values
            for values in TelegramUser.objects.filter(telegram_id__in=[r.telegram_id for r in rows]).values_list(
                "telegram_id", "pk", *UPDATABLE
            )
        }
        new, changed = [], []
        for row in rows:
            current = existing.get(row.telegram_id)
            if "start_payload" in row.fields:  # until they come back through another campaign
                row.fields["last_start_payload"] = row.fields["start_payload"]
            if current is None:
                joined = row.joined_at or now
                new.append(
                    TelegramUser(
                        telegram_id=row.telegram_id,
                        state=row.state or TelegramUser.State.ACTIVE,
                        joined_at=joined,
                        last_seen_at=joined,
                        **row.fields,
                    )
                )
                continue
            values = dict(zip(UPDATABLE, current[2:], strict=True))
            dirty = False
            for name, value in row.fields.items():
                if not values[name]:
                    values[name] = value
                    dirty = True
            if row.joined_at is not None and row.joined_at < values["joined_at"]:
                values["joined_at"] = row.joined_at
                dirty = True
            if dirty:
                changed.append(TelegramUser(pk=current[1], telegram_id=row.telegram_id, **values))
        if not dry_run:
            TelegramUser.objects.bulk_create(new, batch_size=CHUNK, ignore_conflicts=True)
            TelegramUser.objects.bulk_update(changed, UPDATABLE, batch_size=1000)
        clicked = _clicks_write([r for r in rows if r.clicks], existing, dry_run=dry_run, now=now)
    report.created += len(new)
    updated = {u.telegram_id for u in changed} | (clicked & existing.keys())
    report.updated += len(updated)
    report.skipped += len(rows) - len(new) - len(updated)


def _clicks_write(rows: list[Row], existing: dict[int, tuple], *, dry_run: bool, now: datetime) -> set[int]:
    """Add the button clicks Courier has not recorded (a recorded one is newer: kept). Returns the
    Telegram ids of users who got a click row."""
    if not rows:
        return set()
    if dry_run:
        pks = {tid: values[1] for tid, values in existing.items()}
    else:
        pks = dict(TelegramUser.objects.filter(telegram_id__in=[r.telegram_id for r in rows]).values_list("telegram_id", "pk"))
    known = set(ButtonClick.objects.filter(user_id__in=[pk for pk in pks.values()]).values_list("user_id", "button"))
    fresh, users = [], set()
    for row in rows:
        pk = pks.get(row.telegram_id)
        for key, click in row.clicks.items():
            if pk is not None and (pk, key) in known:
                continue
            users.add(row.telegram_id)
            first = click.clicked_at or click.last_clicked_at or row.joined_at or now
            if pk is not None:
                fresh.append(
                    ButtonClick(
                        user_id=pk,
                        button=key,
                        count=click.count,
                        clicked_at=first,
                        last_clicked_at=max(first, click.last_clicked_at or first),
                    )
                )
    if not dry_run:
        ButtonClick.objects.bulk_create(fresh, batch_size=CHUNK, ignore_conflicts=True)
    return users
