"""Due work on time: a job wakes at its earliest due row instead of at beat's next minute.

A job that wakes (`Job.wakes_on`, `Job.due_next` in the registry) keeps two Redis keys:

- `armed`: the due time of the one wake-up waiting for it (a Celery task published with a
  countdown) and that wake-up's token. Writing a due row earlier than it (or with none armed)
  arms a new wake-up; anything later is covered by the armed one, which, after its run, asks the
  database for the next due row and arms for it (`wakeup_after_run`). So a thousand writes arm one
  task, not a thousand. Set with a TTL: a wake-up lost with its worker frees the key soon after.
- `later`: the earliest due time written beyond HORIZON (not armed: an ETA task waits in a
  worker's memory, and Redis re-delivers one unacknowledged past its visibility timeout). A beat
  run that finds it within HORIZON asks the database and arms; an idle beat run reads only this key.

A woken run lingers: while the next due row is at most LINGER seconds away it waits for it and
runs again, within one JobRun, so a steady stream of due rows is one run, not one per row.

The minute sweep stays the safety net: with Redis or the broker lost, a worker killed holding a
wake-up, or a failed run (which never re-arms, so a bug cannot spin), rows go out at beat's next
run, as before. Nothing here sends or claims: the job's own sweep does (SKIP LOCKED), so a
wake-up running beside beat's run is harmless.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import redis
from celery import current_app
from django.conf import settings

from botapp import clock
from botapp.cache import cache_failed, cache_usable

if TYPE_CHECKING:
    from scheduler.jobs.registry import Job, Outcome

log = logging.getLogger(__name__)

# Arm no further ahead than this. Longer than the longest default beat interval (10 min,
# end_premium_plans), so beat sees every row within HORIZON before it is due; far shorter than the
# Redis broker's visibility timeout (1 h), past which an ETA task is handed to another worker too.
HORIZON = timedelta(minutes=15)
LINGER = 2.0  # seconds: a woken run waits this long at most for the next due row
LINGER_BUDGET = 50.0  # seconds a woken run keeps lingering; then it re-arms and ends
ARMED_GRACE = 120_000  # ms an armed key outlives its due time: a run's time budget, and more

# KEYS[1] armed; ARGV: due (ms), token, ttl (ms). 1 when armed (the caller publishes the task).
ARM = """
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(string.match(cur, '^(%d+)')) <= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
return 1
"""
# KEYS[1] armed; ARGV[1] token. 1 when it was that wake-up's (now deleted) or nobody's.
RELEASE = """
local cur = redis.call('GET', KEYS[1])
if not cur then return 1 end
if string.match(cur, ' (.+)$') == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
"""
# KEYS[1] later; ARGV[1] due (ms): keep the earliest.
LATER_MIN = """
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) <= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
# KEYS[1] later; ARGV: the value read ('' none), the new one ('' delete). Only if unchanged since.
LATER_REPLACE = """
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""

_client: redis.Redis | None = None
_scripts: dict[str, object] = {}

# What this process last learnt from Redis per (job, key): a due time (ms) the key holds or is
# earlier than, until when (monotonic) it is trusted. A row due at or after it, while it is still
# ahead, is covered without asking (runbot writes a deletion per /start: a Redis script call each
# cost it CPU on every update): the wake-up armed for it runs the job, which asks the database for the next
# due row (ours among them) and arms on; `later` is only ever replaced from the database too.
# Trusted for NOTED_TTL at most, so a key Redis lost (flushed, failed over) is re-armed within it;
# meanwhile beat's minute run is the safety net, as for any wake-up lost.
NOTED_TTL = 60.0
_noted: dict[tuple[str, str], tuple[int, float]] = {}


def _covered(job: str, which: str, due: int, now: int) -> bool:
    noted = _noted.get((job, which))
    return noted is not None and now < noted[0] <= due and time.monotonic() < noted[1]


def _note(job: str, which: str, due: int) -> None:
    _noted[(job, which)] = (due, time.monotonic() + NOTED_TTL)


def wakeup_notes_forget() -> None:
    """Ask Redis again for every job (a test that cleared Redis; a run of the job in this process)."""
    _noted.clear()


def _redis():
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None)
    return _client


def _script(source: str):
    if source not in _scripts:
        _scripts[source] = _redis().register_script(source)
    return _scripts[source]


def _key(job: str, which: str) -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX') or 'courier'}:wakeup:{job}:{which}"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _moment(ms: int | bytes | str) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)


def wakeup_arm(*, job: str, due: datetime) -> bool:
    """Have `job` run at `due` (at once when past): publish a wake-up unless one at or before `due`
    is armed already. A `due` beyond HORIZON is only noted (`later`). Never raises: with Redis or
    the broker down the minute sweep sends the row. True when a wake-up was published."""
    if not cache_usable():
        return False
    now = clock.now()
    which = "later" if due - now > HORIZON else "armed"
    if _covered(job, which, _ms(due), _ms(now)):
        return False
    try:
        if which == "later":
            _script(LATER_MIN)(keys=[_key(job, "later")], args=[_ms(due)])
            _note(job, "later", _ms(due))
            return False
        token = uuid.uuid4().hex
        ttl = max(0, _ms(due) - _ms(now)) + ARMED_GRACE
        if not _script(ARM)(keys=[_key(job, "armed")], args=[_ms(due), token, ttl]):
            _note(job, "armed", _ms(due))  # one at or before it is armed
            return False
    except redis.RedisError as exc:
        cache_failed(exc, f"arming {job}")
        return False
    countdown = max(0.0, (due - now).total_seconds())
    try:  # by name: scheduler/tasks.py defines `scheduler.<job>` (and imports this module)
        current_app.send_task(f"scheduler.{job}", kwargs={"trigger": "wakeup", "wakeup": token}, countdown=countdown, retry=False)
    except Exception as exc:  # the broker is down: beat's minute run sends it
        log.warning("could not arm a wake-up of %s at %s; beat's run will send it", job, due, exc_info=True)
        _release(job, token)
        # The broker is Redis too: runbot's next /start must not wait for its connect timeout again.
        cache_failed(exc, f"publishing a wake-up of {job}")
        return False
    _note(job, "armed", _ms(due))
    return True


def wakeup_current(*, job: str, token: str) -> bool:
    """Whether the wake-up `token` is still the armed one (or the key is gone: Redis lost it, or it
    timed out). A wake-up superseded by an earlier one skips its run: that one does its work."""
    try:
        armed = _redis().get(_key(job, "armed"))
    except redis.RedisError:
        return True
    return armed is None or armed.decode().endswith(f" {token}")


def _release(job: str, token: str) -> bool:
    try:
        return bool(_script(RELEASE)(keys=[_key(job, "armed")], args=[token]))
    except redis.RedisError:
        return True  # nobody can be relied on to hold it: ask the database


def _later(job: str) -> int | None:
    try:
        value = _redis().get(_key(job, "later"))
    except redis.RedisError:
        return None
    return int(value) if value is not None else None


def _later_replace(job: str, read: int | None, new: int | None) -> None:
    try:
        _script(LATER_REPLACE)(keys=[_key(job, "later")], args=["" if read is None else read, "" if new is None else new])
    except redis.RedisError:
        pass


def wakeup_after_run(job: Job, outcome: Outcome, *, token: str | None) -> None:
    """After a successful run of `job` (any trigger): arm for its next due row. The database is
    asked (one indexed query) only when the run did something, was the armed wake-up, or `later`
    has come within HORIZON: an idle beat run costs one Redis GET and no query."""
    if job.due_next is None:
        return
    for which in ("armed", "later"):  # what this process noted may be this run's to replace
        _noted.pop((job.name, which), None)
    worked = bool(outcome.processed or outcome.failed)
    released = token is not None and _release(job.name, token)
    later = _later(job.name)
    now = clock.now()
    if not (worked or released or (later is not None and _moment(later) - now <= HORIZON)):
        return
    due = job.due_next()
    if due is None:  # nothing pending: `later` is stale
        if later is not None:
            _later_replace(job.name, later, None)
        return
    if due <= now and not worked:
        return  # due, yet this run got none of it: another run holds it (and re-arms after), or beat retries
    if due - now > HORIZON:
        if later is not None and later < _ms(due):  # what it noted is gone (sent, cancelled)
            _later_replace(job.name, later, _ms(due))
        else:
            wakeup_arm(job=job.name, due=due)  # notes it in `later`
        return
    wakeup_arm(job=job.name, due=max(due, now))
    if later is not None:  # the wake-up armed now (or an earlier one) walks on to it
        _later_replace(job.name, later, None)


def wakeup_linger(job: Job, first: Outcome, run_again: Callable[[], Outcome]) -> Outcome:
    """A woken run: while the next due row is at most LINGER seconds away (or due, and the last
    pass did something), wait for it and run again, for LINGER_BUDGET seconds at most. Returns
    the passes' outcomes added up."""
    deadline = time.monotonic() + LINGER_BUDGET
    total, last, passes = first, first, 1
    while time.monotonic() < deadline:
        due = job.due_next()
        if due is None:
            break
        wait = (due - clock.now()).total_seconds()
        if wait > LINGER or (wait <= 0 and not (last.processed or last.failed)):
            break
        if wait > 0:
            time.sleep(min(wait, max(0.0, deadline - time.monotonic())))
        last = run_again()
        passes += 1
        total.processed += last.processed
        total.failed += last.failed
    if passes > 1:
        total.detail = f"{total.detail}, {passes} passes" if total.detail else f"{passes} passes"
    return total
