"""A 10,000,000-user broadcast, sampled: the start's answer, the rows' preparation, and the sender's
claims and records while millions of rows are sent (no Telegram in this bench: its sends are what
bench/sender.py and bench/limiter.py measure).

Set-up (not measured, kept between invocations): `--users` active users as runbot leaves them, one
INSERT from generate_series (telegram ids from FIRST). The bench refuses a database with other
active users (a broadcast to everyone would reach them too).

Each run, on a fresh broadcast to every active user:

  start    the operator's *Start sending* (POST to the admin's view, Django's test client logged in
           as a superuser: the view, `broadcast_start`, the first START_ROWS rows), timed from
           request to response;
  prepare  `job_run("prepare_broadcasts")` as a worker runs it, again until every row is made:
           seconds from the start's answer to the last row ("rows ready"), rows per second;
  claims   the broadcast job's own claim (BroadcastSendSweep.claim, 200 rows a batch, the partial
           index walk and the claim's row) and record (`record` of every row as sent: the rows, the
           counters, in one transaction), batch after batch until `--sent` rows are sent, with
           PostgreSQL's autovacuum running as it does (migration 0018's settings). Claim times:
           p50 / p95 / max over the run, and p95 per tenth of it (the last tenth is "with most
           rows already sent"). CPU of this process per 1,000 rows claimed and recorded.
  size     the delivery table with its indexes and TOAST, bytes per row (the table is compacted,
           VACUUM FULL, before the first run and after each: every run starts alike), and the
           database's size.
  sending  twice a run, at the broadcast's start (before the claims' walk) and after it (the
           walk's `--sent` rows already sent), `--sample-seconds` of the broadcast sent for real by
           the production sender: `job_run("send_broadcasts", time_budget=...)` (its Sweep over
           BroadcastSendSweep, claims of 200 overlapped with the sends) through a worker's gateway
           (PyrogramGateway with RedisLimiter.from_settings(lane=BULK), access hashes from the
           claim, the paid flag on: TELEGRAM_PAID_BROADCASTS) against `manage.py telegram_server
           --latency 0.05` in a process of its own, enforcing Telegram's rates (1000/s in all, 30/s
           free, FLOOD_WAIT beyond). Reported: sends and achieved/allowed (1000/s) as the server
           counted them (messages.SendMessage arrivals, first to last, less those answered
           FLOOD_WAIT), FLOOD_WAITs, failed rows, this process's CPU per 1,000 sends (every
           thread: the job, kurigram's loop, the sending threads; the server's not counted), the
           job's claim p95. Set-up before each sample (not
           measured): the next rows' users meet the bot on the server (`users_meet`) and their
           access hashes are stored as runbot would have.

In the walk Telegram is not called: the claim's rows are recorded as sent at once (the gateway is
replaced by an object that only takes the access hashes, `peers_remember`). The broadcast_queued
receivers (which publish Celery tasks no worker of the bench would take) are disconnected.

At the end: the extrapolation to real time, at the rate the samples achieved and at Telegram's
1000/s (the physical limit), with the worker's CPU for the whole broadcast at the samples' cost.

    .venv/bin/python bench/scale.py [--runs 3] [--users 10000000] [--sent 5000000] [--sample-seconds 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import _setup  # noqa: F401
from _setup import spread
from _telegram import telegram_process
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
from botapp.services import broadcasts
from botapp.services.users import user_access_hash
from botapp.signals import broadcast_queued
from botapp.telegram.limiter import BULK, RedisLimiter, global_rate
from offline.telegram.clients import offline_gateway
from scheduler.jobs.broadcast_send import BroadcastSendSweep, Result
from scheduler.jobs.registry import job_run

TITLE = "bench: scale"
FIRST = 100_000_001  # bench users: FIRST, FIRST + 1, ...
BATCH = 200  # the sender's claim (send_broadcasts' batch_size)


class NoTelegram:
    """The sweep's gateway in this bench: claims hand it the access hashes; nothing is sent."""

    def peers_remember(self, peers) -> None:
        pass


def users_ensure(n: int) -> None:
    users = TelegramUser._meta.db_table
    have = TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + n, state="active").count()
    if have == n:
        return
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {users} WHERE telegram_id >= %s AND telegram_id < %s", [FIRST, FIRST + 10 * n])
        cur.execute(
            f"""INSERT INTO {users} (telegram_id, access_hash, username, first_name, last_name, language_code,
                                      start_payload, last_start_payload, state, joined_at, last_seen_at,
                                      verification_count, bypass_count, admin_banned)
                SELECT g, g * 7, '', 'U', '', '', '', '', 'active', now(), now(), 0, 0, false
                FROM generate_series(%s::bigint, %s::bigint) AS g""",
            [FIRST, FIRST + n - 1],
        )
        cur.execute(f"VACUUM ANALYZE {users}")  # no dead users (an earlier set-up's) under the claim's join
    print(f"set-up: {n:,} users stored in {time.perf_counter() - started:.0f} s", flush=True)


class Telegram:
    """The strict telegram_server of a bench run: its socket and controls."""

    def __init__(self, path, remote):
        self.path, self.remote = str(path), remote


def sample(telegram: Telegram, broadcast: Broadcast, seconds: float) -> dict:
    """`seconds` of the broadcast sent for real by the production sender (see the docstring)."""
    rate = global_rate()
    # The rows the job will claim next (lowest ids first), with a margin: their users meet the bot.
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT chat_id FROM {BroadcastDelivery._meta.db_table} WHERE broadcast_id = %s AND status = %s ORDER BY id LIMIT %s",
            [broadcast.pk, BroadcastDelivery.Status.PENDING.value, int(rate * seconds * 1.5) + 4 * BATCH],
        )
        chats = [row[0] for row in cur.fetchall()]
        hashes: dict[int, int] = {}
        for start in range(0, len(chats), 10_000):
            hashes.update(telegram.remote.users_meet(chats[start : start + 10_000]))
        cur.execute(
            f"""UPDATE {TelegramUser._meta.db_table} AS u SET access_hash = v.h
                FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, h) WHERE u.telegram_id = v.id""",
            [list(hashes), list(hashes.values())],
        )
    gateway = offline_gateway(
        telegram.path, name="worker-scale", limiter=RedisLimiter.from_settings(lane=BULK), peers=user_access_hash, paid=True
    )
    claims: list[float] = []
    claim = BroadcastSendSweep.claim

    def timed(self, n):  # the job's own claims, timed
        t = time.perf_counter()
        try:
            return claim(self, n)
        finally:
            claims.append(time.perf_counter() - t)

    remote = telegram.remote
    since, floods = remote.count(), remote.flood_waits()
    BroadcastSendSweep.claim = timed
    cpu = time.process_time()
    try:
        outcome = job_run("send_broadcasts", trigger="bench", gateway=gateway, time_budget=seconds)
    finally:
        cpu = time.process_time() - cpu
        BroadcastSendSweep.claim = claim
        gateway.stop()
    arrivals = sorted(at for method, _, at in remote.call_times(since) if method == "messages.SendMessage")
    if len(arrivals) < 2:
        raise SystemExit(f"bench/scale.py: Telegram received {len(arrivals)} sends in {seconds} s")
    floods = remote.flood_waits() - floods
    sends = len(arrivals) - floods  # a call answered FLOOD_WAIT arrived, but sent nothing
    achieved = (sends - 1) / (arrivals[-1] - arrivals[0])
    return {
        "sends": sends,
        "recorded": outcome.processed,
        "failed": outcome.failed,
        "seconds": arrivals[-1] - arrivals[0],
        "achieved": achieved,
        "ratio": achieved / settings.TELEGRAM_PAID_RATE,
        "floods": floods,
        "cpu_per_1000": cpu / len(arrivals) * 1000 * 1000,
        "claim_p95": percentile(claims, 95) * 1000 if claims else 0.0,
    }


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def table_bytes() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_total_relation_size(%s)", [BroadcastDelivery._meta.db_table])
        return cur.fetchone()[0]


def database_bytes() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        return cur.fetchone()[0]


def table_compact() -> None:
    """The delivery table rewritten without the dead rows a run leaves (VACUUM FULL: the bench's
    own database), so that each run starts on the same table, and the table's size is its rows'
    and not the last run's too (10M deleted rows: 5 GB counted, 529 bytes a row), and autovacuum
    is not still walking them during the next run's claims."""
    with connection.cursor() as cur:
        cur.execute(f"VACUUM FULL ANALYZE {BroadcastDelivery._meta.db_table}")


def one_run(client: Client, n: int, sent_target: int, telegram: Telegram | None, seconds: float) -> dict:
    broadcast = Broadcast.objects.create(title=TITLE, text="Hello, ten million")
    url = reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk])
    started = time.perf_counter()
    response = client.post(url)
    answered = time.perf_counter()
    if response.status_code != 302:
        raise SystemExit(f"bench/scale.py: the admin answered {response.status_code}")
    broadcast.refresh_from_db()
    first_rows = broadcast.total
    while broadcast.prepare_after is not None:
        job_run("prepare_broadcasts", trigger="bench")
        broadcast.refresh_from_db()
    ready = time.perf_counter()
    if broadcast.total != n:
        raise SystemExit(f"bench/scale.py: {broadcast.total:,} rows made, not {n:,}")
    size, db_size = table_bytes(), database_bytes()
    samples = [sample(telegram, broadcast, seconds)] if telegram else []

    sweep = BroadcastSendSweep(NoTelegram())
    claims, sent = [], 0
    cpu = time.process_time()
    while sent < sent_target:
        t = time.perf_counter()
        rows = sweep.claim(min(BATCH, sent_target - sent))
        claims.append(time.perf_counter() - t)
        if not rows:
            raise SystemExit(f"bench/scale.py: the claim found nothing after {sent:,} sends")
        sweep.record([Result(r.id, r.broadcast_id, r.user_id, "sent", message_id=1) for r in rows])
        sent += len(rows)
    cpu = time.process_time() - cpu
    depth = Broadcast.objects.get(pk=broadcast.pk).sent
    if telegram:
        samples.append(sample(telegram, broadcast, seconds))
    tenths = [claims[i * len(claims) // 10 : (i + 1) * len(claims) // 10] for i in range(10)]
    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.CANCELLED)
    started_delete = time.perf_counter()
    Broadcast.objects.filter(pk=broadcast.pk).delete()  # its rows with it
    table_compact()
    return {
        "start": answered - started,
        "first_rows": first_rows,
        "ready": ready - answered,
        "rate": (n - first_rows) / (ready - answered),
        "bytes_per_row": size / n,
        "size_mb": size / 1024 / 1024,
        "db_mb": db_size / 1024 / 1024,
        "depth": depth,
        "samples": samples,
        "p50": percentile(claims, 50) * 1000,
        "p95": percentile(claims, 95) * 1000,
        "max": max(claims) * 1000,
        "p95_tenths": [percentile(t, 95) * 1000 for t in tenths if t],
        "cpu_per_1000": cpu / sent * 1000 * 1000,
        "delete": time.perf_counter() - started_delete,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", type=int, default=10_000_000)
    parser.add_argument("--sent", type=int, default=5_000_000, help="rows claimed and recorded as sent each run")
    parser.add_argument(
        "--sample-seconds", type=float, default=30, help="seconds sent for real at the start and after --sent (0: none)"
    )
    args = parser.parse_args()
    if args.sample_seconds:
        settings.TELEGRAM_PAID_BROADCASTS = True  # a paid broadcast: the worker's limiter at 960/s, the paid flag on
        with telegram_process("--latency", "0.05") as (path, remote, _):  # Telegram's rates enforced
            runs_all(args, Telegram(path, remote))
    else:
        runs_all(args, None)


def runs_all(args, telegram: Telegram | None) -> None:
    if connection.vendor != "postgresql":
        raise SystemExit("bench/scale.py: point DATABASE_URL at PostgreSQL")
    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS, settings.SECURE_SSL_REDIRECT = ["testserver"], False
    Broadcast.objects.filter(title=TITLE).delete()
    if TelegramUser.objects.filter(state="active").exclude(telegram_id__gte=FIRST, telegram_id__lt=FIRST + args.users).exists():
        raise SystemExit("bench/scale.py: the bench database has other active users (a broadcast would reach them too)")
    if Broadcast.objects.filter(status__in=[Broadcast.Status.QUEUED, Broadcast.Status.SENDING]).exists():
        raise SystemExit("bench/scale.py: other broadcasts are being sent in this database")
    users_ensure(args.users)
    table_compact()
    broadcast_queued.disconnect(dispatch_uid="scheduler.broadcast_sender_wake")  # scheduler/apps.py
    admin, _ = get_user_model().objects.get_or_create(username="bench-scale", defaults={"is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(admin)
    print(
        f"{args.users:,} active users; a broadcast to all: the first {broadcasts.START_ROWS:,} rows at its start, "
        f"then chunks of {broadcasts.PREPARE_CHUNK:,}; {args.sent:,} rows claimed ({BATCH} a batch) and recorded each run",
        flush=True,
    )

    runs = []
    for run in range(args.runs):
        r = one_run(client, args.users, min(args.sent, args.users), telegram, args.sample_seconds)
        runs.append(r)
        for where, x in zip(("at the start", f"after {r['depth']:,} sent"), r["samples"], strict=False):
            print(
                f"run {run + 1} sending {where}: {x['sends']:,} sends in {x['seconds']:.1f} s, achieved {x['achieved']:,.0f}/s "
                f"= {x['ratio']:.3f} of allowed; {x['floods']} FLOOD_WAITs, {x['failed']} failed of {x['recorded']:,} recorded; "
                f"worker CPU {x['cpu_per_1000']:.0f} ms per 1,000 sends; the job's claim p95 {x['claim_p95']:.1f} ms",
                flush=True,
            )
        print(
            f"run {run + 1}: start answered in {r['start'] * 1000:.0f} ms ({r['first_rows']:,} rows), rows ready "
            f"{r['ready']:.0f} s later ({r['rate']:,.0f} rows/s); {r['size_mb']:,.0f} MB ({r['bytes_per_row']:.0f} B/row; "
            f"database {r['db_mb']:,.0f} MB); "
            f"claim p50 {r['p50']:.1f} ms, p95 {r['p95']:.1f} ms, max {r['max']:.0f} ms; p95 by tenth "
            f"{' '.join(f'{v:.1f}' for v in r['p95_tenths'])}; {r['cpu_per_1000']:.0f} ms CPU per 1,000 claimed and recorded; "
            f"deleted in {r['delete']:.0f} s",
            flush=True,
        )

    def col(key, fmt):
        return spread([r[key] for r in runs], fmt)

    rate = settings.TELEGRAM_PAID_RATE * settings.TELEGRAM_PAID_RATE_HEADROOM
    print(f"\nmin / median / max of {args.runs}:")
    print(f"  start answered, ms                         {spread([r['start'] * 1000 for r in runs], '{:.0f}')}")
    print(f"  rows ready after the answer, s             {col('ready', '{:.0f}')}")
    print(f"  rows made per second                       {col('rate', '{:,.0f}')}")
    print(f"  claim p95, ms                              {col('p95', '{:.1f}')}")
    print(f"  claim p95 in the last tenth, ms            {spread([r['p95_tenths'][-1] for r in runs], '{:.1f}')}")
    print(f"  claim max, ms                              {col('max', '{:.0f}')}")
    print(f"  CPU per 1,000 rows claimed and recorded, ms {col('cpu_per_1000', '{:.0f}')}")
    print(f"  delivery table, bytes per row              {col('bytes_per_row', '{:.0f}')}")
    print(f"  database, MB (rows made, before sending)   {col('db_mb', '{:,.0f}')}")
    sampled = [x for r in runs for x in r["samples"]]
    for i, where in enumerate(("at the start", "after the walk")):
        xs = [r["samples"][i] for r in runs if len(r["samples"]) > i]
        if not xs:
            continue
        print(
            f"  sending {where} ({args.sample_seconds:g} s, paid, strict server), sends {spread([x['sends'] for x in xs], '{:,.0f}')}:"
        )
        print(f"    achieved/allowed (1000/s)                {spread([x['ratio'] for x in xs], '{:.3f}')}")
        print(f"    FLOOD_WAITs                              {spread([x['floods'] for x in xs], '{:.0f}')}")
        print(f"    rows failed                              {spread([x['failed'] for x in xs], '{:.0f}')}")
        print(f"    worker CPU per 1,000 sends, ms           {spread([x['cpu_per_1000'] for x in xs], '{:.0f}')}")
        print(f"    the job's claim p95, ms                  {spread([x['claim_p95'] for x in xs], '{:.1f}')}")
    n = args.users
    print(
        f"  in real time, {n:,} sends: Telegram's 1000/s {n / 1000 / 3600:.2f} h (the physical limit); the limiter's {rate:,.0f}/s {n / rate / 3600:.2f} h",
        end="",
    )
    if sampled:
        achieved = statistics.median(x["achieved"] for x in sampled)
        cpu = statistics.median(x["cpu_per_1000"] for x in sampled)
        print(
            f"; as sampled ({achieved:,.0f}/s) {n / achieved / 3600:.2f} h, the worker's CPU {n / 1000 * cpu / 1000 / 3600:.2f} h of it",
            end="",
        )
    print(f"; preparation {statistics.median(r['ready'] for r in runs) / 60:.1f} min of it, sending from the first second")


if __name__ == "__main__":
    main()
