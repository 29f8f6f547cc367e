import pytest

from tests.concurrency import run_in_threads


def test_a_thread_that_raises_fails_the_concurrency_test():
    calls = iter([1])
    with pytest.raises(AssertionError, match="1 of 2 threads raised"):
        run_in_threads(lambda: 10 // next(calls, 0), n=2)  # the second thread divides by zero


def test_every_thread_s_result_comes_back():
    assert sorted(run_in_threads(lambda: 7, n=3)) == [7, 7, 7]
