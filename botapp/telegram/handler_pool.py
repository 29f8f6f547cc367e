"""runbot's handler threads, taking the waiting update of the first priority first.

A thread pool's queue is first come, first served: under a flood (one user's hundreds of messages a
minute, which fair use refuses but which still each take a thread for a moment) a new user's
/start, or an admin's command, waited behind all of it. Here each update is handed in with a
priority (the router's: admins first, then users the bot has not heard from in the last seconds,
then the rest) and a free thread takes the first of the first priority; updates of one priority
keep their order. An Executor, so the pump's other calls (and `loop.run_in_executor`) use it as
they used the thread pool.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from concurrent.futures import Executor, Future

DEFAULT = 1  # the priority of a call handed in without one


class PriorityPool(Executor):
    def __init__(self, threads: int, *, name: str = "update"):
        self._waiting: list[tuple[int, int, Future, object, tuple, dict]] = []
        self._ready = threading.Condition()
        self._order = itertools.count()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{n}", daemon=True) for n in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.submit_first(DEFAULT, fn, *args, **kwargs)

    def submit_first(self, priority: int, fn, /, *args, **kwargs) -> Future:
        """Run `fn(*args, **kwargs)` on the next free thread once nothing of a lower `priority`
        number waits (and after what waits of the same)."""
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            heapq.heappush(self._waiting, (priority, next(self._order), future, fn, args, kwargs))
            self._ready.notify()
        return future

    def waiting(self) -> int:
        with self._ready:
            return len(self._waiting)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return  # closed and drained
                _, _, future, fn, args, kwargs = heapq.heappop(self._waiting)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to whoever awaits the future, as a thread pool does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new calls; the waiting ones still run (unless `cancel_futures`), then the threads end."""
        with self._ready:
            self._closed = True
            if cancel_futures:
                for _, _, future, *_ in self._waiting:
                    future.cancel()
                self._waiting.clear()
            self._ready.notify_all()
        if wait:
            for thread in self._threads:
                thread.join()
