"""What the chaos scenarios share (tests/chaos/test_*.py): the work they load, the driving of the
workers as beat and an operator would, and the audit of what users saw against the database."""

from __future__ import annotations

import collections
import time
from datetime import timedelta

import redis
from django.conf import settings

from botapp import clock
from botapp.models import (
    BotSettings,
    Broadcast,
    BroadcastClaim,
    BroadcastDelivery,
    ClaimStatus,
    PendingDeletion,
    SequenceMessage,
    SequenceStep,
    TelegramUser,
)
from botapp.services.broadcasts import broadcast_start
from botapp.telegram.gateway import TgUser
from scheduler.jobs.claims import RUN_GRACE
from scheduler.jobs.registry import job_run
from scheduler.jobs.sweep import LEASE
from scheduler.models import JobRun
from scheduler.tasks import TASKS
from tests.chaos.cluster import TABLE, Figures, wait_for
from tests.factories import (
    BroadcastFactory,
    PendingDeletionFactory,
    SequenceMessageFactory,
    SequenceStepFactory,
    TelegramUserFactory,
)

SEND = "messages.SendMessage"
DELETE = "messages.DeleteMessages"
SETTLE_TIMEOUT = 120  # seconds a recovery may take before the scenario fails


# --- work to break ---------------------------------------------------------------------------------


def users(cluster, base: int, n: int) -> list[TelegramUser]:
    """n users (telegram ids base..base+n-1) who wrote to the bot, with the access hashes runbot stored."""
    hashes = cluster.remote.users_meet(range(base, base + n))
    return TelegramUser.objects.bulk_create(
        [TelegramUserFactory.build(telegram_id=i, access_hash=hashes[i], username=f"u{i}") for i in range(base, base + n)]
    )


def broadcast(cluster, base: int, n: int) -> Broadcast:
    """A broadcast started for n new users (and whoever else is active), as "Start sending" does
    (its wake-up reaches a worker)."""
    users(cluster, base, n)
    started = BroadcastFactory(title=f"chaos {base}", text=f"Chaos broadcast {base}")
    assert broadcast_start(broadcast=started) == TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE).count()
    return started


def deletions(cluster, base: int, n: int) -> dict[int, int]:
    """n auto-deletes due now, one delivered message each in its own chat; returns {message id: chat}."""
    chats = [u.telegram_id for u in users(cluster, base, n)]
    message_ids = cluster.remote.bot_sent(chats, "Your file")
    now = clock.now()
    PendingDeletion.objects.bulk_create(
        [
            PendingDeletionFactory.build(chat_id=chat, message_ids=[m], share_id="chaos", delete_at=now)
            for chat, m in zip(chats, message_ids, strict=True)
        ]
    )
    return dict(zip(message_ids, chats, strict=True))


def sequence_steps(cluster, base: int, n: int) -> None:
    """An onboarding step due now for n users."""
    step = SequenceStepFactory(text=f"Chaos step {base}")
    now = clock.now()
    SequenceMessage.objects.bulk_create(
        [SequenceMessageFactory.build(user=u, step=step, chat_id=u.telegram_id, due_at=now) for u in users(cluster, base, n)]
    )


# --- driving the workers ---------------------------------------------------------------------------


def fire(cluster, *jobs: str) -> None:
    """What beat does every minute: one task per job for each live worker, so all of them share the work."""
    for job in jobs:
        for _ in cluster.workers.alive():
            TASKS[job].apply_async(kwargs={"trigger": "chaos"})


def running(job: str) -> int:
    return JobRun.objects.filter(job=job, status=JobRun.Status.RUNNING).count()


def calls(cluster, method: str | None = SEND, since: int = 0) -> int:
    """Calls of `method` Telegram received from call number `since` on."""
    return cluster.remote.count(method, since=since)


def mark(cluster) -> int:
    """The number of the next call Telegram will receive (for `calls(since=...)`)."""
    return cluster.remote.count()


def idle(cluster) -> bool:
    """No task queued, reserved or running on any live worker (asked twice, one after the other)."""
    from config.celery import app

    alive = [f"{name}@chaos" for name in cluster.workers.alive()]

    def quiet() -> bool:
        try:
            if redis.Redis.from_url(cluster.redis.url).llen("celery"):
                return False
            inspect = app.control.inspect(destination=alive, timeout=2, limit=len(alive))
            active, reserved = inspect.active() or {}, inspect.reserved() or {}
        except (redis.RedisError, OSError):  # a connection from before a Redis restart
            app.close()
            return False
        if set(active) != set(alive):
            return False  # a worker still starting (or too busy to answer)
        return not any(active.values()) and not any(reserved.values())

    # Asked twice: a task a worker took from the queue between the first look's two reads (the
    # queue's length, then the workers' answers) shows in the second look's, after a round trip
    # to every worker and back.
    return quiet() and quiet()


def warm(cluster) -> None:
    """Every live worker has run a task, so has its Telegram client (built on first use, seconds on
    a loaded machine): a scenario's fault then strikes workers that are all sending."""
    from config.celery import app

    alive = [f"{name}@chaos" for name in cluster.workers.alive()]

    def cold() -> list[str]:
        stats = app.control.inspect(destination=alive, timeout=2, limit=len(alive)).stats() or {}
        return [w for w in alive if not stats.get(w, {}).get("total")] if set(stats) == set(alive) else alive

    deadline = time.monotonic() + 60
    while waiting := cold():
        assert time.monotonic() < deadline, f"workers {waiting} never ran a task\n{cluster.workers.log_tail()}"
        for _ in waiting:
            TASKS["send_sequence_messages"].apply_async(kwargs={"trigger": "chaos"})
        wait_for(lambda: idle(cluster), timeout=60, what="the warm-up tasks", interval=0.3)


def reap() -> None:
    """The reaper, as it runs (every minute) once the dead worker's leases are over, which puts its
    sends back to be sent again within TELEGRAM_RANDOM_ID_WINDOW; and once Celery's hard time limit
    is over, which fails its run."""
    clock.clock_advance(LEASE + timedelta(seconds=1))
    try:
        job_run("reap_expired_claims", trigger="chaos")
        clock.clock_advance(timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT) + RUN_GRACE)
        job_run("reap_expired_claims", trigger="chaos")
    finally:
        clock.clock_reset()


def unsettled() -> list[str]:
    """What is not final yet."""
    left = []
    if n := PendingDeletion.objects.exclude(status=ClaimStatus.EXPIRED).count():
        left.append(f"{n} deletions")
    if n := BroadcastDelivery.objects.filter(status__in=["pending", "sending"]).count():
        left.append(f"{n} broadcast deliveries")
    if n := BroadcastClaim.objects.count():
        left.append(f"{n} broadcast claims")
    if n := SequenceMessage.objects.filter(status__in=["pending", "sending"]).count():
        left.append(f"{n} sequence messages")
    if n := Broadcast.objects.exclude(status=Broadcast.Status.DONE).count():
        left.append(f"{n} broadcasts")
    if n := JobRun.objects.filter(status=JobRun.Status.RUNNING).count():
        left.append(f"{n} job runs")
    return left


def recover(cluster, figures: Figures, since: float, *jobs: str) -> None:
    """Restart dead workers, then fire the jobs, wait for the workers to be idle, run the reaper,
    until everything is final. figures.recover: seconds since the fault."""
    cluster.workers.restart_dead()
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        fire(cluster, *jobs)
        wait_for(lambda: idle(cluster), timeout=SETTLE_TIMEOUT, what="the workers to finish", interval=0.3)
        # Deletions handed back wait a minute before they are due again: that minute passes here.
        PendingDeletion.objects.filter(status=ClaimStatus.PENDING, delete_at__gt=clock.now()).update(delete_at=clock.now())
        reap()
        left = unsettled()
        if not left:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled after {SETTLE_TIMEOUT} s: {', '.join(left)}\n{cluster.workers.log_tail()}")
    figures.recover = time.monotonic() - since


# --- what the users saw ----------------------------------------------------------------------------


def audit(cluster, figures: Figures, *, deleted: dict[int, int] | None = None) -> None:
    """Count sends, duplicates, lost and interrupted rows from the database and from what Telegram
    delivered (each kind of message by its text). `deleted`: {message id: chat} of the scenario's
    auto-deletes."""
    problems = figures.problems

    def sends(rows: dict[int, str], text: str, kind: str) -> None:
        received = cluster.remote.received(text=text)
        for chat, status in rows.items():
            got = received.get(chat, 0)
            figures.sends += got
            figures.duplicates += got > 1
            if status in ("pending", "sending"):
                figures.lost += 1
            elif (status == "sent" and got != 1) or (status not in ("sent", "interrupted") and got):
                figures.lost += 1
                problems.append(f"{kind} to {chat} is {status} but the chat received {got}")
            figures.interrupted += status == "interrupted"
        figures.rows += len(rows)

    for b in Broadcast.objects.all():
        rows = dict(BroadcastDelivery.objects.filter(broadcast=b).values_list("chat_id", "status"))
        sends(rows, b.text, f"broadcast {b.pk}")
        counts = collections.Counter(rows.values())
        counters = {s: getattr(b, s) for s in ("sent", "failed", "blocked", "skipped", "interrupted")}
        if b.status != Broadcast.Status.DONE or b.total != len(rows) or any(counters[s] != counts[s] for s in counters):
            problems.append(f"broadcast {b.pk} is {b.status}, total {b.total}, counters {counters}, rows {dict(counts)}")
    for step in SequenceStep.objects.all():
        sends(dict(SequenceMessage.objects.filter(step=step).values_list("chat_id", "status")), step.text, "sequence message")

    if deleted:  # every due message gone; each chat told once (none: interrupted, its notice given up)
        received = cluster.remote.received(text=BotSettings.load().deleted_notice_text)
        figures.rows += len(deleted)
        for chat in deleted.values():
            got = received.get(chat, 0)
            figures.sends += got
            figures.duplicates += got > 1
            figures.interrupted += got == 0
        left = cluster.remote.live(list(deleted))
        figures.lost += len(left) + PendingDeletion.objects.count()
        if left:
            problems.append(f"{len(left)} due messages were never deleted, e.g. {left[:3]}")
    if runs := JobRun.objects.filter(status=JobRun.Status.RUNNING).count():
        problems.append(f"{runs} job runs still running")


def answer_time(cluster, user_id: int, *, timeout: float) -> float | None:
    """A user writes /help to the bot: seconds until runbot's answer arrived (None: no answer in time)."""
    before = cluster.remote.received().get(user_id, 0)
    asked = time.monotonic()
    cluster.remote.user_sends(TgUser(id=user_id, first_name="Asker"), "/help")
    try:
        wait_for(lambda: cluster.remote.received().get(user_id, 0) > before, timeout=timeout, what="an answer", interval=0.05)
    except AssertionError:
        return None
    return time.monotonic() - asked


def check(figures: Figures) -> None:
    assert (figures.duplicates, figures.lost, figures.problems) == (0, 0, []), figures


def scenario(cluster, name: str) -> Figures:
    warm(cluster)
    figures = Figures(name)
    TABLE.append(figures)
    return figures
