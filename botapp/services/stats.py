"""Counters: the day's deliveries, verifications and bypasses (/stats, the admin's *Daily stats*,
operator's calendar day), and each stored file's delivery count and last delivery.

Every delivery moves them, so they are not updated on the way: one row updated by every delivery
(today's DailyStat, or a popular file's StoredFile) would make deliveries queue behind each other
on its lock. A count is one INSERT instead (a CounterEntry: inserts never wait for each other),
made in the transaction of what it counts: a verification's with the token it spends, a
delivery's with its pending deletion. `counters_flush` adds what waits to DailyStat and StoredFile:
every minute (the `flush_counters` job) and before anything shows these numbers (/stats, the
admin's *Daily stats* and *Stored files* pages, the dashboard), so what an operator reads is up to
date.

A flush takes waiting entries (`FOR UPDATE SKIP LOCKED`: two flushes never take the same one),
deletes them and adds them up in one transaction: an entry is added exactly once, or stays for the
next flush when the transaction fails. Everything is in PostgreSQL, so neither a Redis restart
nor a crashed process loses a count (counters waited in Redis until issue 21: a Redis restarted
empty lost up to a minute of them).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from datetime import date, datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Sum, Value
from django.db.models.functions import Coalesce, Greatest

from botapp import clock
from botapp.models import ButtonClick, CounterEntry, DailyStat, StoredFile

log = logging.getLogger(__name__)

FIELDS = ("deliveries", "verifications", "bypasses")
BATCH = 10_000  # entries a flush takes per transaction

_INSERT = None  # the INSERT of one entry, compiled once (runbot makes it on every delivery)


def _insert_sql() -> str:
    global _INSERT
    if _INSERT is None:
        quote, meta = connection.ops.quote_name, CounterEntry._meta
        columns = [meta.get_field(f).column for f in ("day", *FIELDS, "file_id", "delivered_at")]
        _INSERT = (
            f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))})"
        )
    return _INSERT


def _count(*, deliveries: int = 0, verifications: int = 0, bypasses: int = 0, file_id=None, at=None) -> None:
    """One entry: one statement, no row shared with another delivery."""
    day = connection.ops.adapt_datefield_value(clock.today())
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(), [day, deliveries, verifications, bypasses, file_id, at])


def stat_increment(*, field: str, by: int = 1) -> None:
    """Add `by` to today's total of `field` (one of FIELDS, or a ValueError): one INSERT, in the
    caller's transaction when there is one (counted exactly when what it counts commits); in the
    database after the next flush."""
    if field not in FIELDS:
        raise ValueError(field)
    _count(**{field: by})


def delivery_count(*, stored_id: int, at: datetime) -> None:
    """A delivery of a stored file: today's deliveries, the file's count and its last delivery (one
    INSERT, in the caller's transaction when there is one)."""
    _count(deliveries=1, file_id=stored_id, at=at)


# Take up to %s waiting entries no other flush holds, delete them, and return their sums by day
# and file (a day's entries without a file in the rows whose file is NULL).
_TAKE = """
WITH taken AS (
  DELETE FROM {table} WHERE {id} IN (SELECT {id} FROM {table} ORDER BY {id} LIMIT %s FOR UPDATE SKIP LOCKED)
  RETURNING {day}, {deliveries}, {verifications}, {bypasses}, {file_id}, {delivered_at}
)
SELECT {day}, {file_id}, SUM({deliveries}), SUM({verifications}), SUM({bypasses}), MAX({delivered_at}), COUNT(*)
FROM taken GROUP BY {day}, {file_id}
"""


def _take_sql() -> str:
    quote, meta = connection.ops.quote_name, CounterEntry._meta
    names = {f: quote(meta.get_field(f).column) for f in ("id", "day", *FIELDS, "file_id", "delivered_at")}
    return _TAKE.format(table=quote(meta.db_table), **names)


def _apply(days: dict[date, Counter], files: dict[int, tuple[int, datetime | None]]) -> None:
    """Add day totals and files' (count, last delivery) to DailyStat and StoredFile, in a fixed
    order (two flushes lock the rows in the same order: no deadlock)."""
    for day, fields in sorted(days.items()):
        fields = {f: n for f, n in fields.items() if n}
        if not fields:
            continue
        change = {field: F(field) + n for field, n in fields.items()}
        if DailyStat.objects.filter(date=day).update(**change):
            continue
        try:
            with transaction.atomic():
                DailyStat.objects.create(date=day, **fields)
        except IntegrityError:  # another process created the day's row first
            DailyStat.objects.filter(date=day).update(**change)
    for pk, (n, at) in sorted(files.items()):
        change = {"delivery_count": F("delivery_count") + n}
        if at is not None:
            change["last_delivered_at"] = Greatest(Coalesce("last_delivered_at", Value(at)), Value(at))
        StoredFile.objects.filter(pk=pk).update(**change)  # a file deleted meanwhile: nothing to update


def _flush_batch() -> tuple[Counter, set[int], int]:
    """One transaction: take up to BATCH entries, add them. Returns (day totals added by field,
    the files counted, entries taken)."""
    days: dict[date, Counter] = defaultdict(Counter)
    files: dict[int, tuple[int, datetime | None]] = {}
    taken = 0
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_take_sql(), [BATCH])
            rows = cursor.fetchall()
        for day, file_id, deliveries, verifications, bypasses, at, n in rows:
            taken += n
            days[day].update({"deliveries": deliveries, "verifications": verifications, "bypasses": bypasses})
            if file_id is not None:  # a file delivered on two days comes in two rows
                count, last = files.get(file_id, (0, None))
                files[file_id] = (count + deliveries, at if last is None or (at is not None and at > last) else last)
        _apply(days, files)
    added = Counter()
    for fields in days.values():
        added.update(fields)
    return added, set(files), taken


def counters_flush() -> Counter:
    """Add the waiting counts to DailyStat and StoredFile (see the module's text), every one exactly
    once. Returns what it added: day totals by field, and "files" (how many files' counts); an
    empty Counter when nothing waited. A failure raises, and what it took waits for the next flush."""
    added, files = Counter(), set()
    while True:
        batch, counted, taken = _flush_batch()
        added.update(batch)
        files |= counted
        if taken < BATCH:
            break
    added["files"] = len(files)
    return +added


def counters_waiting() -> Counter:
    """What waits for a flush, counted as `counters_flush` would add it (for a dry run)."""
    totals = CounterEntry.objects.aggregate(**{f: Coalesce(Sum(f), 0) for f in FIELDS}, files=Count("file_id", distinct=True))
    return Counter(totals)


def stat_today() -> dict[str, int]:
    """Today's totals, flushed first so they are exact."""
    counters_flush()
    row = DailyStat.objects.filter(date=clock.today()).values(*FIELDS).first()
    return row or dict.fromkeys(FIELDS, 0)


def button_clicks_by_key() -> dict[str, int]:
    """Clicks per button key, the most clicked first, as the drip bot's /stats counted them
    (`SELECT button_type, COUNT(*) FROM button_clicks GROUP BY button_type`, shared/seeds/002):
    every tap of a callback button, a tracked link once per user (opened again, it cannot be
    told from a replay), and the clicks an import carried. One query."""
    rows = ButtonClick.objects.values_list("button").annotate(n=Sum("count")).order_by("-n", "button")
    return dict(rows)
