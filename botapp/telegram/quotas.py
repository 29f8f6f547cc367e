"""Per-user quotas in the send limiter's Redis, on its clock (Redis' TIME), shared by every process:
counts in sliding windows and a calendar day, with the "told once" and strikes that fair use needs
(services/fair_use.py says what is counted and what a refusal means). One Lua script
(limiter_scripts.QUOTA), one round trip a call. Times are the caller's (botapp.clock's), not Redis':
a day or a minute passes when the clock says, in the sandbox and tests too.

Redis unreachable: every call is allowed (logged once a minute). A bot that answers without its
quotas for a while is better than one that answers nobody; the limiter keeps Telegram's pace then.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from botapp.telegram.limiter import REDIS_RETRY_AFTER, REDIS_TIMEOUT
from botapp.telegram.limiter_scripts import QUOTA, decoded

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    name: str  # the key's last part: "commands", "deliveries"
    span: float  # seconds
    cap: int  # calls at most in any `span`


@dataclass(frozen=True)
class Refusal:
    """A call over a quota: when it would fit (`retry_after` seconds), whether this is the first
    refusal since the quota filled (`tell`), the user's strikes (refusals told within the strikes'
    span) and which quota: a window's index in the call, or len(windows) for the day's."""

    retry_after: float
    tell: bool
    strikes: int
    which: int


class RedisQuotas:
    def __init__(self, client: redis.Redis, *, prefix: str = "courier:quota"):
        self.redis = client
        self.prefix = prefix
        self._script = client.register_script(QUOTA)
        self._down_until = 0.0
        self._warned_at = -1e9

    @classmethod
    def from_settings(cls) -> RedisQuotas:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT, retry=None
        )
        return cls(client)

    def key(self, user_id: int, name: str) -> str:
        return f"{self.prefix}:{user_id}:{name}"

    def take(
        self,
        user_id: int,
        kind: str,
        windows: list[Window],
        *,
        now: float,
        day: tuple[str, int, float] | None = None,
        strike_span: float = 3600.0,
        quiet: float = 0.0,
        strike: bool = True,
    ) -> Refusal | None:
        """Count one call of `kind` by `user_id` in each of `windows` and in `day` ((the day's
        name, cap, seconds until it ends), or None) at `now` (seconds, the caller's clock), or,
        over any of them, count nothing and say why (a Refusal). Its told flag is per `kind`: told
        once until the call would fit, or for `quiet` seconds if longer; its strikes are the
        user's, over every kind (a refusal told counts one unless `strike` is False)."""
        if time.monotonic() < self._down_until:
            return None
        day_name, day_cap, day_left = day if day is not None else ("", 0, 0.0)
        keys = [self.key(user_id, f"told:{kind}"), self.key(user_id, "strikes")]
        keys += [self.key(user_id, w.name) for w in windows]
        keys.append(self.key(user_id, f"day:{kind}:{day_name}"))
        args: list = [now, len(windows)]
        for w in windows:
            args += [w.span, w.cap]
        args += [day_cap, max(day_left, 1.0), strike_span, quiet, int(strike)]
        try:
            answer = decoded(self._script(keys=keys, args=args))
        except redis.RedisError as exc:
            self._down_until = time.monotonic() + REDIS_RETRY_AFTER
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.error("Redis unreachable (%s): user quotas are not kept meanwhile", exc)
            return None
        if answer == "ok":
            return None
        _, wait, told, strikes, which = answer.split()
        return Refusal(retry_after=float(wait), tell=told == "1", strikes=int(strikes), which=int(which) - 1)

    def strikes_forget(self, user_id: int) -> None:
        """The user's strikes start again from none (they were banned for them)."""
        self.redis.delete(self.key(user_id, "strikes"))


_QUOTAS: list[RedisQuotas] = []


def quotas() -> RedisQuotas:
    """This process's quotas client (made on first use: the settings' Redis)."""
    if not _QUOTAS:
        _QUOTAS.append(RedisQuotas.from_settings())
    return _QUOTAS[0]
