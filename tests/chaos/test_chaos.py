"""Faults an operator's worst day brings, against the real processes: Celery workers
(`celery -A tests.chaos.faults worker`: the project's app and tasks, plus exceptions a scenario
can inject), PostgreSQL, a Redis server of the suite's own, and the in-memory Telegram
(`manage.py telegram_server`), which counts what every chat received.

Each scenario loads work (a broadcast, a scheduled message, due deletions, due sequence steps),
breaks something in the middle of it, then recovers as an operator's deployment would: dead workers restarted, the
jobs fired again (as beat does every minute) and the reaper run. Two waits of production are
skipped, not shortened: the reaper runs on a clock moved past the claims' 5-minute lease and
Celery's hard time limit (so it settles what the dead worker held at once, and only while the live
workers are idle), and deletions handed back for a retry are made due at once instead of after the
deleter's back-off (except where Telegram refuses deletions for minutes: that scenario,
test_deletion_outage.py, waits it out, with beat's minute runs and the wake-ups). Then the invariants: no row lost, no chat that received a user-visible message
twice, every broadcast and job run in a final state with counters equal to its rows, every due
deletion done. `make chaos` prints a table of figures per scenario (docs/reliability.md).
"""

from __future__ import annotations

import collections
import contextlib
import time
from datetime import timedelta

import psycopg
import pytest
import redis
from django.db import connection

from botapp import clock
from botapp.bot.router import SORRY
from botapp.models import (
    AdminCommand,
    Broadcast,
    BroadcastClaim,
    BroadcastDelivery,
    ClaimStatus,
    HandledUpdate,
    PendingDeletion,
    PremiumPlan,
    TelegramUser,
    UpdatePosition,
)
from botapp.services.autodelete import WILL_DELETE
from botapp.services.broadcasts import broadcast_start
from botapp.services.files import file_store
from botapp.services.outgoing import ALREADY_SENT
from botapp.telegram.gateway import TgUser
from scheduler.models import JobRun
from scheduler.tasks import TASKS
from tests.chaos.cluster import DEPLOYMENT_DB_APP, UPDATES_TABLE, UpdateFigures, wait_for
from tests.chaos.conftest import RATE
from tests.chaos.work import (
    SEND,
    SETTLE_TIMEOUT,
    answer_time,
    audit,
    broadcast,
    calls,
    check,
    deletions,
    fire,
    mark,
    recover,
    running,
    scenario,
    sequence_steps,
    users,
)
from tests.conftest import ADMIN, STORAGE
from tests.factories import BroadcastFactory

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OUTAGE = 5.0  # seconds Redis or PostgreSQL is away
PG_OUTAGE = 10.0  # seconds PostgreSQL refuses runbot mid-burst (issue 21)
MIDWAY = 0.3  # the fault strikes when this share of the work has reached Telegram


# --- the scenarios -----------------------------------------------------------------------------------


def kill_midway(cluster, job: str, total_calls: int, since: int) -> float:
    """Wait until both workers run `job` and MIDWAY of its calls reached Telegram; kill -9 w1. Returns when."""
    wait_for(lambda: running(job) >= 2, timeout=60, what=f"both workers to run {job}")
    wait_for(lambda: calls(cluster, since=since) >= total_calls * MIDWAY, timeout=60, what=f"{job} to get going", interval=0.02)
    cluster.workers.kill("w1")
    return time.monotonic()


def held_again(started: Broadcast) -> str:
    """What became of the deliveries the dead worker held (the reaper put them back)."""
    rows = BroadcastDelivery.objects.filter(broadcast=started)
    again, repeats = rows.filter(retry_from__isnull=False).count(), rows.filter(error=ALREADY_SENT).count()
    return f"{again} rows the dead worker held went again with their random_ids, {repeats} refused as repeats (*sent*)"


def test_a_worker_killed_mid_broadcast(cluster):
    figures = scenario(cluster, "kill -9 of a worker mid-broadcast of 5,000 users")
    n = 5000
    since = mark(cluster)
    started = broadcast(cluster, 1_000_000, n)  # its wake-up is one task
    TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})  # and the minute's run, for the other worker
    stoppers = range(1_000_000 + n - 20, 1_000_000 + n)  # the last rows claimed: these users send /stop first
    for user_id in stoppers:
        cluster.remote.user_sends(TgUser(id=user_id, first_name="Stopper"), "/stop")
    fault = kill_midway(cluster, "send_broadcasts", n, since)
    recover(cluster, figures, fault, "send_broadcasts")
    audit(cluster, figures)
    # /stop is final through a crash and a recovery: none of them got the broadcast.
    got = cluster.remote.received(text=started.text)
    assert [got.get(u, 0) for u in stoppers] == [0] * len(stoppers)
    assert set(BroadcastDelivery.objects.filter(chat_id__in=stoppers).values_list("status", flat=True)) == {"skipped"}
    # Everyone else got it exactly once, as Telegram counted what it delivered.
    others = [u for u in range(1_000_000, 1_000_000 + n) if u not in stoppers]
    assert collections.Counter(got.get(u, 0) for u in others) == {1: len(others)}
    figures.note = f"{held_again(started)}; {len(stoppers)} users who sent /stop meanwhile got nothing"
    check(figures)
    assert figures.interrupted == 0, figures  # the dead worker's sends went again with their random_ids: once each


def test_a_worker_killed_mid_preparation(cluster, monkeypatch):
    """kill -9 of the worker making a large broadcast's rows, inside a chunk's transaction: the
    chunk's rows inserted, not committed (tests/chaos/faults.py kills it there). The chunk goes
    with it; the next run makes the rows again from where the last commit left them, while the
    other worker sends what was made. Every active user gets one row and the message once. Here the
    start makes 500 rows and the suite's workers 1,000 a chunk (production: 10,000 and 50,000), so
    a few thousand users take several chunks; the kill strikes the third."""
    from botapp.services import broadcasts
    from tests.chaos.faults import PREPARE_CHUNK, fault_disarm, kill_arm

    figures = scenario(cluster, "kill -9 of a worker mid-chunk of a broadcast's rows (its preparation)")
    n, base, first = 4000, 13_000_000, 500  # telegram ids of its own: Telegram counts the whole run's messages
    users(cluster, base, n)
    audience = dict(TelegramUser.objects.filter(state=TelegramUser.State.ACTIVE).values_list("id", "telegram_id"))
    assert len(audience) > first + 3 * PREPARE_CHUNK, len(audience)  # the third chunk is not the last
    faults = redis.Redis.from_url(cluster.redis.url)
    kill_arm(faults, "prepare", after=2)
    monkeypatch.setattr(broadcasts, "START_ROWS", first)
    started = BroadcastFactory(title=f"chaos {base}", text=f"Chaos broadcast {base}")
    try:
        assert broadcast_start(broadcast=started) == first  # its wake-up reaches both jobs: the sender and the preparer
        killed = wait_for(lambda: cluster.workers.dead(), timeout=60, what="the worker making the rows to be killed")
        fault = time.monotonic()
        made = Broadcast.objects.get(pk=started.pk).total
        assert made == first + 2 * PREPARE_CHUNK, made  # what had committed; the third chunk went with the worker
        recover(cluster, figures, fault, "prepare_broadcasts", "send_broadcasts")
    finally:
        fault_disarm(faults)
    audit(cluster, figures)
    started.refresh_from_db()
    rows = BroadcastDelivery.objects.filter(broadcast=started)
    assert started.total == rows.count() == len(audience), (started.total, rows.count(), len(audience))
    assert set(rows.values_list("user_id", flat=True)) == set(audience)
    got = cluster.remote.received(text=started.text)
    assert collections.Counter(got.get(chat, 0) for chat in audience.values()) == {1: len(audience)}
    figures.note = (
        f"{killed[0]} killed in its third chunk of {PREPARE_CHUNK:,} rows, uncommitted; {made:,} of {len(audience):,} rows "
        f"had committed, the rest made by the next run; one row and one message per user"
    )
    check(figures)
    assert figures.interrupted == 0, figures


def sender_of(cluster, job: str) -> str:
    """A live worker running `job` now (w1 when both are), as Celery's workers say."""
    from config.celery import app

    alive = cluster.workers.alive()
    active = app.control.inspect(destination=[f"{w}@chaos" for w in alive], timeout=2).active() or {}
    running_it = sorted(name.split("@")[0] for name, tasks in active.items() if any(t["name"] == TASKS[job].name for t in tasks))
    assert running_it, f"no worker runs {job}: {active}"
    return running_it[0]


def test_a_worker_killed_mid_deletion_sweep(cluster):
    figures = scenario(cluster, "kill -9 of a worker mid-deletion-sweep")
    n = 1000
    since = mark(cluster)
    deleted = deletions(cluster, 2_000_000, n)
    fire(cluster, "delete_due_messages")
    fault = kill_midway(cluster, "delete_due_messages", n, since)  # the notices sent so far
    recover(cluster, figures, fault, "delete_due_messages")
    audit(cluster, figures, deleted=deleted)
    check(figures)
    assert figures.interrupted == 0, figures  # the dead worker's notices went again with their random_ids: once each


def test_a_worker_killed_mid_sequence(cluster):
    figures = scenario(cluster, "kill -9 of a worker mid-sequence of 5,000 users")
    n = 5000  # as many as the broadcast's (issue 21: "the same for a sequence")
    since = mark(cluster)
    sequence_steps(cluster, 3_000_000, n)
    fire(cluster, "send_sequence_messages")
    fault = kill_midway(cluster, "send_sequence_messages", n, since)
    recover(cluster, figures, fault, "send_sequence_messages")
    audit(cluster, figures)
    check(figures)
    assert figures.interrupted == 0, figures  # sent again with their random_ids: once each


def both_sweeps(cluster, base: int, n: int) -> tuple[dict[int, int], int]:
    """A broadcast and due deletions at once, one worker on each (the broadcast's wake-up is one task)."""
    since = mark(cluster)
    broadcast(cluster, base, n)
    deleted = deletions(cluster, base + n, n)
    TASKS["delete_due_messages"].apply_async(kwargs={"trigger": "chaos"})
    wait_for(lambda: running("send_broadcasts") and running("delete_due_messages"), timeout=60, what="both sweeps to run")
    wait_for(lambda: calls(cluster, since=since) >= 2 * n * MIDWAY, timeout=60, what="the sweeps to get going", interval=0.02)
    return deleted, since


def test_redis_killed_and_restarted_mid_sweep(cluster):
    figures = scenario(cluster, f"Redis killed mid-sweep, back {OUTAGE:g} s later (empty)")
    deleted, since = both_sweeps(cluster, 4_000_000, 600)
    fault = time.monotonic()
    cluster.redis.kill()
    answered = answer_time(cluster, 4_999_999, timeout=OUTAGE)  # runbot answers on its own pace meanwhile
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - fault)))
    cluster.redis.start()  # the same port, nothing in it: the queue, the limiter's state and the cache are gone
    figures.note = "a user writing meanwhile: " + (f"answered in {answered:.1f} s" if answered else "no answer")
    recover(cluster, figures, fault, "send_broadcasts", "delete_due_messages")
    audit(cluster, figures, deleted=deleted)
    check(figures)
    assert answered is not None, "with Redis down, runbot did not answer"


def test_postgres_connections_terminated_mid_sweep(cluster):
    figures = scenario(cluster, f"PostgreSQL: connections terminated, none for {OUTAGE:g} s, mid-sweep")
    deleted, since = both_sweeps(cluster, 5_000_000, 600)
    fault = time.monotonic()
    with postgres_refused(cluster) as terminated:
        answered = answer_time(cluster, 5_999_999, timeout=OUTAGE)  # "Sorry" at least, not silence
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - fault)))
    sorry = cluster.remote.received(text=SORRY).get(5_999_999)
    figures.note = f"{terminated} connections terminated; a user writing meanwhile: " + (
        f"answered {'“Sorry…”' if sorry else ''} in {answered:.1f} s" if answered else "no answer"
    )
    recover(cluster, figures, fault, "send_broadcasts", "delete_due_messages")
    audit(cluster, figures, deleted=deleted)
    check(figures)
    assert answered is not None, "with PostgreSQL down, runbot did not answer"


def test_a_flood_wait_storm(cluster):
    figures = scenario(cluster, "FloodWait storm")
    floods = cluster.remote.flood_waits()
    # Telegram allows half the workers' pace, and answers 40 sends FLOOD_WAIT_2 besides.
    cluster.remote.set_rates(enforce_rates=True, global_rate=RATE / 2)
    cluster.remote.fail_next("FLOOD_WAIT_2", methods=[SEND], times=40, after=50)
    try:
        fault = time.monotonic()
        deleted, since = both_sweeps(cluster, 6_000_000, 300)
        recover(cluster, figures, fault, "send_broadcasts", "delete_due_messages")
    finally:
        cluster.remote.set_rates(enforce_rates=False)
    figures.note = f"{cluster.remote.flood_waits() - floods} FLOOD_WAITs answered"
    audit(cluster, figures, deleted=deleted)
    check(figures)


def test_the_bot_token_revoked_mid_broadcast(cluster):
    figures = scenario(cluster, "bot token revoked mid-broadcast, then replaced")
    n = 800
    since = mark(cluster)
    started = broadcast(cluster, 7_000_000, n)
    TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})
    wait_for(lambda: running("send_broadcasts") >= 2, timeout=60, what="both workers to send")
    wait_for(lambda: calls(cluster, since=since) >= n * MIDWAY, timeout=60, what="the broadcast to get going", interval=0.02)
    fault = time.monotonic()
    cluster.remote.revoke_token()
    try:
        wait_for(lambda: not running("send_broadcasts"), timeout=60, what="the runs to stop")
        # Stopped, nobody blamed, nothing lost: the rows not sent wait, the counters match the rows.
        assert set(JobRun.objects.filter(job="send_broadcasts").values_list("status", flat=True)) == {JobRun.Status.FAILED}
        assert all("BotUnauthorized" in e for e in JobRun.objects.filter(job="send_broadcasts").values_list("error", flat=True))
        assert not TelegramUser.objects.exclude(state=TelegramUser.State.ACTIVE).exists()
        assert not BroadcastClaim.objects.exists()  # every claim recorded: its rows sent or pending again
        started.refresh_from_db()
        assert 0 < started.sent == BroadcastDelivery.objects.filter(status="sent").count() < n  # midway
        figures.note = f"{BroadcastDelivery.objects.filter(status='pending').count()} rows waited for the new token"
    finally:
        cluster.remote.restore_token()
    cluster.workers.stop()  # the operator puts the new token in place and restarts the workers
    cluster.workers.restart_dead()
    recover(cluster, figures, fault, "send_broadcasts")
    audit(cluster, figures)
    check(figures)


def test_a_hostile_telegram(cluster):
    """Telegram as a long-lived connection meets it, under a broadcast, a deletion sweep and users
    writing to runbot at once: the server salt changes every 50 packets (refusals naming the
    container, then each message in it); every 100th send is refused with a 420 kurigram does
    not know (with seconds, then without); every 40th packet is answered after a
    new_session_created and a msgs_ack; every 20th container is answered split, late and last
    first; every 60th container loses its connection (before, halfway through, after it is
    processed); every 150th send gets -503 Timeout before processing or 500 INTERNAL after it."""
    figures = scenario(cluster, "hostile Telegram")
    writers = [TgUser(id=8_100_000 + i, first_name=f"Writer{i}") for i in range(200)]
    cluster.remote.hostile_start(
        salt_every=50, flood_every=100, service_every=40, split_every=20, drop_every=60, internal_every=150
    )
    try:
        fault = time.monotonic()
        broadcast(cluster, 8_000_000, 5000)
        deleted = deletions(cluster, 8_200_000, 3000)
        TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})
        TASKS["delete_due_messages"].apply_async(kwargs={"trigger": "chaos"})
        for writer in writers:
            cluster.remote.user_sends(writer, "/help")
        recover(cluster, figures, fault, "send_broadcasts", "delete_due_messages")
        wait_for(
            lambda: all(cluster.remote.received().get(w.id) for w in writers), timeout=SETTLE_TIMEOUT, what="runbot's answers"
        )
    finally:
        did = cluster.remote.hostile_stop()
    answers = cluster.remote.received()
    twice = [w.id for w in writers if answers.get(w.id, 0) != 1]
    figures.note = (
        f"{did['rotations']} salt rotations, {did['floods']} unknown 420s, {did['services']} service messages, "
        f"{did['splits']} split answers, {did['drops']} dropped connections, {did['internals']} -503/500; "
        "200 users answered once each"
    )
    if twice:
        figures.problems.append(f"{len(twice)} of 200 users writing to runbot got other than one answer, e.g. {twice[:3]}")
    figures.rows += len(writers)
    figures.sends += sum(answers.get(w.id, 0) for w in writers)
    audit(cluster, figures, deleted=deleted)
    check(figures)
    assert all(did[k] > 2 for k in ("rotations", "floods", "services", "splits", "drops", "internals")), did


# --- a scheduled message, exceptions in the send path, Telegram's own trouble ---------------------------


def test_a_worker_killed_mid_scheduled_message(cluster, plain_http):
    """A scheduled message with a photo to 2,000 listed users, made through the HTTP API as a
    client makes it; once it is due and 30 % of it has reached Telegram, a worker is killed."""
    from rest_framework.test import APIClient

    from api.clients import apiclient_create

    figures = scenario(cluster, "kill -9 of a worker mid-scheduled message (photo, 2,000 listed users)")
    n, base, media = 2000, 10_000_000, "messages.SendMedia"
    recipients = [u.telegram_id for u in users(cluster, base, n)]
    _, token = apiclient_create(name="chaos", scopes="read,write")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    send_at = clock.now() + timedelta(seconds=2)
    created = client.post(
        "/api/v1/messages/",
        {
            "send_at": send_at.isoformat(),
            "recipients": "users",
            "user_ids": recipients,
            "text": "Chaos scheduled catalogue",
            "attachments": [{"kind": "photo", "file_id": cluster.remote.file_id("photo", "catalogue.jpg")}],
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    message = Broadcast.objects.get(pk=created.json()["id"])
    assert message.kind == Broadcast.Kind.MESSAGE and message.status == Broadcast.Status.SCHEDULED
    since = mark(cluster)
    wait_for(lambda: clock.now() >= send_at, timeout=10, what="the message to be due", interval=0.05)
    TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})  # beat's minute run (or its wake-up): starts it
    wait_for(lambda: BroadcastDelivery.objects.filter(broadcast=message).exists(), timeout=60, what="the message to start")
    TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})  # and the other worker's
    wait_for(lambda: calls(cluster, media, since=since) >= n * MIDWAY, timeout=60, what="the message to get going", interval=0.02)
    cluster.workers.kill(sender_of(cluster, "send_broadcasts"))  # the other may not have joined yet on a busy machine
    fault = time.monotonic()
    recover(cluster, figures, fault, "send_broadcasts")
    audit(cluster, figures)
    message.refresh_from_db()
    got = cluster.remote.received(text="Chaos scheduled catalogue")
    assert collections.Counter(got.get(u, 0) for u in recipients) == {1: n}, "every recipient once, as Telegram counted"
    assert (message.status, message.sent, message.interrupted) == (Broadcast.Status.DONE, n, 0)
    detail = client.get(f"/api/v1/messages/{message.pk}/").json()  # what the client reads back
    assert collections.Counter(r["status"] for r in detail["results"]) == {"sent": n}
    figures.note = f"made through the API; {held_again(message)}"
    check(figures)
    assert figures.interrupted == 0, figures


STAGES = {
    "request": "building a request (nothing left)",
    "answer": "reading Telegram's answer (delivered)",
    "record": "recording the outcome (rolled back), twice",
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_an_exception_in_the_send_path_of_a_worker(cluster, stage):
    """An exception that is not Telegram's (a bug, a kurigram upgrade) raised inside a real worker
    mid-broadcast, at one stage of the send path (tests/chaos/faults.py): the run fails with its
    traceback, nothing is recorded failed or as Telegram's refusal, and every user has the message
    once: what had not left is handed back untouched and sent by the next run, what Telegram had
    delivered is recorded sent (sent again with its random_id, refused as a repeat)."""
    from tests.chaos.faults import fault_arm, fault_disarm

    figures = scenario(cluster, f"an exception in a worker's send path: {STAGES[stage]}")
    n, base = 1000, {"request": 11_000_000, "answer": 11_100_000, "record": 11_200_000}[stage]
    since = mark(cluster)
    started = broadcast(cluster, base, n)
    TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})
    wait_for(lambda: running("send_broadcasts") >= 2, timeout=60, what="both workers to send")
    wait_for(lambda: calls(cluster, since=since) >= n * MIDWAY, timeout=60, what="the broadcast to get going", interval=0.02)
    faults = redis.Redis.from_url(cluster.redis.url)
    # The record's first try and the sweep's last try to record what was sent both fail: the rows
    # stay under their claim, for the reaper. The other stages strike once.
    fault_arm(faults, stage, calls=2 if stage == "record" else 1)
    fault = time.monotonic()
    try:
        wait_for(
            lambda: JobRun.objects.filter(job="send_broadcasts", status=JobRun.Status.FAILED).exists(),
            timeout=60,
            what="the run the fault struck to fail",
        )
        recover(cluster, figures, fault, "send_broadcasts")
    finally:
        fault_disarm(faults)
    audit(cluster, figures)
    (failed,) = JobRun.objects.filter(job="send_broadcasts", status=JobRun.Status.FAILED)
    assert "InjectedFault" in failed.error and "Traceback" in failed.error, failed.error
    refused = BroadcastDelivery.objects.filter(broadcast=started).exclude(status__in=["sent", "skipped"])
    assert not refused.exists(), collections.Counter(refused.values_list("status", flat=True))
    got = cluster.remote.received(text=started.text)
    assert collections.Counter(got.get(u, 0) for u in range(base, base + n)) == {1: n}
    again = BroadcastDelivery.objects.filter(broadcast=started, retry_from__isnull=False).count()
    repeats = BroadcastDelivery.objects.filter(broadcast=started, error=ALREADY_SENT).count()
    figures.note = (
        f"the run failed with the traceback ({failed.error.splitlines()[0][:60]}…); {again} rows sent again "
        f"with their random_ids, {repeats} of them refused as repeats (*sent*); 0 failed"
    )
    check(figures)
    assert figures.interrupted == 0, figures
    if stage == "request":  # nothing had left: handed back untouched, sent by a later run as a first try
        assert again == 0, again
    else:  # Telegram had delivered them: each went again and was refused as a repeat
        assert again == repeats > 0, (again, repeats)


def test_telegram_losing_answers_and_failing_sends(cluster):
    """Telegram's own trouble on sends, mid-broadcast of 2,000: 30 sends answered `500 INTERNAL`
    before processing, every 100th `-503 Timeout` before or `500 INTERNAL` after it was delivered,
    and 10 answers lost after delivery. Each is asked again with the same random_id: delivered
    once, recorded sent, never failed or interrupted."""
    from inmemory_telegram.faults import LOSE_ANSWER

    figures = scenario(cluster, "500 INTERNAL, -503 and lost answers on sends")
    n, base = 2000, 12_000_000
    cluster.remote.fail_next("INTERNAL", methods=[SEND], times=30, after=200)
    cluster.remote.fail_next(LOSE_ANSWER, methods=[SEND], times=10, after=600)
    cluster.remote.hostile_start(salt_every=0, flood_every=0, internal_every=100)
    try:
        fault = time.monotonic()
        started = broadcast(cluster, base, n)
        TASKS["send_broadcasts"].apply_async(kwargs={"trigger": "chaos"})
        recover(cluster, figures, fault, "send_broadcasts")
    finally:
        did = cluster.remote.hostile_stop()
    audit(cluster, figures)
    got = cluster.remote.received(text=started.text)
    assert collections.Counter(got.get(u, 0) for u in range(base, base + n)) == {1: n}
    repeats = BroadcastDelivery.objects.filter(broadcast=started, error=ALREADY_SENT).count()
    runs = collections.Counter(JobRun.objects.filter(job="send_broadcasts").values_list("status", flat=True))
    figures.note = (
        f"30 × 500 before processing, {did['internals']} × -503 before or 500 after (alternately), 10 answers "
        f"lost: each asked again with its random_id, {repeats} refused as repeats (*sent*); runs {dict(runs)}"
    )
    check(figures)
    assert figures.interrupted == 0, figures
    assert set(runs) == {JobRun.Status.OK}, runs  # Telegram's trouble is no failure of ours
    assert did["internals"] >= n // 100 - 2, did
    # Each send delivered before its answer went missing was refused as a repeat: the 10 lost, and the
    # hostile 500s answered after delivery (about half of them; fewer when one fell on a send whose
    # answer was lost, or on a repeat, which Telegram refused before any 500).
    assert did["internals_delivered"] >= 1, did
    assert repeats >= 10 + did["internals_delivered"], (repeats, did)


# --- runbot killed ---------------------------------------------------------------------------------------

FILE_TEXT = "Chaos file"


def shared_file(cluster, tag: str) -> tuple[str, str]:
    """A file in the storage channel, stored for sharing: (its share id, the text its copies start with)."""
    text = f"{FILE_TEXT} {tag}"
    post = cluster.remote.post(STORAGE, text)
    return file_store(source_chat_id=STORAGE, message_ids=[post], title=tag).share_id, text


def stored_pts() -> int:
    row = UpdatePosition.objects.filter(box=UpdatePosition.ACCOUNT).first()
    return row.pts if row is not None else 0


def runbot_ready(cluster, user_id: int) -> None:
    """runbot up and answering, its position stored in this test's database (the suite empties the
    database between scenarios while runbot runs on): a user writes, runbot answers and stores the
    position past that message."""
    if "bot" in cluster.workers.dead():
        cluster.workers.start("bot")
    sent = cluster.remote.update_state()["pts"] + 1  # the pts of the message, made next
    cluster.remote.user_sends(TgUser(id=user_id, first_name="Warm"), "/help")
    wait_for(lambda: cluster.remote.received().get(user_id), timeout=60, what="runbot to answer")
    wait_for(lambda: stored_pts() >= sent, timeout=30, what="runbot to store its position")


def runbot_restart(cluster, figures: UpdateFigures, answered) -> None:
    """Start runbot again; figures.recover: seconds until `answered()`."""
    restarted = time.monotonic()
    cluster.workers.start("bot")  # returns once it listens: what came meanwhile is being fetched
    wait_for(answered, timeout=SETTLE_TIMEOUT, what="every user answered after the restart", interval=0.1)
    figures.recover = time.monotonic() - restarted


def replays() -> int:
    """Times Telegram handed back an update runbot had claimed already (each recognised)."""
    return sum(n - 1 for n in HandledUpdate.objects.values_list("attempts", flat=True))


def test_runbot_killed_idle_after_answering_100_users(cluster):
    figures = UpdateFigures("kill -9 of runbot idle after answering 100 users, 20 writing while it is down")
    UPDATES_TABLE.append(figures)
    runbot_ready(cluster, 9_099_999)
    share, text = shared_file(cluster, "idle")
    early = [TgUser(id=9_000_000 + i, first_name=f"Early{i}") for i in range(100)]
    for user in early:
        cluster.remote.user_sends(user, f"/start {share}")
    wait_for(lambda: len(cluster.remote.received(text=text)) == 100, timeout=SETTLE_TIMEOUT, what="100 users served")
    premium = early[0].id
    command = cluster.remote.update_state()["pts"] + 1  # runbot is idle: the command's pts
    cluster.remote.user_sends(TgUser(id=ADMIN, first_name="Admin"), f"/addpremium {premium} 30d")
    wait_for(lambda: cluster.remote.received(text="⭐").get(ADMIN), timeout=60, what="the admin's command answered")
    # Idle, and the position is stored as updates are handled (not only at a clean stop): it passes
    # the admin's command within a second or two; then the kill.
    wait_for(lambda: stored_pts() >= command, timeout=30, what="runbot's stored position to pass the admin's command")
    cluster.workers.kill("bot")

    late = [TgUser(id=9_100_000 + i, first_name=f"Late{i}") for i in range(20)]
    for user in late:  # runbot is down
        cluster.remote.user_sends(user, f"/start {share}")
    runbot_restart(cluster, figures, lambda: len(cluster.remote.received(text=text)) == 120)

    copies = cluster.remote.received(text=text)
    figures.updates = len(early) + 1 + len(late)
    figures.handled = sum(1 for u in early + late if copies.get(u.id)) + AdminCommand.objects.filter(command="addpremium").count()
    figures.twice = sum(1 for u in early + late if copies.get(u.id, 0) > 1)
    figures.lost = sum(1 for u in early + late if not copies.get(u.id))
    figures.replayed = replays()
    plans = list(PremiumPlan.objects.filter(user__telegram_id=premium))
    if AdminCommand.objects.filter(command="addpremium").count() != 1 or [p.ends_at - p.starts_at for p in plans] != [
        timedelta(days=30)
    ]:
        figures.problems.append(f"/addpremium ran again: {[(p.starts_at, p.ends_at) for p in plans]}")
        figures.twice += 1
    told = cluster.remote.received(text="⭐")
    if (told.get(ADMIN), told.get(premium)) != (1, 1):
        figures.problems.append(f"the admin and the user were told {told.get(ADMIN)} and {told.get(premium)} times")
    figures.note = (
        f"/addpremium {premium} 30d ran once (30 days); the 20 who wrote while it was down answered; every copy "
        f"deleted when due: {copies_deleted(cluster, {u.id for u in early + late}, text)}"
    )
    assert (figures.twice, figures.lost, figures.problems) == (0, 0, []), figures


def burst(cluster, figures: UpdateFigures, base: int, name: str) -> tuple[str, str, list[TgUser]]:
    """200 users (ids from `base`) send /start <file> to runbot at once; returns (share id, the
    copies' text, the users) once MIDWAY of them were served."""
    UPDATES_TABLE.append(figures)
    runbot_ready(cluster, base + 99_999)
    share, text = shared_file(cluster, name.lower())
    users = [TgUser(id=base + i, first_name=f"{name}{i}") for i in range(200)]
    for user in users:
        cluster.remote.user_sends(user, f"/start {share}")
    wait_for(
        lambda: len(cluster.remote.received(text=text)) >= len(users) * MIDWAY,
        timeout=60,
        what="the burst to get going",
        interval=0.02,
    )
    return share, text, users


def test_runbot_killed_mid_burst_of_200_file_requests(cluster):
    figures = UpdateFigures("kill -9 of runbot mid-burst of 200 /start <file>")
    share, text, users = burst(cluster, figures, 9_200_000, "Burst")
    cluster.workers.kill("bot")
    claims = dict(
        HandledUpdate.objects.filter(kind=HandledUpdate.Kind.MESSAGE, chat_id__in=[u.id for u in users]).values_list(
            "chat_id", "done_at"
        )
    )
    recorded = {chat for chat, done in claims.items() if done is not None}  # handled, as the database says
    in_flight = {chat for chat, done in claims.items() if done is None}  # claimed when the kill struck
    served_before = len(cluster.remote.received(text=text))

    runbot_restart(cluster, figures, lambda: len(cluster.remote.received(text=text)) == len(users))

    copies = cluster.remote.received(text=text)
    figures.updates = len(users)
    figures.handled = sum(1 for u in users if copies.get(u.id))
    figures.lost = len(users) - figures.handled
    figures.replayed = replays()
    figures.twice = sum(1 for u in users if copies.get(u.id, 0) > 1)  # the mid-handling ones too: same random_ids
    again = sum(1 for chat in in_flight if copies.get(chat, 0) > 1)
    delivering = PendingDeletion.objects.filter(chat_id__in=[u.id for u in users], status=ClaimStatus.DELIVERING)
    try:  # a copy the user has already may still be having its ids written (a replay sending afresh)
        wait_for(lambda: not delivering.exists(), timeout=30, what="every delivery's ids written", interval=0.1)
    except AssertionError:
        pass  # counted below: the scenario fails on it
    left_delivering = delivering.count()
    found = copies_deleted(cluster, {u.id for u in users}, text)
    figures.note = (
        f"{served_before} served before the kill, {len(recorded)} recorded handled, {len(in_flight)} mid-handling "
        f"(handled again with the same random_ids: {again} got the file twice; the copies of those cut off before "
        f"their ids were written found again: {left_delivering} left unfound); every copy deleted when due: {found}"
    )
    assert (figures.twice, figures.lost, left_delivering) == (0, 0, 0), figures


def sent_to(cluster, chats: set[int], texts: tuple[str, ...]) -> dict[int, list[int]]:
    """{chat: ids of the messages the bot sent it whose text starts with one of `texts`}."""
    sent = collections.defaultdict(list)
    for e in cluster.remote.events_since(0):
        if e["chat_id"] in chats and e["action"] in ("send", "copy") and e["text"].startswith(texts):
            sent[e["chat_id"]].extend(e["message_ids"])
    return sent


def copies_deleted(cluster, chats: set[int], text: str) -> str:
    """Every copy runbot sent these chats (its text starts with `text`) and every "will be
    deleted" warning still in a chat is in a pending deletion's ids, and is gone once the
    deletions are due (made due now) and the sweep ran."""
    sent = [i for ids in sent_to(cluster, chats, (text, WILL_DELETE.split("{", 1)[0])).values() for i in ids]
    rows = PendingDeletion.objects.filter(chat_id__in=chats)
    recorded = {i for ids in rows.values_list("message_ids", flat=True) for i in ids}
    unrecorded = set(cluster.remote.live(sent)) - recorded
    assert not unrecorded, f"{len(unrecorded)} messages in chats with no row to delete them, e.g. {sorted(unrecorded)[:5]}"
    rows.update(delete_at=clock.now())
    fire(cluster, "delete_due_messages")
    wait_for(lambda: not cluster.remote.live(sent), timeout=SETTLE_TIMEOUT, what="every copy deleted", interval=0.5)
    return f"{len(sent)} messages"


@contextlib.contextmanager
def postgres_refused(cluster):
    """PostgreSQL refuses the deployment's connections (its database closed to new ones, the
    open ones terminated) while the block runs. Yields how many connections were terminated."""
    database = connection.ops.quote_name(cluster.database)
    db = connection.settings_dict
    # From the server's maintenance database: a database cannot refuse connections to itself.
    with psycopg.connect(
        dbname="postgres", user=db["USER"], password=db["PASSWORD"] or None, host=db["HOST"], port=db["PORT"], autocommit=True
    ) as admin:
        admin.execute(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS false")
        try:
            yield admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
                [DEPLOYMENT_DB_APP, cluster.database],
            ).fetchone()[0]
        finally:
            admin.execute(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS true")


def test_postgres_refused_while_runbot_delivers_200_files(cluster):
    """PostgreSQL gone for PG_OUTAGE seconds in the middle of 200 `/start <file>`: a delivery
    whose pending deletion cannot be written sends nothing, and one whose ids cannot be written
    deletes its copies at once; either way the user is told to try again. Those users try again
    once PostgreSQL is back and get the file; no copy is left in a chat without a row that
    deletes it, and every copy is deleted when due."""
    figures = UpdateFigures(f"PostgreSQL refused for {PG_OUTAGE:g} s mid-burst of 200 /start <file>")
    share, text, users = burst(cluster, figures, 9_300_000, "Refused")
    with postgres_refused(cluster) as terminated:
        time.sleep(PG_OUTAGE)  # the outage itself: its length is the scenario

    def answered() -> set[int]:
        got = set(cluster.remote.received(text=text)) | set(cluster.remote.received(text=SORRY))
        return {u.id for u in users} & got

    wait_for(lambda: len(answered()) == len(users), timeout=SETTLE_TIMEOUT, what="every user answered", interval=0.2)
    served = cluster.remote.received(text=text)
    sorry = [u for u in users if cluster.remote.received(text=SORRY).get(u.id)]
    kept = set(PendingDeletion.objects.filter(status="pending").values_list("chat_id", flat=True))
    unserved = [u for u in sorry if u.id not in kept]  # (a row whose ids could not be written stays `delivering`)
    retried = time.monotonic()
    for user in unserved:  # told to try again, they do
        cluster.remote.user_sends(user, f"/start {share}")
    wait_for(
        lambda: not [u for u in unserved if not PendingDeletion.objects.filter(chat_id=u.id, status="pending").exists()],
        timeout=SETTLE_TIMEOUT,
        what="the users told to try again served",
        interval=0.2,
    )
    figures.recover = time.monotonic() - retried
    kept = set(PendingDeletion.objects.filter(status="pending").values_list("chat_id", flat=True))
    figures.updates = len(users) + len(unserved)
    figures.handled = sum(1 for u in users if u.id in kept)
    figures.lost = len(users) - figures.handled
    copies = sent_to(cluster, {u.id for u in users}, (text,))
    live = set(cluster.remote.live([i for ids in copies.values() for i in ids]))
    figures.twice = sum(1 for ids in copies.values() if len(live.intersection(ids)) > 1)  # a file kept twice
    deleted = copies_deleted(cluster, {u.id for u in users}, text)
    figures.note = (
        f"{terminated} connections terminated; {len(served)} users got copies meanwhile, {len(sorry)} were told "
        f"“Sorry… try again” ({len(unserved)} with nothing kept: tried again, served); every copy in a chat had "
        f"its row, and was deleted when due: {deleted}"
    )
    assert (figures.twice, figures.lost, figures.problems) == (0, 0, []), figures
