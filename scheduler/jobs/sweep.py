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
    handed_back: int = field(default=0, init=False)
    fatal: BaseException | None = field(default=None, init=False)

    def _isolated(self, row: Row) -> Result:
        try:
            return self.work(row)
        except Exception as exc:
            if self.handback is None:
                raise
            if isinstance(exc, BotUnauthorized):
                self.fatal = exc
            else:
                log.exception("row handed back untouched: %r", row)
            self.handed_back += 1
            return self.handback(row, exc)

    def _work_in_pool(self, row: Row) -> Result:
        try:
            return self._isolated(row)
        finally:
            # A pool thread that touched the database keeps its own connection: like a request,
            # drop it when broken or too old.
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
    """Run a sweep over `job` (an object with claim, work and record) and say what it did."""
    processed, failed, batches = Sweep(
        job.claim,
        job.work,
        job.record,
        batch_size=batch_size,
        time_budget=time_budget,
        concurrency=concurrency,
        handback=getattr(job, "handback", None),
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
    in_flight: int = 8
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
        low_water = max(1, min(self.batch_size, 2 * self.in_flight))  # claim again below this many outstanding

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
                outstanding -= 1
                results.append(future.result())
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
                    for row in rows:
                        executor.submit(self._work_in_pool, row).add_done_callback(finished.put)
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
                    results.append(future.result())
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
    """Run a Stream over `job` (claim, work, record) with as many sends in flight as the rate needs."""
    processed, failed, batches = Stream(
        job.claim,
        job.work,
        job.record,
        batch_size=batch_size,
        time_budget=time_budget,
        in_flight=sends_in_flight(),
        handback=getattr(job, "handback", None),
    ).run()
    return Outcome(processed, failed, detail=f"{batches} batch(es)")


# The slowest answer from Telegram a sender plans for: enough sends must be in flight to keep the
# rate while each waits this long (rate × latency), and no more (each is a thread).
ANSWER_TIME = 0.25


def sends_in_flight() -> int:
    from botapp.telegram.limiter import global_rate

    return max(4, min(256, math.ceil(global_rate() * ANSWER_TIME)))
