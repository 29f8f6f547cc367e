"""The durable-sweep loop (ARCHITECTURE.md, "Scheduled work"): claim a batch of due rows in a short
transaction, work on them concurrently with no row lock held, record every result in bulk, and
repeat until nothing is due or the time budget is spent. Queries per batch do not depend on its size.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from django.db import close_old_connections

from scheduler.jobs.registry import Outcome

log = logging.getLogger(__name__)

Row = TypeVar("Row")
Result = TypeVar("Result")


@dataclass
class Sweep(Generic[Row, Result]):
    claim: Callable[[int], Sequence[Row]]  # claim up to n due rows (and lease them)
    work: Callable[[Row], Result]  # Telegram calls for one row; must not raise
    record: Callable[[Sequence[Result]], tuple[int, int]]  # store results; returns (processed, failed)
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
                results = list(executor.map(self._work_in_pool, rows)) if executor else [self.work(r) for r in rows]
                done, bad = self.record(results)
                processed += done
                failed += bad
                batches += 1
                if len(rows) < self.batch_size:
                    break
        finally:
            if executor:
                executor.shutdown(wait=True)
        return processed, failed, batches

    def _work_in_pool(self, row: Row) -> Result:
        try:
            return self.work(row)
        finally:
            # A pool thread that touched the database keeps its own connection: like a request,
            # drop it when broken or too old.
            close_old_connections()


def sweep_outcome(job, *, batch_size: int, time_budget: float, concurrency: int = 8) -> Outcome:
    """Run a sweep over `job` (an object with claim, work and record) and say what it did."""
    processed, failed, batches = Sweep(
        job.claim, job.work, job.record, batch_size=batch_size, time_budget=time_budget, concurrency=concurrency
    ).run()
    return Outcome(processed, failed, detail=f"{batches} batch(es)")
