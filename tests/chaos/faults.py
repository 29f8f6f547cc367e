"""The chaos suite's Celery app (`celery -A tests.chaos.faults worker`): the project's own
(config.celery, the same tasks and settings), plus exceptions the suite can inject into a real
worker's send path, the kind of bug a kurigram upgrade could bring. Test code only: production
never loads this module.

Nothing is injected until the suite arms a stage: `fault_arm(redis, stage, calls)` pushes a token
to the suite's Redis; the next call of that stage in any worker takes it (LPOP: one worker only)
and raises there for `calls` calls in a row, in that process. A call checks with one LPOP, which
costs the workers nothing they notice; with Redis unreachable (a scenario killing it) nothing is
injected.

The stages, in the order a send meets them:
- `request`: building the request (`PyrogramGateway._request_of`, where kurigram's raw types are
  filled in): nothing has left for Telegram;
- `answer`: reading Telegram's answer to a group of sends (`pyrogram_gateway.sent_ids`): Telegram
  has delivered them;
- `record`: recording a batch's outcome (`sends_count` in the broadcast sender's `record`,
  inside its transaction, after the rows' update): rolled back with it.
"""

from __future__ import annotations

import functools
import os
import threading

import redis
from celery.signals import worker_process_init

from config.celery import app  # noqa: F401 - the app `celery -A tests.chaos.faults` runs

KEY = "chaos:fault:"  # + stage: a list of tokens, each one armed fault (its value: calls to raise)
STAGES = ("request", "answer", "record")


class InjectedFault(Exception):  # noqa: N818 - what it is, in every traceback and JobRun it ends up in
    """An exception that is not Telegram's, raised on purpose by the chaos suite."""


def fault_arm(client: redis.Redis, stage: str, calls: int = 1) -> None:
    """Arm `stage`: the next worker to reach it raises InjectedFault there, `calls` times in a row."""
    assert stage in STAGES, stage
    client.rpush(KEY + stage, calls)


def fault_disarm(client: redis.Redis) -> None:
    client.delete(*(KEY + stage for stage in STAGES))


class _Injector:
    def __init__(self, url: str):
        self.redis = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.left = dict.fromkeys(STAGES, 0)  # calls this process still raises at, per stage
        self.lock = threading.Lock()  # the sweep's pool threads reach the stages at once

    def strike(self, stage: str) -> None:
        with self.lock:
            self._take(stage)

    def _take(self, stage: str) -> None:
        if not self.left[stage]:
            try:
                token = self.redis.lpop(KEY + stage)
            except redis.RedisError:  # Redis killed by another scenario: nothing armed
                return
            if token is None:
                return
            self.left[stage] = int(token)
        self.left[stage] -= 1
        raise InjectedFault(f"injected by the chaos suite at stage {stage!r} (pid {os.getpid()})")

    def wrap(self, stage: str, fn):
        @functools.wraps(fn)
        def faulty(*args, **kwargs):
            self.strike(stage)
            return fn(*args, **kwargs)

        return faulty


@worker_process_init.connect
def _install(**kwargs) -> None:
    """In each pool process, once Django is set up: the stages wrapped (they raise only when armed)."""
    from django.conf import settings

    from botapp.telegram import pyrogram_gateway
    from scheduler.jobs import broadcast_send

    injector = _Injector(settings.REDIS_URL)
    gateway = pyrogram_gateway.PyrogramGateway
    gateway._request_of = injector.wrap("request", gateway._request_of)
    pyrogram_gateway.sent_ids = injector.wrap("answer", pyrogram_gateway.sent_ids)
    broadcast_send.sends_count = injector.wrap("record", broadcast_send.sends_count)
