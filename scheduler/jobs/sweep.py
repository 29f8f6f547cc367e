"""The durable-sweep loop (docs/architecture.md, "Scheduled work: durable rows, swept"): claim a batch of due rows in a short
transaction, work on them concurrently with no row lock held, record every result in bulk, and
repeat until nothing is due or the time budget is spent. Queries per batch do not depend on its size.

One protocol, `SweepJob`: `claim(n)`, `work(row)`, `record(results)`, and optionally
`handback(row, exc)`, `work_many(rows)` with its `group` size. One loop, `Sweep`.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Generic, Protocol, TypeVar

from django.conf import settings
from django.db import close_old_connections

from botapp.telegram.gateway import BotUnauthorized
from botapp.telegram.limiter import global_rate, send_batch_size
from scheduler.jobs.registry import Outcome

log = logging.getLogger(__name__)

# Every sweep's lease: a row (or a broadcast's claim) whose sweeper is silent this long is taken
# back (the reaper, scheduler/jobs/claims.py; the broadcast deleter's claim moves delete_at this
# far on). Far longer than a claimed batch takes to work, so a live sweeper never loses its rows.
LEASE = timedelta(minutes=5)

Row = TypeVar("Row")
Result = TypeVar("Result")


class SweepJob(Protocol[Row, Result]):
    """What a job gives the loop. Optional, looked up with getattr:

    - `handback(row, exc) -> Result`: the result of a row whose `work` raised something other than
      Telegram's answer (Redis down in the limiter, a bug building the message): the row goes back
      untouched. Without it, such an exception ends the run.
    - `work_many(rows) -> [Result, or the Exception that row raised]`, with `group` (rows per
      call): Telegram calls for several rows at once (a container of sends, one delete).
    """

    def claim(self, n: int) -> Sequence[Row]: ...  # claim up to n due rows (and lease them)

    def work(self, row: Row) -> Result: ...  # Telegram calls for one row

    def record(self, results: Sequence[Result]) -> tuple[int, int]: ...  # store results; (processed, failed)


class RowsHandedBack(Exception):  # noqa: N818 - it says what happened to the rows
    """A run handed rows back untouched because of an exception that is not Telegram's answer (a
    bug, Redis down in the limiter, a message that cannot be built): the run fails, saying so."""


@dataclass
class Sweep(Generic[Row, Result]):
    """The loop. `in_flight` calls of `work` (or of `work_many`, `group` rows each) run at once
    on a pool, at the limiter's pace; nothing waits for the slowest of a batch: the next batch is
    claimed while the current one is in flight, once fewer than two rounds of calls are left
    outstanding (so the pool never waits for a claim, and a worker leases no more than it works
    soon: other workers starting a little later still find rows to share). Results are recorded
    in bulk whenever `record_rows` are in (a batch's worth by default), `flush_interval` has
    passed, or the rows ran out.
    Claims and records run in the calling thread. With `in_flight=1` the work runs there too, one
    batch at a time (claim, work, record), with no pool: a test inside a database transaction
    sees every row it wrote.

    A row's failure is that row's result: `work` handles Telegram's answers itself; anything else
    it raises hands the row back untouched through the job's `handback`, and the run claims nothing
    more (the next run tries again, rather than this one spinning on the same row), and once every
    other result is recorded the run fails loudly: `RowsHandedBack`, raised from the first such
    exception (the job run is *failed* with its traceback; nothing was recorded as Telegram's
    refusal). BotUnauthorized hands the row back too, then stops the run and is raised as it is.
    """

    job: SweepJob[Row, Result]
    batch_size: int = 200
    time_budget: float = 50.0  # seconds; beat fires again soon after
    in_flight: int = 8
    group: int | None = None  # rows per work_many call; default the job's own `group`, or 1
    flush_interval: float = 1.0
    record_rows: int = 0  # record once this many results are in (0: batch_size)
    handed_back: int = field(default=0, init=False)
    fatal: BaseException | None = field(default=None, init=False)
    first_error: Exception | None = field(default=None, init=False)  # the first row handed back for
    # The budget ran out while rows were still being claimed: work is left (Outcome.more).
    out_of_time: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.record_rows = self.record_rows or self.batch_size
        if self.group is None:
            self.group = getattr(self.job, "group", 1)
        # Groups of one row are worked by `work`: the same, without a list around each row.
        self._work_many = getattr(self.job, "work_many", None) if self.group > 1 else None
        if self._work_many is None:
            self.group = 1
        self._handback = getattr(self.job, "handback", None)

    def run(self) -> tuple[int, int, int]:
        """Returns (processed, failed, batches claimed)."""
        deadline = time.monotonic() + self.time_budget
        processed = failed = batches = 0
        outstanding = 0  # submitted to the pool and not yet collected
        finished: queue.SimpleQueue[Future] = queue.SimpleQueue()  # each call's future, as it completes
        results: list = []
        dry = False
        last_record = time.monotonic()
        executor = ThreadPoolExecutor(self.in_flight, thread_name_prefix="sweep") if self.in_flight > 1 else None
        # claim again below this many outstanding
        low_water = max(1, min(self.batch_size, 2 * self.in_flight * self.group))

        def flush() -> None:
            nonlocal processed, failed, results, last_record
            if results:
                done, bad = self.job.record(results)
                processed += done
                failed += bad
            results, last_record = [], time.monotonic()

        # The pool's calls report here as they complete; the loop sleeps until enough rows are back
        # for it to have something to do (a claim, a batch to record, the end) or a record is due,
        # not once per call: at the free rate that wake-up per send was a large share of a worker's CPU.
        done_lock = threading.Lock()
        woken = threading.Event()
        arrived = 0  # rows of completed calls not yet collected
        wanted = 1  # rows the loop waits for

        def completed(future: Future) -> None:
            nonlocal arrived
            with done_lock:
                finished.put(future)
                arrived += future.rows
                if arrived >= wanted:
                    woken.set()

        def collect(timeout: float) -> None:
            """Wait up to `timeout` for enough completed rows to act on, then take every completed call."""
            nonlocal outstanding, arrived, wanted
            claiming = not dry and time.monotonic() < deadline and not self._stopping()
            need = outstanding - low_water + 1 if claiming else outstanding
            with done_lock:
                wanted = max(1, min(need, self.record_rows - len(results)))
                if arrived < wanted:
                    woken.clear()
            if timeout > 0:
                woken.wait(timeout)
            with done_lock:
                while not finished.empty():
                    done = finished.get_nowait().result()
                    arrived -= len(done)
                    outstanding -= len(done)
                    results.extend(done)

        try:
            while True:
                claimed = False
                if not dry and outstanding < low_water and not self._stopping():
                    if time.monotonic() < deadline:
                        rows = self.job.claim(self.batch_size)
                    else:
                        rows, self.out_of_time = [], True
                    claimed = bool(rows)
                    batches += claimed
                    dry = len(rows) < self.batch_size
                    for start in range(0, len(rows), self.group):
                        group = rows[start : start + self.group]
                        if executor is None:
                            results.extend(self._work_group(group))
                        else:
                            future = executor.submit(self._work_pooled, group)
                            future.rows = len(group)
                            future.add_done_callback(completed)
                            outstanding += len(group)
                if executor is None:
                    if not claimed:
                        break
                else:
                    if not outstanding:
                        break
                    collect(last_record + self.flush_interval - time.monotonic() if results else self.flush_interval)
                if len(results) >= self.record_rows or time.monotonic() - last_record >= self.flush_interval:
                    flush()
        finally:
            if executor is not None:
                executor.shutdown(wait=True)
                while not finished.empty():  # after an error: record every call that completed
                    future = finished.get_nowait()
                    if future.exception() is None:
                        results.extend(future.result())
            flush()
        if self.fatal is not None:
            raise self.fatal
        if self.first_error is not None:
            raise RowsHandedBack(
                f"{self.handed_back} row(s) handed back untouched after "
                f"{type(self.first_error).__name__}: {self.first_error} ({processed} recorded first)"
            ) from self.first_error
        return processed, failed, batches

    def _work_group(self, rows: Sequence[Row]) -> list[Result]:
        if self._work_many is None:
            return [self._isolated(row) for row in rows]
        try:
            outcomes = self._work_many(rows)
        except Exception as exc:  # noqa: BLE001 - every row of the group goes back
            outcomes = [exc] * len(rows)
        return [self._handed_back(r, o) if isinstance(o, Exception) else o for r, o in zip(rows, outcomes, strict=True)]

    def _work_pooled(self, rows: Sequence[Row]) -> list[Result]:
        try:
            return self._work_group(rows)
        finally:
            # A pool thread that touched the database keeps its own connection: like a request,
            # drop it when broken or too old.
            close_old_connections()

    def _isolated(self, row: Row) -> Result:
        try:
            return self.job.work(row)
        except Exception as exc:
            return self._handed_back(row, exc)

    def _handed_back(self, row: Row, exc: Exception) -> Result:
        if self._handback is None:
            raise exc
        if isinstance(exc, BotUnauthorized):
            self.fatal = exc
        else:
            log.error("row handed back untouched: %r", row, exc_info=exc)
            if self.first_error is None:
                self.first_error = exc
        self.handed_back += 1
        return self._handback(row, exc)

    def _stopping(self) -> bool:
        return bool(self.handed_back or self.fatal)


def sweep_outcome(job, *, batch_size: int, time_budget: float, in_flight: int = 8) -> Outcome:
    """Run the sweep over `job` with `in_flight` calls at once (groups of the job's `group` rows
    when it has work_many: one Telegram call for many rows, the deletion sweeps) and say what it did."""
    return _outcome(Sweep(job, batch_size=batch_size, time_budget=time_budget, in_flight=in_flight))


def sends_outcome(job, *, batch_size: int, time_budget: float) -> Outcome:
    """Run `sends_sweep(job)` (user-visible sends at the limiter's rate) and say what it did."""
    return _outcome(sends_sweep(job, batch_size=batch_size, time_budget=time_budget))


def _outcome(sweep: Sweep) -> Outcome:
    processed, failed, batches = sweep.run()
    return Outcome(processed, failed, detail=f"{batches} batch(es)", more=sweep.out_of_time)


def message_or_error(source, build: Callable):
    """`build(source)`, or the exception it raised. Messages are built after the claim has leased
    their rows, so a message that cannot be built (PUBLIC_URL removed after a tracked button was
    composed) must not escape the claim and leave them leased: `work` raises the error for each of
    its rows instead, which hands them back untouched, and the run ends failed saying why."""
    try:
        return build(source)
    except Exception as exc:  # any reason at all: the rows must go back
        log.error("cannot build the message of %r: %s", source, exc)
        return exc


# The slowest answer from Telegram a sender plans for: enough sends must be in flight to keep the
# rate while each waits this long (rate × latency), and no more (each is a thread).
ANSWER_TIME = 0.25


def sends_in_flight(rate: float | None = None) -> int:
    if settings.SENDS_IN_FLIGHT:
        return settings.SENDS_IN_FLIGHT
    return max(4, min(256, math.ceil((global_rate() if rate is None else rate) * ANSWER_TIME)))


# A sender records its results once a second, or once RECORD_ROWS are in where that takes longer:
# a record is one transaction of several statements whatever its size, so recording more often
# costs the worker CPU for nothing (at the paid rate, a record every few hundred results cost
# far more CPU than one a second did). Progress and counters lag by that much; a crash meanwhile
# loses nothing (the rows stay leased: the reaper hands them back, and they go again with their
# random_ids).
RECORD_ROWS = 100


def sends_sweep(job, *, batch_size: int, time_budget: float, rate: float | None = None) -> Sweep:
    """The sweep of a job whose work is user-visible sends (broadcasts, scheduled messages,
    sequence steps), sized for the limiter's `rate` (default: the configured one):
    sends_in_flight(rate) sends in flight, in groups of the limiter's batch when the job sends in
    batches (work_many: pairs at the free rate), recording every second or RECORD_ROWS results,
    whichever takes longer."""
    group = send_batch_size(rate) if getattr(job, "work_many", None) is not None else 1
    pace = global_rate() if rate is None else rate
    flush_interval = max(1.0, RECORD_ROWS / pace)
    return Sweep(
        job,
        batch_size=batch_size,
        time_budget=time_budget,
        in_flight=math.ceil(sends_in_flight(rate) / group),
        group=group,
        flush_interval=flush_interval,
        record_rows=max(RECORD_ROWS, math.ceil(pace * flush_interval)),
    )
