"""Opening the export of a bot an operator moved from: a CSV with a header, JSON (a list of ids or
objects, JSON lines, `mongoexport` output with or without `--jsonArray`, an object keyed by id), or a
SQLite database with a `users` table; one record per user, with where it was found (`line 12`,
`users rowid 5`). What a record means is imports.py's (users) and the other imports' business.
"""

from __future__ import annotations

import bisect
import csv
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ID_KEYS = ("id", "user_id", "_id", "telegram_id", "chat_id", "userid")
KEY_FIELD = "_key"  # a record's key in a JSON object keyed by id: its id when it names none
FORMATS = ("csv", "json", "sqlite")
EXTENSIONS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
}
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file


class ImportFileError(Exception):
    """The file cannot be read as a whole (missing, wrong format, no id column, tables that do not
    match, a step mapping that names no step): nothing was written."""


@dataclass
class Source:
    """An opened export: its records (where, value) and how many there are, if known."""

    fmt: str
    records: Iterator[tuple[str, object]]
    total: int | None
    path: Path | None = None


# --- reading -----------------------------------------------------------------------------------------


def import_source_open(*, path: str | Path, fmt: str | None = None) -> Source:
    """Open an export for reading; `fmt` (csv, json, sqlite) is guessed when omitted: SQLite by
    the file's header, the others from the extension. A file that cannot be read as a whole raises
    ImportFileError with a one-line reason before anything is yielded."""
    path = Path(path)
    if not path.is_file():
        raise ImportFileError(f"{path}: no such file")
    if fmt is None:
        with path.open("rb") as f:
            fmt = "sqlite" if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER else EXTENSIONS.get(path.suffix.lower())
        if fmt is None:
            raise ImportFileError(f"{path}: cannot tell the format from the extension; give --format csv, json or sqlite")
    if fmt not in FORMATS:
        raise ImportFileError(f"unknown format {fmt!r}: use csv, json or sqlite")
    return {"csv": _open_csv, "json": _open_json, "sqlite": _open_sqlite}[fmt](path)


def _text_lines(path: Path) -> int:
    """Lines in a text file, checking on the way that all of it is UTF-8 (so a bad byte stops the
    import before anything is written, with its line)."""
    count = 0
    with path.open("rb") as f:
        for count, line in enumerate(f, 1):  # noqa: B007 - the count is the point
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFileError(f"{path}: line {count} is not UTF-8 text ({exc.reason})") from exc
    return count


def _open_csv(path: Path) -> Source:
    lines = _text_lines(path)
    with path.open(encoding="utf-8-sig", newline="") as f:
        header = next(csv.reader(f), None)
    if not header:
        raise ImportFileError(f"{path}: empty CSV file (it needs a header line naming the columns)")
    columns = [c.strip().lower() for c in header]
    if not any(k in columns for k in ID_KEYS):
        raise ImportFileError(f"{path}: the CSV header {header!r} has no id column (one of {', '.join(ID_KEYS)})")

    def records():
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            next(reader)
            for values in reader:
                if not any(v.strip() for v in values):
                    continue
                where = f"line {reader.line_num}"
                if len(values) != len(columns):
                    yield where, Unreadable(f"{len(values)} fields where the header has {len(columns)}")
                    continue
                yield where, dict(zip(columns, values, strict=True))

    return Source("csv", records(), max(0, lines - 1))


class Unreadable:
    """A record the reader could not make sense of: the reason goes to the report."""

    def __init__(self, reason: str):
        self.reason = reason


def _open_json(path: Path, *, holder: str = "users") -> Source:
    """A JSON export: a list, JSON lines, an object holding a list under `holder`, or an object
    keyed by id whose values are the records (the key is the record's id when it has none)."""
    _text_lines(path)
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if not stripped:
        raise ImportFileError(f"{path}: empty file")
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(newlines, pos - 1) + 1

    if stripped[0] == "[" or stripped[0] == "{" and _one_document(text):
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise ImportFileError(f"{path}: nested too deeply to read as JSON") from exc
        except json.JSONDecodeError as exc:
            raise ImportFileError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
        if isinstance(data, list):
            return Source("json", _array_items(text, line_of), len(data))
        items = data.get(holder)
        if isinstance(items, list):
            return Source("json", ((f"item {n}", v) for n, v in enumerate(items, 1)), len(items))
        if holder not in data and data and all(isinstance(v, dict) for v in data.values()):
            return Source("json", _keyed_items(text, line_of), len(data))
        if holder in data or not data:
            raise ImportFileError(
                f'{path}: a JSON object must hold a list under "{holder}", or be keyed by id with an object for each; '
                "or give the list itself"
            )
        return Source("json", iter([("line 1", data)]), 1)  # JSON lines of one document (a mongoexport of one)
    # JSON lines (mongoexport's default): one document per line.
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append((f"line {number}", json.loads(line)))
        except RecursionError:
            if not items:
                raise ImportFileError(f"{path}: line {number}: nested too deeply to read as JSON") from None
            items.append((f"line {number}", Unreadable("nested too deeply to read as JSON")))
        except json.JSONDecodeError as exc:
            if not items:
                raise ImportFileError(f"{path}: line {number}: not valid JSON ({exc.msg})") from exc
            items.append((f"line {number}", Unreadable(f"not valid JSON ({exc.msg})")))
    return Source("json", iter(items), len(items))


def json_records_open(*, path: str | Path, holder: str) -> Source:
    """A JSON export of other records than users (a drip bot's tasks.json, a mongoexport
    collection), read as `import_source_open` reads users: a list, JSON lines, an object holding
    a list under `holder`, or an object keyed by id. Raises ImportFileError as it does."""
    path = Path(path)
    if not path.is_file():
        raise ImportFileError(f"{path}: no such file")
    return _open_json(path, holder=holder)


def _keyed_items(text: str, line_of) -> Iterator[tuple[str, object]]:
    """The values of a JSON object keyed by id (`{"1977988206": {...}, ...}`), each with its
    line and key; the key becomes the record's `_key` (its id, when it names none itself)."""
    decoder = json.JSONDecoder()
    pos = text.index("{") + 1
    while (pos := _skip(text, pos, " \t\r\n,")) < len(text) and text[pos] != "}":
        start = pos
        key, pos = decoder.raw_decode(text, pos)
        value, pos = decoder.raw_decode(text, _skip(text, pos, " \t\r\n:"))
        yield f"line {line_of(start)} (key {key!r})", {**value, KEY_FIELD: key}


def _skip(text: str, pos: int, chars: str) -> int:
    """The first position from `pos` on whose character is not one of `chars`."""
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _one_document(text: str) -> bool:
    """Whether a text starting with `{` is one JSON document (rather than JSON lines)."""
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _array_items(text: str, line_of) -> Iterator[tuple[str, object]]:
    """The elements of a JSON list, each with its line: the list is walked with raw_decode so
    every element knows where it starts (mongoexport --jsonArray writes them all on one line: the
    item number tells them apart)."""
    decoder = json.JSONDecoder()
    pos, n = text.index("[") + 1, 0
    while (pos := _skip(text, pos, " \t\r\n,")) < len(text) and text[pos] != "]":
        value, end = decoder.raw_decode(text, pos)
        n += 1
        yield f"line {line_of(pos)} (item {n})", value
        pos = end


def _open_sqlite(path: Path) -> Source:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"{path}: not a SQLite database ({exc})") from exc
    if "users" not in tables:
        conn.close()
        raise ImportFileError(f"{path}: the SQLite database has no users table (tables: {', '.join(sorted(tables)) or 'none'})")
    columns = [r[1].lower() for r in conn.execute("PRAGMA table_info(users)")]
    if not any(k in columns for k in ID_KEYS):
        conn.close()
        raise ImportFileError(f"{path}: the users table has no id column (one of {', '.join(ID_KEYS)})")
    total = conn.execute("SELECT COUNT(*) FROM users").fetchone()[0]

    def records():
        try:
            try:
                cursor = conn.execute("SELECT rowid AS _rowid_courier, * FROM users ORDER BY rowid")
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: rows are counted instead
                cursor = conn.execute("SELECT NULL AS _rowid_courier, * FROM users")
            names = [d[0].lower() for d in cursor.description]
            for number, (rowid, *values) in enumerate(cursor, 1):
                where = f"users rowid {rowid}" if rowid is not None else f"users row {number}"
                yield where, dict(zip(names[1:], values, strict=True))
        finally:
            conn.close()

    return Source("sqlite", records(), total, path)
