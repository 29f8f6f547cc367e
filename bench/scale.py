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
           index walk and the lease) and record (`record` of every row as sent: the rows, the
           counters, in one transaction), batch after batch until `--sent` rows are sent, with
           PostgreSQL's autovacuum running as it does (migration 0018's settings). Claim times:
           p50 / p95 / max over the run, and p95 per tenth of it (the last tenth is "with most
           rows already sent"). CPU of this process per 1,000 rows claimed and recorded.
  size     the delivery table with its indexes and TOAST, bytes per row (the table is compacted,
           VACUUM FULL, before the first run and after each: every run starts alike).

Telegram is not called: the claim's rows are recorded as sent at once (the gateway is replaced by
an object that only takes the access hashes, `peers_remember`). The broadcast_queued receivers
(which publish Celery tasks no worker of the bench would take) are disconnected.

At the end: the extrapolation to real time at the paid rate (TELEGRAM_PAID_RATE x the headroom).

    .venv/bin/python bench/scale.py [--runs 3] [--users 10000000] [--sent 5000000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import _setup  # noqa: F401
from _setup import spread
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
from botapp.services import broadcasts
from botapp.signals import broadcast_queued
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
        cur.execute(f"ANALYZE {users}")
    print(f"set-up: {n:,} users stored in {time.perf_counter() - started:.0f} s", flush=True)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def table_bytes() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_total_relation_size(%s)", [BroadcastDelivery._meta.db_table])
        return cur.fetchone()[0]


def table_compact() -> None:
    """The delivery table rewritten without the dead rows a run leaves (VACUUM FULL: the bench's
    own database), so that each run starts on the same table, and the table's size is its rows'
    and not the last run's too (10M deleted rows: 5 GB counted, 529 bytes a row), and autovacuum
    is not still walking them during the next run's claims."""
    with connection.cursor() as cur:
        cur.execute(f"VACUUM FULL ANALYZE {BroadcastDelivery._meta.db_table}")


def one_run(client: Client, n: int, sent_target: int) -> dict:
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
    size = table_bytes()

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
    args = parser.parse_args()
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
        r = one_run(client, args.users, min(args.sent, args.users))
        runs.append(r)
        print(
            f"run {run + 1}: start answered in {r['start'] * 1000:.0f} ms ({r['first_rows']:,} rows), rows ready "
            f"{r['ready']:.0f} s later ({r['rate']:,.0f} rows/s); {r['size_mb']:,.0f} MB ({r['bytes_per_row']:.0f} B/row); "
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
    hours = args.users / rate / 3600
    print(
        f"  in real time at the paid rate ({rate:,.0f}/s): {hours:.1f} h for {args.users:,} sends "
        f"(Telegram's 1000/s: {args.users / 1000 / 3600:.1f} h); preparation "
        f"{statistics.median(r['ready'] for r in runs) / 60:.1f} min of it, sending from the first second"
    )


if __name__ == "__main__":
    main()
