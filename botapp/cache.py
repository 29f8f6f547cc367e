"""Django's Redis cache, with one redis-py client per connection pool instead of one per call; and
`HotValue`, what runbot reads on every update, cached in Redis and briefly in the process.

Django's RedisCacheClient.get_client builds a new `redis.Redis` for every cache operation, and
redis-py 8's constructor fills several hundred response callbacks each time: in a profile of
runbot's /start that was a visible share of its CPU (three cache reads per update). A `redis.Redis`
is safe to share between threads (each command takes a connection from the pool), so one per pool
does.
"""

from __future__ import annotations

import logging
import threading
import time

from django.core.cache import cache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis import RedisError

log = logging.getLogger(__name__)


class SharedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            if index not in self._pools:
                self._pools[index] = self._pool_class.from_url(self._servers[index], **self._pool_options)
            client = self._clients[index] = self._client(connection_pool=self._pools[index])
        return client


class SharedClientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedClientRedisCacheClient


# A Redis that accepts connections and never answers costs each cache call its socket timeout
# (1.5 s, config/settings.py), and runbot makes several per update: after one failure this process
# leaves the cache alone for CACHE_RETRY_AFTER seconds (hot values come from the database), then
# asks again. The limiter does the same with its own Redis client.
CACHE_RETRY_AFTER = 10.0
PROBE_SECONDS = 2.0  # the cache's socket timeout (1.5 s) and some: how long one probe may take
_down_until = 0.0
_warned_at = -1e9
_monotonic = time.monotonic  # tests move it
_probe = threading.Lock()


def cache_usable() -> bool:
    """False for CACHE_RETRY_AFTER seconds after a cache call failed (`cache_failed`). When that
    time is up, one caller asks the cache again and the others go on without it until the answer
    (or the timeout) is in: a hung Redis costs one thread a timeout, not every update thread."""
    global _down_until
    if _down_until == 0.0:  # the usual case: never failed, or answered since
        return True
    now = _monotonic()
    if now < _down_until:
        return False
    with _probe:
        if _monotonic() < _down_until:
            return False  # another thread is asking
        _down_until = now + PROBE_SECONDS  # this caller asks; `cache_answered` or `cache_failed` settles it
        return True


def cache_answered() -> None:
    """A cache call succeeded: the cache is usable again for everyone (tests call it to start clean)."""
    global _down_until
    if _down_until != 0.0:
        _down_until = 0.0


def cache_failed(exc: Exception, what: str) -> None:
    """A cache call failed: stop asking for a while. Logged as an error once a minute."""
    global _down_until, _warned_at
    now = _monotonic()
    _down_until = now + CACHE_RETRY_AFTER
    if now - _warned_at > 60:
        _warned_at = now
        log.error("cache unreachable (%s): %s; not asked again for %.0f s", exc, what, CACHE_RETRY_AFTER)
    else:
        log.warning("cache unreachable (%s): %s", what, exc)


# How long a process keeps a hot value (below) without asking Redis: another process's change
# reaches it within this. The process that made the change forgets at once.
HOT_LOCAL_TTL = 1.0


class HotValue:
    """A value runbot reads on every update and an operator changes rarely (the bot settings, the
    onboarding steps, the force-subscribe channels): kept in the shared cache (Redis), so no
    process queries the database for it, and in this process for HOT_LOCAL_TTL seconds, so most
    updates do not ask Redis either. `load()` reads it from the database (a picklable value);
    `forget()` drops both copies (signals call it when the rows change). With the cache
    unreachable the value comes from the database (and is kept in the process for the same
    second); after a failure the cache is not asked again for CACHE_RETRY_AFTER (`cache_usable`)."""

    _all: list[HotValue] = []

    def __init__(self, key: str, load, *, timeout: int | None = None, what: str = ""):
        self.key = key
        self.load = load
        self.timeout = timeout
        self.what = what or key
        self._local: tuple[float, object] | None = None
        HotValue._all.append(self)

    def get(self):
        now = time.monotonic()
        local = self._local
        if local is not None and local[0] > now:
            return local[1]
        value = None
        usable = cache_usable()
        if usable:
            try:
                value = cache.get(self.key)
                cache_answered()
            except RedisError as exc:
                cache_failed(exc, f"reading {self.what} from the database")
                usable = False
        if value is None:
            value = self.load()
            if usable:
                try:
                    cache.set(self.key, value, self.timeout) if self.timeout else cache.set(self.key, value)
                except RedisError as exc:
                    cache_failed(exc, f"{self.what} not cached")
        self._local = (now + HOT_LOCAL_TTL, value)
        return value

    def forget(self) -> None:
        self._local = None
        try:  # asked even while the cache seems down: a stale entry would outlive the outage
            cache.delete(self.key)
        except RedisError as exc:  # the entry expires on its own
            log.error("cache unreachable, %s stays cached until its entry expires: %s", self.what, exc)

    def forget_local(self) -> None:
        self._local = None

    @classmethod
    def forget_local_all(cls) -> None:
        """Drop every value this process holds (tests, between cases; the shared cache is theirs to clear)."""
        for hot in cls._all:
            hot.forget_local()
