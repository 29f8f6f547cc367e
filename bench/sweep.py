"""Message-deleter throughput on PostgreSQL.

1,000,000 pending deletions, 100,000 of them due, swept against the in-memory Telegram with no rate
limit (so the figure is our own cost: claims, bulk updates, the sweep loop). Prints deletions/s and
the EXPLAIN of the claim query (it must use the partial index `deletion_due`).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/courier_bench python bench/sweep.py [--total N] [--due N]
"""

import argparse
import time

import _setup  # noqa: F401
from django.core.management import call_command
from django.db import connection, transaction

from botapp import clock
from botapp.models import ClaimStatus, PendingDeletion
from botapp.telegram.fake import FakeTelegram
from scheduler.jobs.deletions import DeletionSweep
from scheduler.jobs.sweep import Sweep


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("bench/sweep.py: point DATABASE_URL at PostgreSQL")

    call_command("migrate", verbosity=0)
    table = PendingDeletion._meta.db_table
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {table}")
        # Due rows: chats 1..due, one message each; the rest due in a day.
        cur.execute(
            f"""INSERT INTO {table} (chat_id, message_ids, delete_at, share_id, status, attempts, created_at)
                SELECT g, '[1]'::jsonb,
                       CASE WHEN g <= %s THEN now() - interval '1 minute' ELSE now() + interval '1 day' END,
                       'bench', 'pending', 0, now()
                FROM generate_series(1, %s) AS g""",
            [args.due, args.total],
        )
        cur.execute(f"ANALYZE {table}")
    print(f"inserted {args.total:,} rows ({args.due:,} due) in {time.perf_counter() - t0:.1f} s")

    claim = (
        PendingDeletion.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(status=ClaimStatus.PENDING, delete_at__lte=clock.now())
        .order_by("delete_at")
        .values_list("id", "chat_id", "message_ids", "share_id")[: args.batch]
    )
    print("EXPLAIN of the claim query:")
    with transaction.atomic():
        print(claim.explain())

    fake = FakeTelegram()
    for chat in range(1, args.due + 1):
        fake.send_text(chat, "file")  # message #1 in each chat: the one to delete
    fake.events.clear()

    job = DeletionSweep(fake)
    start = time.perf_counter()
    processed, failed, batches = Sweep(
        job.claim, job.work, job.record, batch_size=args.batch, time_budget=3600, concurrency=args.concurrency
    ).run()
    elapsed = time.perf_counter() - start
    deleted = sum(1 for e in fake.events if e.action == "delete")
    print(f"swept {processed:,} rows ({failed} failed) in {batches} batches of {args.batch} in {elapsed:.2f} s")
    print(f"deletions/s: {deleted / elapsed:,.0f}  (Telegram delete calls: {deleted:,}, notices: {processed:,})")
    left_due = PendingDeletion.objects.filter(delete_at__lte=clock.now()).count()
    print(f"left due: {left_due}, left in table: {PendingDeletion.objects.count():,}")


if __name__ == "__main__":
    main()
