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
- `answer`: reading Telegram's answer to a group of sends (`request.sent_ids`): Telegram
  has delivered them;
- `record`: recording a batch's outcome (`sends_count` in the broadcast sender's `record`,
  inside its transaction, after the rows' update): rolled back with it.

And a kill: `kill_arm(redis, "prepare", after=k)`. The next worker to make a chunk of a
broadcast's rows (`broadcasts._rows_make`, called by the preparer inside the chunk's transaction)
takes the token, lets `k` chunks through, and at the next one kills its whole worker (kill -9 of
its process group: the Celery parent and this pool child) right after the chunk's INSERT, before
the transaction commits. The suite's workers make rows PREPARE_CHUNK at a time (production:
50,000), so a broadcast of a few thousand users spans chunks.
"""

from __future__ import annotations

import functools
import os
import signal
import threading

import redis
from celery.signals import worker_process_init

from config.celery import app  # noqa: F401 - the app `celery -A tests.chaos.faults` runs

KEY = "chaos:fault:"  # + stage: a list of tokens, each one armed fault (its value: calls to raise)
STAGES = ("request", "answer", "record")
KILL = "chaos:kill:"  # + stage: a list of tokens, each one armed kill (its value: calls let through first)
KILL_STAGES = ("prepare",)
PREPARE_CHUNK = 1_000  # rows per chunk the suite's workers make (botapp.services.broadcasts.PREPARE_CHUNK)


class InjectedFault(Exception):  # noqa: N818 - what it is, in every traceback and JobRun it ends up in
    """An exception that is not Telegram's, raised on purpose by the chaos suite."""


def fault_arm(client: redis.Redis, stage: str, calls: int = 1) -> None:
    """Arm `stage`: the next worker to reach it raises InjectedFault there, `calls` times in a row."""
    assert stage in STAGES, stage
    client.rpush(KEY + stage, calls)


def kill_arm(client: redis.Redis, stage: str, *, after: int = 0) -> None:
    """Arm a kill: the next worker to reach `stage` lets `after` calls through, then at the next one
    kills its whole worker (kill -9), just after the call returned."""
    assert stage in KILL_STAGES, stage
    client.rpush(KILL + stage, after)


def fault_disarm(client: redis.Redis) -> None:
    client.delete(*(KEY + stage for stage in STAGES), *(KILL + stage for stage in KILL_STAGES))


class _Injector:
    def __init__(self, url: str):
        self.redis = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.left = dict.fromkeys(STAGES, 0)  # calls this process still raises at, per stage
        self.kill_in: dict[str, int | None] = dict.fromkeys(KILL_STAGES)  # calls before this process's kill
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

    def _due(self, stage: str) -> bool:
        """Whether this call of `stage` is the armed kill's (a token taken at the first call)."""
        if self.kill_in[stage] is None:
            try:
                token = self.redis.lpop(KILL + stage)
            except redis.RedisError:
                return False
            if token is None:
                return False
            self.kill_in[stage] = int(token)
        self.kill_in[stage] -= 1
        return self.kill_in[stage] < 0

    def deadly(self, stage: str, fn):
        @functools.wraps(fn)
        def maybe_killed(*args, **kwargs):
            result = fn(*args, **kwargs)
            with self.lock:
                if self._due(stage):
                    os.killpg(os.getpgrp(), signal.SIGKILL)  # the worker's own group (the suite starts each in one)
            return result

        return maybe_killed

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

    from botapp.services import broadcasts
    from botapp.telegram import pyrogram_gateway, request
    from scheduler.jobs import broadcast_send

    injector = _Injector(settings.REDIS_URL)
    broadcasts.PREPARE_CHUNK = PREPARE_CHUNK
    broadcasts._rows_make = injector.deadly("prepare", broadcasts._rows_make)
    gateway = pyrogram_gateway.PyrogramGateway
    gateway._request_of = injector.wrap("request", gateway._request_of)
    request.sent_ids = injector.wrap("answer", request.sent_ids)
    broadcast_send.sends_count = injector.wrap("record", broadcast_send.sends_count)
