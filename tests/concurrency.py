import threading

from django.db import connection


def run_in_threads(fn, n: int = 2, *, timeout: float = 60.0) -> list:
    """Run fn() in n threads at once (each with its own database connection); returns their
    results. Fails if any thread raised (with its exception) or did not finish in `timeout`: a
    crashed thread must not pass a concurrency test by returning fewer results."""
    results, errors = [], []

    def run():
        try:
            results.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} of {n} threads did not finish in {timeout}s"
    if errors:
        raise AssertionError(f"{len(errors)} of {n} threads raised") from errors[0]
    return results
