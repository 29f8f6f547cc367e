"""The send pipeline under Telegram's limits (enforced by the in-memory Telegram): users first,
a broadcast at the limit, and several workers sharing one broadcast without sending twice."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from botapp.bot.router import Router
from botapp.models import Broadcast, BroadcastDelivery
from botapp.services.broadcasts import broadcast_start
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import TgUser
from botapp.telegram.limiter import BULK, REPLY, RedisLimiter, send_batch_size
from offline.telegram.clients import OfflineBot, offline_gateway
from scheduler.jobs.broadcast_send import send_broadcasts
from tests.conftest import STORAGE
from tests.factories import BroadcastFactory, met_user, telegram_on_socket

ROOT = Path(__file__).resolve().parents[2]
RATE = 10  # the emulated Telegram's limit here: small, so that a queue behind bulk sends is plain to see


@pytest.fixture(autouse=True)
def _no_wake_up(sender_wakeups):
    pass  # no Celery worker here: wake-ups are recorded, not published


def limiter(prefix, lane):
    return RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=RATE * 0.9, prefix=prefix, lane=lane)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_user_is_answered_at_once_while_a_broadcast_saturates_the_limit_and_floods(telegram, prefix, shortener):
    telegram.rates_set(global_rate=RATE)
    users = [met_user(telegram, telegram_id=20_000 + i) for i in range(70)]  # about eight seconds of broadcast
    broadcast = BroadcastFactory(title="sale", text="Sale today")
    broadcast_start(broadcast=broadcast)
    telegram.enforce_rates = True

    worker = offline_gateway(telegram, peers=user_access_hash, limiter=limiter(prefix, BULK))
    replies, waits = limiter(prefix, REPLY), []
    acquire = replies.acquire
    replies.acquire = lambda chat_id=None, **kw: waits.append(acquire(chat_id, **kw)) or waits[-1]  # the slot waits it asked for
    bot = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset(), storage_channel_id=STORAGE, shortener=shortener),
        peers=user_access_hash,
        limiter=replies,
    )
    sending = threading.Thread(target=send_broadcasts, kwargs={"gateway": worker})
    try:
        sending.start()

        def answer_time(i):
            """How long the limiter held the answer back (the machine's speed is not the limiter's)."""
            before = len(waits)
            user = TgUser(id=30_000 + i, first_name="Asker")
            telegram.user_sends(user, "/help")
            bot.pump.process()
            assert telegram.bot_messages(user.id), "no answer"
            return sum(waits[before:])

        answers = []
        for i in range(5):  # while the broadcast keeps the limit busy
            time.sleep(0.4)
            answers.append(answer_time(i))
        telegram.fail_next("FLOOD_WAIT_3", methods={"messages.SendMessage"})  # the broadcast's next send
        deadline = time.monotonic() + 60  # bounds a failure only
        while telegram.faults and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not telegram.faults, "the broadcast did not send"
        during_the_flood_wait = [answer_time(10 + i) for i in range(3)]
        sending.join(60)
    finally:
        worker.stop()
        bot.stop()

    # Not queued behind the broadcast (that is ~8 sends in flight / 9 per s = 0.9 s), and not
    # stopped by the broadcast's FloodWait (that would be 3 s).
    assert len(waits) >= len(answers) + len(during_the_flood_wait)  # every answer took its slot
    assert sorted(answers)[len(answers) // 2] < 0.45, answers
    assert max(answers + during_the_flood_wait) < 1.0, (answers, during_the_flood_wait)
    broadcast.refresh_from_db()
    assert broadcast.sent == len(users) and broadcast.status == Broadcast.Status.DONE
    assert all(len(telegram.bot_messages(u.telegram_id)) == 1 for u in users)


def send_broadcasts_in_two_processes(telegram, tmp_path, *, timeout: float, **env_extra):
    """Two `manage.py send_broadcasts` processes (two Celery workers' job runs) at once, on
    `telegram` through a socket; returns the processes and their (stdout, stderr)."""
    with telegram_on_socket(telegram) as path:
        db = connection.settings_dict
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "TELEGRAM_OFFLINE": "1",
            "TELEGRAM_OFFLINE_SOCKET": str(path),
            "TELEGRAM_SESSION_DIR": str(tmp_path),
            "REDIS_URL": settings.REDIS_URL,
            "LOG_LEVEL": "WARNING",
            **env_extra,
        }
        workers = [
            subprocess.Popen(
                [sys.executable, "manage.py", "send_broadcasts"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        return workers, [w.communicate(timeout=timeout) for w in workers]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_worker_processes_share_a_broadcast_once_each_within_the_limit(telegram, tmp_path):
    users = [met_user(telegram, telegram_id=40_000 + i) for i in range(300)]  # more than one claim of 200
    broadcast = BroadcastFactory(title="news", text="News")
    broadcast_start(broadcast=broadcast)
    telegram.enforce_rates = True
    telegram.latency = 0.05
    start = len(telegram.calls)

    workers, outputs = send_broadcasts_in_two_processes(telegram, tmp_path, timeout=120)
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]
    assert all(" 0 processed" not in out for out, _ in outputs), outputs  # both took a share

    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * len(users)  # each exactly once
    assert telegram.flood_waits == 0
    sends = sorted(c.at for c in telegram.calls[start:] if c.method == "messages.SendMessage")
    assert len(sends) == len(users)
    assert (len(sends) - 1) / (sends[-1] - sends[0]) <= 30  # together, within Telegram's rate
    assert not BroadcastDelivery.objects.exclude(status=BroadcastDelivery.Status.SENT).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_workers_share_a_paid_broadcast_in_containers_once_each_within_the_limit(telegram, tmp_path):
    """At 1000/s a worker hands Telegram a window's worth of sends at once (one MTProto container):
    still every user exactly once, and no FLOOD_WAIT."""
    users = [met_user(telegram, telegram_id=45_000 + i) for i in range(1000)]
    broadcast = BroadcastFactory(title="paid news", text="News <b>now</b>")
    broadcast_start(broadcast=broadcast)
    telegram.enforce_rates = True
    start, containers = len(telegram.calls), telegram.containers

    workers, outputs = send_broadcasts_in_two_processes(telegram, tmp_path, timeout=180, TELEGRAM_PAID_BROADCASTS="1")
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]

    assert [len(telegram.bot_messages(u.telegram_id)) for u in users] == [1] * len(users)  # each exactly once
    assert all(m.paid for u in users for m in telegram.bot_messages(u.telegram_id))
    assert telegram.flood_waits == 0
    sends = sorted(c.at for c in telegram.calls[start:] if c.method == "messages.SendMessage")
    assert len(sends) == len(users)
    # A window's sends arrive together by design: over the run, the rate is within the limit.
    window = send_batch_size(settings.TELEGRAM_PAID_RATE * settings.TELEGRAM_PAID_RATE_HEADROOM)  # 16
    assert (len(sends) - window) / (sends[-1] - sends[0]) <= 1000
    assert telegram.containers - containers >= len(users) // 50  # batched: at most 50 sends per container
    assert not BroadcastDelivery.objects.exclude(status=BroadcastDelivery.Status.SENT).exists()
    broadcast.refresh_from_db()
    assert (broadcast.sent, broadcast.status) == (1000, Broadcast.Status.DONE)
