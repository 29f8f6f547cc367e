"""Message-deleter throughput on PostgreSQL, through the real gateway.

1,000,000 pending deletions, 100,000 of them due (one message each, in 100,000 distinct private
chats whose users runbot met: TelegramUser rows with their access hashes). `delete_due_messages`
runs as in production (DeletionSweep in Sweep: batches of 500, 8 threads, groups of 100 rows per
`work_many`, a 50 s budget; the claim loads each batch's access hashes) through a worker's
PyrogramGateway (kurigram's client; peers = TelegramUser, as scheduler/sender.py builds it; no
limiter) talking MTProto to `manage.py telegram_server --no-rates` in a process of its own (its
CPU is Telegram's in production; until 2026-11-26 this bench ran it in the sweeping process, GIL
and all). Every message to delete exists on the server; each row's message is deleted
(messages.DeleteMessages takes 100 ids across chats) and the user gets the "deleted" notice
(messages.SendMessage, in MTProto containers).

The sweep stops at its time budget as the job does, so a run sweeps part of the 100,000 and the
rest stay due; deletions/s = messages the server deleted / time the job ran. Tables are filled
afresh for each run, with new users and messages on the server. Prints each run, min / median /
max, and the EXPLAIN of the claim query as the job sends it (it must use the partial index
`deletion_due`).

--paced measures it at production's pace instead: the worker's limiter as RedisLimiter.from_settings
builds it (bulk lane, TELEGRAM_RATE x headroom: 28.8 calls/s), against a telegram_server enforcing
Telegram's rates with a 50 ms answer (FLOOD_WAITs counted), 3,000 due (more than a 50 s slice
sends) among 100,000: every deletion's notice is a limited send, so the pace is the limiter's.

    .venv/bin/python bench/sweep.py [--runs 3] [--total 1000000] [--due 100000] [--budget 50]
    .venv/bin/python bench/sweep.py --paced    # one 50 s slice a run at 28.8 calls/s
"""

from __future__ import annotations

import argparse
import time

import _setup  # noqa: F401
from _setup import spread
from _telegram import process_cpu, telegram_process
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import BotSettings, PendingDeletion, TelegramUser
from botapp.services.users import user_access_hash
from botapp.telegram.limiter import BULK, RedisLimiter
from offline.telegram.clients import offline_gateway
from scheduler.jobs.deletions import DeletionSweep, delete_due_messages

BASE = 50_000_000  # run r's chat i (1..due) is user BASE + r * due + i
BATCH, THREADS = 500, 8  # delete_due_messages's batch_size and sweep_outcome's concurrency (production)
CHUNK = 10_000  # users and messages made on the server per control call


def fill(remote, base: int, total: int, due: int) -> tuple[float, list[int]]:
    """Users base+1..base+due meet the bot and each gets one message from it (on the server); in
    PostgreSQL their TelegramUser rows, one pending deletion of that message each, and total - due
    more deletions due in a day. Returns (seconds, the due messages' ids)."""
    table, users = PendingDeletion._meta.db_table, TelegramUser._meta.db_table
    t0 = time.perf_counter()
    chats = list(range(base + 1, base + due + 1))
    hashes, message_ids = {}, []
    for start in range(0, due, CHUNK):
        chunk = chats[start : start + CHUNK]
        hashes.update(remote.users_meet(chunk))
        message_ids += remote.bot_sent(chunk, "file")
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {table}")
        cur.execute(
            f"""INSERT INTO {table} (chat_id, message_ids, delete_at, share_id, status, attempts, created_at, notice_due)
                SELECT c, jsonb_build_array(m), now() - interval '1 minute', 'bench', 'pending', 0, now(), true
                FROM unnest(%s::bigint[], %s::bigint[]) AS u(c, m)""",
            [chats, message_ids],
        )
        cur.execute(  # not due yet: what the claim's index must skip
            f"""INSERT INTO {table} (chat_id, message_ids, delete_at, share_id, status, attempts, created_at, notice_due)
                SELECT %s + g, jsonb_build_array(g), now() + interval '1 day', 'bench', 'pending', 0, now(), true
                FROM generate_series(1, %s) AS g""",
            [base + due, total - due],
        )
        cur.execute(f"ANALYZE {table}")
        # The users runbot met, with the access hashes it stored (one INSERT instead of 100,000 updates).
        cur.execute(f"DELETE FROM {users} WHERE telegram_id > %s AND telegram_id <= %s", [base, base + due])
        cur.execute(
            f"""INSERT INTO {users} (telegram_id, access_hash, username, first_name, last_name, language_code,
                                     start_payload, last_start_payload, state, joined_at, last_seen_at, verification_count, bypass_count,
                                     admin_banned)
                SELECT u.id, u.hash, '', 'U', '', '', '', '', 'active', now(), now(), 0, 0, false
                FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, hash)""",
            [chats, [hashes[c] for c in chats]],
        )
    return time.perf_counter() - t0, message_ids


def explain(gateway) -> str:
    """EXPLAIN of the claim's SELECT exactly as DeletionSweep.claim sends it (one claim, rolled back)."""
    with transaction.atomic(), CaptureQueriesContext(connection) as ctx:
        DeletionSweep(gateway, BotSettings.load()).claim(BATCH)
        transaction.set_rollback(True)
    (select,) = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT") and "FOR UPDATE" in q["sql"]]
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + select)
        return "\n".join(row[0] for row in cur.fetchall())


def run_once(path, remote, server_pid: int, run: int, total: int, due: int, budget: float, *, show_plan=False, paced=False):
    filled, message_ids = fill(remote, BASE + run * due, total, due)
    limiter = RedisLimiter.from_settings(lane=BULK) if paced else None  # a worker's, as scheduler/sender.py builds it
    gateway = offline_gateway(str(path), name="worker", peers=user_access_hash, limiter=limiter)
    since, floods = remote.count(), remote.flood_waits()
    try:
        if show_plan:
            print("EXPLAIN of the claim query:")
            print(explain(gateway))
        server_cpu, cpu, start = process_cpu(server_pid), time.process_time(), time.perf_counter()
        outcome = delete_due_messages(gateway=gateway, batch_size=BATCH, time_budget=budget)
        elapsed = time.perf_counter() - start
        cpu, server_cpu = time.process_time() - cpu, process_cpu(server_pid) - server_cpu
    finally:
        gateway.stop()
    deleted = len(message_ids) - len(remote.live(message_ids))
    deletes = remote.count("messages.DeleteMessages", since=since)
    notices = remote.count("messages.SendMessage", since=since)
    left_due = PendingDeletion.objects.filter(delete_at__lte=clock.now()).count()
    print(
        f"  swept {outcome.processed:,} rows ({outcome.failed} failed, {outcome.detail}) in {elapsed:.2f} s: "
        f"{deleted / elapsed:,.0f} deletions/s, {deleted / cpu:,.0f} per CPU-second of the sweeping process "
        f"(its CPU {cpu:.1f} s, telegram_server's {server_cpu:.1f} s; messages deleted on the server {deleted:,}; calls: {deletes:,} "
        f"DeleteMessages, {notices:,} SendMessage, {remote.count('users.GetUsers', since=since)} GetUsers; "
        f"left due {left_due:,}; set-up {filled:.1f} s; FLOOD_WAITs {remote.flood_waits() - floods})",
        flush=True,
    )
    # A notice refused with a FLOOD_WAIT goes again later (the row keeps it due): only then may fewer
    # notices than deletions have gone by the end of the slice.
    refused = remote.flood_waits() - floods
    noticed = notices == outcome.processed or (refused and notices < outcome.processed)
    if not (deleted == outcome.processed and noticed) or left_due != due - outcome.processed:
        raise SystemExit("bench/sweep.py: a swept row was not deleted on the server, or not noticed")
    return deleted / elapsed, deleted / cpu, (deletes + notices) / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=50.0, help="seconds each sweep may run (production: 50)")
    parser.add_argument("--paced", action="store_true", help="at production's pace: the worker's limiter, Telegram's rates")
    args = parser.parse_args()
    if args.paced:  # defaults of the paced case: more due than one slice sends
        args.total = 100_000 if args.total == parser.get_default("total") else args.total
        args.due = 3_000 if args.due == parser.get_default("due") else args.due
    if connection.vendor != "postgresql":
        raise SystemExit("bench/sweep.py: point DATABASE_URL at PostgreSQL")
    call_command("migrate", verbosity=0)
    print(
        f"{args.total:,} pending deletions, {args.due:,} due; delete_due_messages with batches of {BATCH}, "
        f"{THREADS} threads, a {args.budget:g} s budget"
    )
    rates, per_cpu, calls = [], [], []
    server = ("--latency", "0.05") if args.paced else ("--no-rates",)
    with telegram_process(*server) as (path, remote, proc):
        for run in range(args.runs):
            print(f"run {run + 1}:")
            rate, cpu_rate, call_rate = run_once(
                path, remote, proc.pid, run, args.total, args.due, args.budget, show_plan=run == 0, paced=args.paced
            )
            rates.append(rate)
            per_cpu.append(cpu_rate)
            calls.append(call_rate)
    print(f"\nmin / median / max of {args.runs} runs{' at production pace' if args.paced else ''}:")
    print(f"  deletions/s (wall clock, the emulated Telegram on the same cores)  {spread(rates, '{:,.1f}')}")
    print(f"  Telegram calls/s (deletes and notices)                             {spread(calls, '{:,.1f}')}")
    print(f"  deletions per CPU-second of the sweeping process                  {spread(per_cpu, '{:,.0f}')}")


if __name__ == "__main__":
    main()
