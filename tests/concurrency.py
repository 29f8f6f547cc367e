import threading

from django.db import connection


def run_in_threads(fn, n: int = 2) -> list:
    """Run fn() in n threads at once (each with its own database connection); returns their results."""
    results = []

    def run():
        try:
            results.append(fn())
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
