"""Is everything running? What the console's dashboard and jobs page show: the task queue, Redis
and the database answering, and a heartbeat from each long-running process (the bot, every Celery
worker, beat).

A process records its heartbeat every HEARTBEAT_SECONDS in one Redis hash (field
"<process>:<name>", value the time); one that has not beaten for three intervals is stale, and a
process that stops cleanly removes its own field, so a stopped worker shows at once and a killed
one within three intervals."""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass

import redis
from celery import current_app
from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

PROCESSES = ("bot", "worker", "beat")


def _redis(url: str | None = None) -> redis.Redis:
    return redis.Redis.from_url(url or settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None)


def _key() -> str:
    # The cache's prefix: deployments (and test runs) that share a Redis keep apart.
    return f"{settings.CACHES['default'].get('KEY_PREFIX') or 'courier'}:heartbeats"


def stale_after() -> float:
    """Seconds without a heartbeat after which a process counts as stopped."""
    return 3 * settings.HEARTBEAT_SECONDS


def heartbeat_record(*, process: str, name: str = "") -> None:
    """Say that this process is alive now (one HSET; never raises: a heartbeat must not break
    the process it reports on)."""
    try:
        _redis().hset(_key(), f"{process}:{name or socket.gethostname()}", time.time())
    except redis.RedisError as exc:
        log.warning("heartbeat not recorded process=%s: %s", process, exc)


def heartbeat_forget(*, process: str, name: str = "") -> None:
    """This process stops cleanly: it is no longer running (rather than stale)."""
    try:
        _redis().hdel(_key(), f"{process}:{name or socket.gethostname()}")
    except redis.RedisError as exc:
        log.warning("heartbeat not removed process=%s: %s", process, exc)


def heartbeat_start(*, process: str, name: str = "") -> threading.Event:
    """Beat now and every HEARTBEAT_SECONDS from a daemon thread, until the returned event is set
    (then the heartbeat is removed)."""
    stop = threading.Event()

    def beat():
        while not stop.is_set():
            heartbeat_record(process=process, name=name)
            stop.wait(settings.HEARTBEAT_SECONDS)
        heartbeat_forget(process=process, name=name)

    threading.Thread(target=beat, name=f"heartbeat-{process}", daemon=True).start()
    return stop


@dataclass(frozen=True)
class ProcessState:
    process: str  # bot, worker, beat
    alive: list[tuple[str, float]]  # (name, seconds since its last beat), beating
    stale: list[tuple[str, float]]  # stopped beating (killed, frozen, or cut off from Redis)
    unknown: bool = False  # Redis did not answer: nothing can be said

    @property
    def ok(self) -> bool:
        return bool(self.alive)

    @property
    def summary(self) -> str:
        if self.unknown:
            return "unknown (Redis is not answering)"
        if self.alive:
            return f"{len(self.alive)} running" + (f", {len(self.stale)} stopped beating" if self.stale else "")
        if self.stale:
            return f"not running: last heartbeat {int(min(age for _, age in self.stale))} s ago"
        return "not running"


def processes_state() -> dict[str, ProcessState]:
    """Each long-running process kind and its instances, by the age of their heartbeats. Fields
    older than a day are dropped (a renamed host)."""
    try:
        client = _redis()
        beats = client.hgetall(_key())
    except redis.RedisError:
        return {p: ProcessState(p, [], [], unknown=True) for p in PROCESSES}
    now, limit = time.time(), stale_after()
    found: dict[str, tuple[list, list]] = {p: ([], []) for p in PROCESSES}
    for field, value in beats.items():
        process, _, name = field.decode().partition(":")
        age = max(0.0, now - float(value))
        if age > 86400:
            client.hdel(_key(), field)
            continue
        alive, stale = found.setdefault(process, ([], []))
        (alive if age <= limit else stale).append((name, age))
    return {p: ProcessState(p, sorted(a), sorted(s)) for p, (a, s) in found.items()}


def broker_problem() -> str:
    """Empty when the Celery broker (the task queue) answers; otherwise one sentence for the operator."""
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=1,
                interval_start=0,
                interval_step=0.2,
                interval_max=0.2,
                timeout=settings.CELERY_BROKER_CONNECTION_TIMEOUT,
            )
    except Exception as exc:  # any failure to reach it means nothing can be queued
        log.warning("the task queue is unreachable: %s", exc)
        return "The task queue (the Celery broker) is unreachable: nothing can be queued until it is back."
    return ""


def redis_problem() -> str:
    """Empty when Redis (cache, counters, limiter) answers; otherwise one sentence."""
    try:
        _redis().ping()
    except redis.RedisError as exc:
        log.warning("redis is not answering: %s", exc)
        return "Redis is not answering."
    return ""


def database_problem() -> str:
    """Empty when the database answers; otherwise one sentence."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure: the dashboard says so instead of failing
        log.warning("the database is not answering: %s", exc)
        return "The database is not answering."
    return ""
