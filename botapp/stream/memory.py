"""The streaming process's heap: the parts it reads are 1 MiB bytes objects, made and dropped by
the hundred per second, and glibc's malloc keeps the memory they took.

glibc serves the first allocations this big with mmap, then raises its mmap threshold to the
size of one freed (its "dynamic threshold"): from then on the parts come from the heap, which is
fast (no page faults, no system calls) but keeps its free pages. After 100 streams the process
would stay near its peak for good. Fixing the threshold instead (mallopt M_MMAP_THRESHOLD) costs
a map, faults and an unmap for each part's buffers (tests/botapp/test_stream_memory.py measures
both), so the heap is kept as it is, and what it holds free is given back now and then
(`HeapTrimmer`: malloc_trim(3), every TRIM_EVERY seconds after streams have ended).

glibc only: elsewhere (musl, macOS) nothing is trimmed, and the log says so once.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

TRIM_EVERY = 30.0  # seconds between two looks at whether streams ended (and the heap is trimmed)


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return libc if hasattr(libc, "malloc_trim") else None
    except (OSError, TypeError):
        return None


_LIBC = _libc()


def heap_give_back() -> bool:
    """Give the heap's free pages back to the system (malloc_trim(0): every arena, not only the
    top of the main heap); False where there is no glibc."""
    if _LIBC is None:
        return False
    _LIBC.malloc_trim(0)
    return True


class HeapTrimmer:
    """Trims the heap every TRIM_EVERY seconds when streams ended since the last trim (`ended`
    is told by each stream's end); run on the process's loop from start to stop."""

    def __init__(self, every: float = TRIM_EVERY):
        self.every = every
        self.ended = 0
        self._trimmed_at = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if _LIBC is None:
            log.info("streaming process: no glibc malloc_trim here; the heap keeps what it took")
            return
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.trim_if_ended()

    async def trim_if_ended(self) -> bool:
        """Trim (in a thread: it walks the heap) when streams ended since the last trim."""
        if self.ended == self._trimmed_at:
            return False
        self._trimmed_at = self.ended
        return await asyncio.to_thread(heap_give_back)
