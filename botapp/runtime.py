"""Python's cyclic garbage collector, set for Courier's processes.

Every Courier process holds a large, long-lived heap from start-up (Django and its models, and
kurigram's thousands of TL classes) and then allocates objects by the million (each Telegram answer
is parsed into a tree of them). With CPython's default thresholds (700, 10, 10) a collection runs
every 700 net allocations, and every so often a full one walks the whole heap, with every thread
stopped: in the deletion sweep's process (bench/sweep.py, watched with gc.callbacks) that was a
large share of a run, and pauses long enough to show in its sends. So: what start-up made is
frozen (never walked again), and the young generation is collected every 10,000 net allocations
instead of 700. Cycles are still collected; they wait a little longer (a few MB at most).
"""

from __future__ import annotations

import gc

GC_THRESHOLD = (10_000, 10, 10)


def gc_tune() -> None:
    """Freeze what the process has built so far, and set the thresholds. Called when Django is
    ready (every process) and again once a Telegram client has signed in."""
    gc.set_threshold(*GC_THRESHOLD)
    gc.freeze()
