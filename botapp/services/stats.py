"""Counters: the day's deliveries, verifications and bypasses (/stats, the admin's *Daily stats*,
operator's calendar day), and each stored file's delivery count and last delivery.

Every delivery moves them, so they are not written to the database on the way: one row updated by
every delivery (today's DailyStat, or a popular file's StoredFile) would make deliveries queue
behind each other on its lock. An increment goes to one Redis hash instead (one round trip, no
SQL), and `counters_flush` adds what waits there to the database: every minute (the
`flush_counters` job) and before anything shows these numbers (/stats, the admin's *Daily stats*
and *Stored files* pages), so what an operator reads is up to date.

A flush takes the waiting increments as one batch (Redis renames the hash, so increments made
meanwhile wait for the next flush), adds them in one database transaction, and claims the batch
(deletes it in Redis, only if it is still there) just before committing: of two flushes that took
the same batch only one commits it. A flush that fails before its claim leaves the batch for the
next one; a flush killed between its claim and its commit loses that batch (at most once, as a
delivery that dies before counting itself).

Without a Redis cache (CACHE_URL=locmemcache://: the sandbox, one process) and whenever Redis does
not answer, increments go straight to the database, as they did before.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from datetime import date, datetime

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from redis import RedisError

from botapp import clock
from botapp.cache import cache_answered, cache_failed, cache_usable
from botapp.models import DailyStat, StoredFile

log = logging.getLogger(__name__)

FIELDS = ("deliveries", "verifications", "bypasses")
PENDING = "counters"  # cache keys (with the cache's prefix)
FLUSHING = "counters:flushing"

# Take the waiting increments as a batch, or the batch a flush left unfinished.
_TAKE = """
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[2], '_batch', ARGV[1])
end
return redis.call('HGETALL', KEYS[2])
"""
# Claim the batch for the transaction about to commit it: 1 for exactly one flush.
_CLAIM = """
if redis.call('HGET', KEYS[1], '_batch') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _redis():
    """The cache's Redis client, or None when the cache is not Redis."""
    cache = caches["default"]
    return cache._cache.get_client(write=True) if isinstance(cache, RedisCache) else None


def _key(name: str) -> str:
    return caches["default"].make_key(name)


def _add(counts: dict[str, int | str]) -> None:
    """Record increments ({"day|<date>|<field>": n, "file|<id>|n": n}) and last deliveries
    ({"file|<id>|at": iso time}): in Redis in one script call (a flush never takes half of them)."""
    client = _redis() if cache_usable() else None
    if client is not None:
        try:
            args = []
            for name, value in counts.items():
                args += [name, "i" if isinstance(value, int) else "s", value]
            _add_script(client)(keys=[_key(PENDING)], args=args, client=client)
            cache_answered()
            return
        except RedisError as exc:
            cache_failed(exc, "counters go straight to the database")
    with transaction.atomic():
        _apply(counts)


# Increments (HINCRBY) and values (HSET) into the waiting hash, atomically, in one round trip:
# ARGV holds (name, "i" or "s", value) triples.
_ADD = """
for i = 1, #ARGV, 3 do
  if ARGV[i + 1] == 'i' then
    redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 2])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  end
end
return 1
"""
_scripts: dict[int, object] = {}


def _add_script(client):
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(_ADD)
    return script


def stat_increment(*, field: str, by: int = 1) -> None:
    """Add `by` to today's total of `field` (one of FIELDS, or a ValueError), without SQL when Redis
    answers: it is in the database after the next flush."""
    if field not in FIELDS:
        raise ValueError(field)
    _add({f"day|{clock.today().isoformat()}|{field}": by})


def delivery_count(*, stored_id: int, at: datetime) -> None:
    """A delivery of a stored file: today's deliveries, the file's count and its last delivery."""
    _add({f"day|{clock.today().isoformat()}|deliveries": 1, f"file|{stored_id}|n": 1, f"file|{stored_id}|at": at.isoformat()})


def _apply(counts: dict) -> Counter:
    """Add counts (as `_add` takes them, or as Redis returns them) to the database; returns the
    day totals added, by field."""
    days: dict[date, Counter] = defaultdict(Counter)
    files: dict[int, list] = defaultdict(lambda: [0, None])
    for name, value in counts.items():
        name = name.decode() if isinstance(name, bytes) else name
        value = value.decode() if isinstance(value, bytes) else value
        kind, ident, what = name.split("|")
        if kind == "day":
            days[date.fromisoformat(ident)][what] += int(value)
        elif what == "n":
            files[int(ident)][0] += int(value)
        else:
            files[int(ident)][1] = datetime.fromisoformat(value)
    added = Counter()
    for day, fields in sorted(days.items()):
        added.update(fields)
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
    added["files"] = len(files)
    return added


def counters_flush() -> Counter:
    """Add the increments waiting in Redis to the database (see the module's text). Returns what
    it added: day totals by field, and "files" (how many files' counts). Nothing when Redis does
    not answer (logged): the increments wait for the next flush."""
    client = _redis()
    if client is None:
        return Counter()
    try:
        taken = batch_take(client=client)
        if taken is None:
            return Counter()
        batch, counts = taken
        return batch_commit(client=client, batch=batch, counts=counts)
    except RedisError as exc:
        log.warning("Redis unreachable: counters not flushed this time: %s", exc)
        return Counter()


def batch_take(*, client) -> tuple[str, dict] | None:
    """(batch id, counts) of the waiting increments, or of the batch a flush left unfinished."""
    raw = client.eval(_TAKE, 2, _key(PENDING), _key(FLUSHING), uuid.uuid4().hex)
    if not raw:
        return None
    counts = dict(zip(raw[::2], raw[1::2], strict=True))
    return counts.pop(b"_batch").decode(), counts


def batch_commit(*, client, batch: str, counts: dict) -> Counter:
    """Add the batch to the database and claim it just before the commit; nothing (rolled back)
    when another flush claimed it first."""
    with transaction.atomic():
        added = _apply(counts)
        if not client.eval(_CLAIM, 1, _key(FLUSHING), batch):
            transaction.set_rollback(True)
            return Counter()
    return added


def counters_waiting() -> Counter:
    """What waits in Redis for a flush, counted as `counters_flush` would add it (for a dry run)."""
    client = _redis()
    waiting, files = Counter(), set()
    if client is None:
        return waiting
    for key in (_key(PENDING), _key(FLUSHING)):
        for name, value in client.hgetall(key).items():
            kind, ident, what = (name.decode().split("|") + ["", ""])[:3]
            if kind == "day":
                waiting[what] += int(value)
            elif kind == "file":
                files.add(ident)
    waiting["files"] = len(files)
    return waiting


def stat_today() -> dict[str, int]:
    """Today's totals, flushed first so they are exact."""
    counters_flush()
    row = DailyStat.objects.filter(date=clock.today()).values(*FIELDS).first()
    return row or dict.fromkeys(FIELDS, 0)
