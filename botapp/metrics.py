"""What a monitoring system scrapes at /metrics (Prometheus' text format), counted where it happens.

Counters and histograms are prometheus_client's. In a deployment every process (gunicorn's
workers, runbot, each Celery worker) writes its values to files in PROMETHEUS_MULTIPROC_DIR and the
web process adds them up at each scrape (multiprocess mode): the variable must be set, to one
folder emptied at each start, for every process before it starts. Without it each process counts
for itself and nothing is served (botapp/views.py). Counting costs a few microseconds.

Figures read from the database (rows pending, how late the oldest is) are not counted here: the
scrape asks for them (`PendingCollector`).

Names follow Prometheus' conventions: `courier_` prefix, base units (seconds), `_total` counters.
Every metric has labels, so that no value exists (and no file is written) before it is counted.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram

# Seconds: replies are expected within a second, a limiter wait of a bulk send up to a minute.
FAST = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SLOW = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600)

SENDS = Counter(
    "courier_sends_total",
    "Sends recorded by the sweeps, by kind (broadcast, sequence, deletion) and result (sent, failed, blocked, ...)",
    ["kind", "result"],
)
FLOOD_WAITS = Counter(
    "courier_flood_waits_total", "FloodWaits Telegram answered, by the lane of the sender (reply, bulk)", ["lane"]
)
FLOOD_WAIT_SECONDS = Counter(
    "courier_flood_wait_seconds_total", "Seconds of pause Telegram asked for in FloodWaits, by lane", ["lane"]
)
LIMITER_WAIT = Histogram(
    "courier_limiter_wait_seconds",
    "Time a sender waited for a slot of the shared limiter, by lane (reply, bulk)",
    ["lane"],
    buckets=FAST,
)
ADMISSIONS_LAPSED = Counter(
    "courier_admissions_lapsed_total",
    "Groups of sends the limiter admitted that could not be written in time (ADMITTED_FOR) and asked again, by lane",
    ["lane"],
)
JOB_RUNS = Counter("courier_job_runs_total", "Background job runs finished, by job and result (ok, failed)", ["job", "result"])
JOB_RUN_SECONDS = Histogram("courier_job_run_duration_seconds", "How long job runs took, by job", ["job"], buckets=SLOW)
UPDATE_SECONDS = Histogram(
    "courier_update_handling_seconds",
    "runbot: from an update's arrival to the end of its handling (replies sent), by kind of update",
    ["kind"],
    buckets=FAST,
)
# The streaming process (botapp/stream/), per bot token that read the file (its Downloader's name).
STREAM_BYTES = Counter("courier_stream_bytes_total", "Bytes of stored files sent to browsers and downloaders, by bot", ["bot"])
STREAMS_OPEN = Gauge(
    "courier_streams_open", "Streams being sent now, by bot (all processes added up)", ["bot"], multiprocess_mode="livesum"
)
STREAM_ANSWERS = Counter(
    "courier_stream_answers_total",
    "Answers of the streaming process, by status (200, 206, 403, 404, 416, 429, ...) and method",
    ["status", "method"],
)
STREAMS_CUT = Counter(
    "courier_streams_cut_total", "Streams ended short of their length (Telegram could not go on), by bot", ["bot"]
)
GETFILE_SECONDS = Histogram("courier_getfile_seconds", "Time of one upload.getFile call, answered, by bot", ["bot"], buckets=FAST)
GETFILE_ERRORS = Counter(
    "courier_getfile_errors_total", "upload.getFile calls that failed, by bot and error (Telegram's name)", ["bot", "error"]
)
ALL = (
    SENDS,
    FLOOD_WAITS,
    FLOOD_WAIT_SECONDS,
    ADMISSIONS_LAPSED,
    LIMITER_WAIT,
    JOB_RUNS,
    JOB_RUN_SECONDS,
    UPDATE_SECONDS,
    STREAM_BYTES,
    STREAMS_OPEN,
    STREAM_ANSWERS,
    STREAMS_CUT,
    GETFILE_SECONDS,
    GETFILE_ERRORS,
)


def sends_count(kind: str, results: Iterable[str]) -> None:
    """Count sends of one kind by their recorded result."""
    for result, n in collections.Counter(results).items():
        SENDS.labels(kind, result).inc(n)
