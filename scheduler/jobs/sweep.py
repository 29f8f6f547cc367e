"""The durable-sweep loop (ARCHITECTURE.md, "Scheduled work"): claim a batch of due rows in a short
transaction, work on them concurrently with no row lock held, record every result in bulk, and
repeat until nothing is due or the time budget is spent. Queries per batch do not depend on its size.
"""

from __future__ import annotations

import logging
import math
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from django.db import close_old_connections

from botapp.telegram.gateway import BotUnauthorized
from scheduler.jobs.registry import Outcome

log = logging.getLogger(__name__)

Row = TypeVar("Row")
Result = TypeVar("Result")


@dataclass
class RowIsolation(Generic[Row, Result]):
    """What both loops take, and a row's isolation: a row's failure is that row's result. `work` handles Telegram's answers itself; anything
    else it raises (Redis down in the limiter, a bug building the message) hands the row back
    untouched through `handback(row, exc)`, and the run claims nothing more (the next run tries
    again, rather than this one spinning on the same row). BotUnauthorized hands the row back too,
    then stops the run and is raised once every other result is recorded."""

    claim: Callable[[int], Sequence[Row]]  # claim up to n due rows (and lease them)
    work: Callable[[Row], Result]  # Telegram calls for one row
    record: Callable[[Sequence[Result]], tuple[int, int]]  # store results; returns (processed, failed)
    handback: Callable[[Row, Exception], Result] | None = None
    # Rows per call of `work_many(rows) -> [Result or the Exception that row raised]`, when the
    # job has one (Telegram calls for several rows at once: a container of sends, one delete).
    work_many: Callable[[Sequence[Row]], list] | None = None
    group: int = 1
    handed_back: int = field(default=0, init=False)
    fatal: BaseException | None = field(default=None, init=False)

    def _isolated(self, row: Row) -> Result:
        try:
            return self.work(row)
        except Exception as exc:
            return self._handed_back(row, exc)

    def _handed_back(self, row: Row, exc: Exception) -> Result:
        if self.handback is None:
            raise exc
        if isinstance(exc, BotUnauthorized):
            self.fatal = exc
        else:
            log.error("row handed back untouched: %r", row, exc_info=exc)
        self.handed_back += 1
        return self.handback(row, exc)

    def _work_in_pool(self, row: Row) -> Result:
        try:
            return self._isolated(row)
        finally:
            # A pool thread that touched the database keeps its own connection: like a request,
            # drop it when broken or too old.
            close_old_connections()

    def _work_group(self, rows: Sequence[Row]) -> list[Result]:
        try:
            if self.work_many is None:
                return [self._isolated(row) for row in rows]
            try:
                outcomes = self.work_many(rows)
            except Exception as exc:  # noqa: BLE001 - every row of the group goes back
                outcomes = [exc] * len(rows)
            return [self._handed_back(r, o) if isinstance(o, Exception) else o for r, o in zip(rows, outcomes, strict=True)]
        finally:
            close_old_connections()

    def _stopping(self) -> bool:
        return bool(self.handed_back or self.fatal)


@dataclass
class Sweep(RowIsolation[Row, Result]):
    batch_size: int = 500
    time_budget: float = 50.0  # seconds; beat fires again soon after
    concurrency: int = 8

    def run(self) -> tuple[int, int, int]:
        """Returns (processed, failed, batches)."""
        deadline = time.monotonic() + self.time_budget
        processed = failed = batches = 0
        executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="sweep") if self.concurrency > 1 else None
        try:
            while time.monotonic() < deadline:
                rows = self.claim(self.batch_size)
                if not rows:
                    break
                if self.work_many is not None:
                    groups = [rows[i : i + self.group] for i in range(0, len(rows), self.group)]
                    done_groups = executor.map(self._work_group, groups) if executor else map(self._work_group, groups)
                    results = [r for group in done_groups for r in group]
                else:
                    results = list(executor.map(self._work_in_pool, rows)) if executor else [self._isolated(r) for r in rows]
                done, bad = self.record(results)
                processed += done
                failed += bad
                batches += 1
                if len(rows) < self.batch_size or self._stopping():
                    break
        finally:
            if executor:
                executor.shutdown(wait=True)
        if self.fatal is not None:
            raise self.fatal
        return processed, failed, batches


def sweep_outcome(job, *, batch_size: int, time_budget: float, concurrency: int = 8) -> Outcome:
    """Run a sweep over `job` (an object with claim, work and record, and maybe work_many with
    its `group` size) and say what it did. A job that works in groups (work_many: one Telegram
    call for many rows, the deletion sweeps) runs as a `Stream` of `concurrency` groups in flight,
    so that claiming the next batch and recording the last one overlap the calls instead of
    stopping them; a job that works row by row runs in `Sweep`."""
    work_many = getattr(job, "work_many", None)
    loop = Stream if work_many is not None else Sweep
    options = {"in_flight": concurrency} if loop is Stream else {"concurrency": concurrency}
    processed, failed, batches = loop(
        job.claim,
        job.work,
        job.record,
        batch_size=batch_size,
        time_budget=time_budget,
        handback=getattr(job, "handback", None),
        work_many=work_many,
        group=getattr(job, "group", 1),
        **options,
    ).run()
    return Outcome(processed, failed, detail=f"{batches} batch(es)")


@dataclass
class Stream(RowIsolation[Row, Result]):
    """The sending loop for user-visible sends (broadcasts, scheduled messages, sequence steps).

    Unlike `Sweep`, nothing waits for the slowest send of a batch: the next batch is claimed while
    the current one is still being sent, once fewer than two rounds of `in_flight` sends are left
    (so the senders never wait for a claim, and a worker leases no more than it sends soon: other
    workers starting a little later still find rows to share), `in_flight` sends run
    concurrently at the limiter's pace, and results are recorded in bulk whenever a batch's worth
    is in (or `flush_interval` has passed, or the stream ran dry). Claims and records run in the
    calling thread; only `work` runs on the pool.
    """

    batch_size: int = 200
    time_budget: float = 50.0
    in_flight: int = 8  # threads sending at once
    flush_interval: float = 1.0

    def run(self) -> tuple[int, int, int]:
        """Returns (processed, failed, batches claimed)."""
        deadline = time.monotonic() + self.time_budget
        processed = failed = batches = 0
        outstanding = 0  # submitted and not yet collected
        finished: queue.SimpleQueue[Future] = queue.SimpleQueue()  # each send's future, as it completes
        results: list[Result] = []
        dry = False
        last_record = time.monotonic()
        executor = ThreadPoolExecutor(self.in_flight, thread_name_prefix="send")
        group = self.group if self.work_many is not None else 1
        low_water = max(1, min(self.batch_size, 2 * self.in_flight * group))  # claim again below this many outstanding

        def flush() -> None:
            nonlocal processed, failed, results, last_record
            if results:
                done, bad = self.record(results)
                processed += done
                failed += bad
            results, last_record = [], time.monotonic()

        def collect(timeout: float | None) -> None:
            """Take the completed sends: block up to `timeout` for the first, then whatever is there."""
            nonlocal outstanding
            try:
                future = finished.get(timeout=timeout) if timeout else finished.get_nowait()
            except queue.Empty:
                return
            while True:
                done = future.result()
                outstanding -= len(done)
                results.extend(done)
                try:
                    future = finished.get_nowait()
                except queue.Empty:
                    return

        try:
            while True:
                if not dry and outstanding < low_water and not self._stopping():
                    rows = self.claim(self.batch_size) if time.monotonic() < deadline else []
                    batches += bool(rows)
                    dry = len(rows) < self.batch_size
                    for start in range(0, len(rows), group):
                        executor.submit(self._work_group, rows[start : start + group]).add_done_callback(finished.put)
                    outstanding += len(rows)
                if not outstanding:
                    break
                collect(self.flush_interval)
                if len(results) >= self.batch_size or time.monotonic() - last_record >= self.flush_interval:
                    flush()
        finally:
            executor.shutdown(wait=True)
            while not finished.empty():  # after an error: record every send that completed
                future = finished.get_nowait()
                if future.exception() is None:
                    results.extend(future.result())
            flush()
        if self.fatal is not None:
            raise self.fatal
        return processed, failed, batches


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


def stream_outcome(job, *, batch_size: int, time_budget: float) -> Outcome:
    """Run `stream_for(job)` and say what it did."""
    processed, failed, batches = stream_for(job, batch_size=batch_size, time_budget=time_budget).run()
    return Outcome(processed, failed, detail=f"{batches} batch(es)")


# The slowest answer from Telegram a sender plans for: enough sends must be in flight to keep the
# rate while each waits this long (rate × latency), and no more (each is a thread).
ANSWER_TIME = 0.25


def sends_in_flight(rate: float | None = None) -> int:
    from botapp.telegram.limiter import global_rate

    return max(4, min(256, math.ceil((global_rate() if rate is None else rate) * ANSWER_TIME)))


def stream_for(job, *, batch_size: int, time_budget: float, rate: float | None = None) -> Stream:
    """The Stream over `job` (claim, work, record, and work_many if it has one) for the limiter's
    `rate` (default: the configured one): sends_in_flight(rate) sends in flight, in groups of the
    limiter's batch when the job sends in batches (at the free rate a batch is one send: `work`)."""
    from botapp.telegram.limiter import send_batch_size

    work_many = getattr(job, "work_many", None)
    group = send_batch_size(rate) if work_many is not None else 1
    return Stream(
        job.claim,
        job.work,
        job.record,
        batch_size=batch_size,
        time_budget=time_budget,
        in_flight=math.ceil(sends_in_flight(rate) / group),
        handback=getattr(job, "handback", None),
        work_many=work_many if group > 1 else None,
        group=group,
    )
