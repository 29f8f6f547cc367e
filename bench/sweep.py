"""Message-deleter throughput on PostgreSQL, through the real gateway.

1,000,000 pending deletions, 100,000 of them due (one message each, in 100,000 distinct private
chats whose users runbot met: TelegramUser rows with their access hashes). `delete_due_messages`
runs as in production (DeletionSweep in Sweep: batches of 500, 8 threads, a 50 s budget; the claim
loads each batch's access hashes) through a worker's PyrogramGateway (kurigram's client; peers =
TelegramUser, as scheduler/sender.py builds it; no limiter) talking MTProto to an in-process
TelegramServer with rate limits off. So the figure is Courier's own cost plus the emulated
Telegram's, which runs in this process too. Every message to delete exists on the server; every
row costs one messages.DeleteMessages and one "deleted" notice (messages.SendMessage).

The sweep stops at its time budget as the job does, so a run sweeps part of the 100,000 and the
rest stay due; deletions/s = messages the server deleted / time the job ran. Tables and server
are filled afresh for each run. Prints each run, min / median / max, and the EXPLAIN of the claim
query as the job sends it (it must use the partial index `deletion_due`).

    .venv/bin/python bench/sweep.py [--runs 3] [--total 1000000] [--due 100000] [--budget 50]
"""

from __future__ import annotations

import argparse
import time

import _setup  # noqa: F401
from _setup import spread
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import BotSettings, PendingDeletion, TelegramUser
from botapp.services.autodelete import DeletionSweep
from botapp.services.users import user_access_hash
from botapp.telegram.server.offline import offline_gateway
from botapp.telegram.server.server import TelegramServer
from botapp.telegram.server.state import User
from scheduler.jobs.deletions import delete_due_messages

BASE = 50_000_000  # chat i (1..due) is user BASE + i; its message to delete has id i on the server
BATCH, THREADS = 500, 8  # delete_due_messages's batch_size and sweep_outcome's concurrency (production)
HASH_MUL, HASH_MOD = 2654435761, 2**62


def access_hash(user_id: int) -> int:
    """The access hash of bench user `user_id`, the same on the server and in TelegramUser."""
    return user_id * HASH_MUL % HASH_MOD + 1


def fill_database(total: int, due: int) -> float:
    table, users = PendingDeletion._meta.db_table, TelegramUser._meta.db_table
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {table}")
        # Due rows: chats BASE+1..BASE+due, message id g each; the rest due in a day.
        cur.execute(
            f"""INSERT INTO {table} (chat_id, message_ids, delete_at, share_id, status, attempts, created_at, notice_due)
                SELECT %s + g, jsonb_build_array(g),
                       CASE WHEN g <= %s THEN now() - interval '1 minute' ELSE now() + interval '1 day' END,
                       'bench', 'pending', 0, now(), true
                FROM generate_series(1, %s) AS g""",
            [BASE, due, total],
        )
        cur.execute(f"ANALYZE {table}")
        # The users runbot met, with the access hashes it stored (one INSERT instead of 100,000 updates).
        cur.execute(f"DELETE FROM {users} WHERE telegram_id > %s AND telegram_id <= %s", [BASE, BASE + total])
        cur.execute(
            f"""INSERT INTO {users} (telegram_id, access_hash, username, first_name, last_name, language_code,
                                     start_payload, state, joined_at, last_seen_at, verification_count, bypass_count,
                                           admin_banned)
                SELECT %s + g, ((%s + g)::numeric * %s %% %s + 1)::bigint, '', 'U', '', '', '', 'active', now(), now(), 0, 0, false
                FROM generate_series(1, %s) AS g""",
            [BASE, BASE, HASH_MUL, HASH_MOD, due],
        )
    return time.perf_counter() - t0


def fresh_telegram(due: int) -> TelegramServer:
    """A server whose users BASE+1..BASE+due have met the bot and each got message i from it."""
    server = TelegramServer(username="CourierBot", enforce_rates=False)
    for i in range(1, due + 1):
        user_id = BASE + i
        server.users[user_id] = User(id=user_id, first_name="U", access_hash=access_hash(user_id), known_to_bot=True)
        assert server.new_message(user_id, out=True, text="file").id == i
    return server


def explain(gateway) -> str:
    """EXPLAIN of the claim's SELECT exactly as DeletionSweep.claim sends it (one claim, rolled back)."""
    with transaction.atomic(), CaptureQueriesContext(connection) as ctx:
        DeletionSweep(gateway, BotSettings.load()).claim(BATCH)
        transaction.set_rollback(True)
    (select,) = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT") and "FOR UPDATE" in q["sql"]]
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + select)
        return "\n".join(row[0] for row in cur.fetchall())


def run_once(total: int, due: int, budget: float, *, show_plan: bool = False) -> float:
    filled = fill_database(total, due)
    server = fresh_telegram(due)
    gateway = offline_gateway(server, name="worker", peers=user_access_hash)  # as scheduler/sender.py builds it
    try:
        if show_plan:
            print("EXPLAIN of the claim query:")
            print(explain(gateway))
        start = time.perf_counter()
        outcome = delete_due_messages(gateway=gateway, batch_size=BATCH, time_budget=budget)
        elapsed = time.perf_counter() - start
    finally:
        gateway.stop()
    deleted = sum(1 for m in server.box.values() if m.deleted)
    deletes, notices = server.count("messages.DeleteMessages"), server.count("messages.SendMessage")
    left_due = PendingDeletion.objects.filter(delete_at__lte=clock.now()).count()
    print(
        f"  swept {outcome.processed:,} rows ({outcome.failed} failed, {outcome.detail}) in {elapsed:.2f} s: "
        f"{deleted / elapsed:,.0f} deletions/s  (messages deleted on the server {deleted:,}; calls: {deletes:,} "
        f"DeleteMessages, {notices:,} SendMessage, {server.count('users.GetUsers')} GetUsers; left due {left_due:,}; "
        f"set-up {filled:.1f} s)",
        flush=True,
    )
    if not deleted == deletes == notices == outcome.processed or left_due != due - outcome.processed:
        raise SystemExit("bench/sweep.py: a swept row was not deleted on the server, or not noticed")
    return deleted / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=50.0, help="seconds each sweep may run (production: 50)")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("bench/sweep.py: point DATABASE_URL at PostgreSQL")
    call_command("migrate", verbosity=0)
    print(
        f"{args.total:,} pending deletions, {args.due:,} due; delete_due_messages with batches of {BATCH}, "
        f"{THREADS} threads, a {args.budget:g} s budget"
    )
    rates = []
    for run in range(args.runs):
        print(f"run {run + 1}:")
        rates.append(run_once(args.total, args.due, args.budget, show_plan=run == 0))
    print(f"\ndeletions/s, min / median / max of {args.runs} runs: {spread(rates, '{:,.0f}')}")


if __name__ == "__main__":
    main()
