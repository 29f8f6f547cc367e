"""What the streaming processes served, for the console's dashboard: streams opened and bytes sent,
per hour, in Redis (every streaming process adds to the same keys; each hour's key expires after a
day and a bit, so nothing needs cleaning), and the streams open now (their slots,
botapp/stream/slots.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import redis
from django.conf import settings

from botapp import clock

HOUR_KEEP_SECONDS = 26 * 3600  # an hour's counts outlive the 24 h the dashboard shows


def stream_hour_key(*, at: datetime) -> str:
    """The Redis hash holding the counts (`streams`, `bytes`) of the hour `at` falls in (UTC)."""
    return f"{settings.CACHES['default']['KEY_PREFIX']}:stream:hour:{at.strftime('%Y%m%d%H')}"


def stream_slots_key(*, scope: str) -> str:
    """The sorted set of the streams open in `scope` ("all", "user:<id>", "addr:<address>")."""
    return f"{settings.CACHES['default']['KEY_PREFIX']}:stream:open:{scope}"


def stream_stats_24h() -> dict:
    """{"streams", "bytes"} served in the last 24 hours (whole hours, this one included) and
    "open" (streams holding a slot now), or None when Redis cannot be read."""
    now = clock.now()
    keys = [stream_hour_key(at=now - timedelta(hours=h)) for h in range(24)]
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None)
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hmget(key, "streams", "bytes")
            pipe.zcount(stream_slots_key(scope="all"), time.time(), "+inf")  # leases not run out
            *hours, open_now = pipe.execute()
    except redis.RedisError:
        return None
    finally:
        client.close()
    return {
        "streams": sum(int(s or 0) for s, _ in hours),
        "bytes": sum(int(b or 0) for _, b in hours),
        "open": open_now,
    }
