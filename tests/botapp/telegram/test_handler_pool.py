"""runbot's handler threads take waiting updates by priority, in order within one."""

import threading

import pytest

from botapp.telegram.handler_pool import PriorityPool


def test_a_free_thread_takes_the_first_priority_first_and_keeps_the_order_within_one():
    pool = PriorityPool(1)
    release, ran = threading.Event(), []
    busy = pool.submit(release.wait)  # the one thread is busy: the rest wait
    futures = [
        pool.submit_first(priority, ran.append, name)
        for priority, name in [(2, "flood 1"), (1, "new user"), (2, "flood 2"), (0, "admin"), (1, "new user 2")]
    ]
    release.set()
    for future in [busy, *futures]:
        future.result(timeout=10)
    assert ran == ["admin", "new user", "new user 2", "flood 1", "flood 2"]
    pool.shutdown()


def test_an_exception_reaches_whoever_waits_and_the_thread_goes_on():
    pool = PriorityPool(1)
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=10)
    assert pool.submit(lambda: 42).result(timeout=10) == 42
    pool.shutdown()


def test_shutting_down_runs_what_waits_then_refuses_new_calls():
    pool = PriorityPool(2)
    release, ran = threading.Event(), []
    for _ in range(2):
        pool.submit(release.wait)
    waiting = [pool.submit(ran.append, n) for n in range(5)]
    release.set()
    pool.shutdown(wait=True)
    assert ran == [0, 1, 2, 3, 4] and all(f.done() for f in waiting)
    assert not [t for t in pool._threads if t.is_alive()]
    with pytest.raises(RuntimeError):
        pool.submit(ran.append, 5)
