"""Worker memory: the resident set of a worker process sending one large broadcast through the
real job, sampled as it goes, to see whether memory depends on the broadcast's size.

A fresh process plays a Celery worker's child: it builds its sender with scheduler.sender's
worker_gateway() (a kurigram session file, PyrogramGateway on the bulk lane of the Redis limiter
from RedisLimiter.from_settings, peers = the access hashes runbot stored) and runs
job_run("send_broadcasts") as the Celery task does, again and again (each run has the job's 50 s
budget; beat's wait for the next minute is left out), until the broadcast is done. Telegram is
`manage.py telegram_server --no-rates` in a process of its own, so the pace is the limiter's or
whatever this machine manages.

The worker is configured by environment, as in production:
  default     TELEGRAM_PAID_BROADCASTS=1: the limiter at 950/s, 238 sends in flight (the setting a
              million-user broadcast needs; at 870fc7b more than the limiter's Redis pool of 100
              connections, so rows are handed back: docs/benchmarks.md);
  --rate R    the free lane at TELEGRAM_RATE=R (limiter at R x TELEGRAM_RATE_HEADROOM/s, in flight that x 0.25).

Before the run: `--users` users write to the bot (telegram_server knows them), their access
hashes are read back (users.getUsers, 200 at a time) and stored in TelegramUser as runbot would,
and one queued broadcast gets a pending delivery per user (one INSERT ... SELECT each).

This process samples the worker's /proc/<pid>/status (VmRSS; VmHWM, the peak) and telegram_server's
count of messages.SendMessage every --interval seconds, then prints RSS against sends, the peak,
the slope of RSS per 100,000 sends after the first 10 % (a least-squares line), what the gateway's
per-user caches hold at the end (the worker reports them), and rows the job handed back (its
errors go to the worker's stderr, which is kept in a file and summarised). Sampling stops when the
last job run returns, before the worker measures its caches.

    .venv/bin/python bench/rss.py [--users 200000] [--rate R] [--interval 1] [--samples FILE.csv]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time

import _setup  # noqa: F401
from _setup import ROOT

TITLE = "bench: worker RSS"
FIRST = 70_000_001  # bench users: FIRST, FIRST + 1, ...
MB = 1024 * 1024


def status_kb(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS) and Threads of a process, from /proc/<pid>/status (kB)."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                found[key] = int(value.split()[0])
    return found


# --- the worker process --------------------------------------------------------------------------


def worker() -> None:
    """Runs send_broadcasts as the Celery task does until no active broadcast is left."""
    from botapp.models import Broadcast
    from scheduler.jobs.broadcast_send import ACTIVE
    from scheduler.jobs.registry import job_run
    from scheduler.jobs.sweep import sends_in_flight
    from scheduler.sender import worker_gateway

    gateway = worker_gateway()
    from botapp.telegram.limiter import send_batch_size

    # The stream's sending threads: sends_in_flight() sends, send_batch_size() of them per thread.
    threads = -(-sends_in_flight() // send_batch_size())
    print(json.dumps({"ready": True, "in_flight": sends_in_flight(), "threads": threads}), flush=True)
    sys.stdin.readline()  # go
    runs = []
    while Broadcast.objects.filter(status__in=ACTIVE).exists():
        started = time.monotonic()
        outcome = job_run("send_broadcasts", trigger="bench")
        runs.append((outcome.processed, outcome.failed, round(time.monotonic() - started, 1)))
        print(json.dumps({"run": runs[-1]}), flush=True)
    print(json.dumps({"finished": runs}), flush=True)  # before anything below can move the peak
    hashes, known = gateway._peer_hashes, gateway._known_peers  # what the gateway keeps per user
    size = sys.getsizeof  # a user id in both is one int object (the claim's row hands it to both)
    cache = size(hashes) + size(known) + sum(size(k) + size(v) for k, v in hashes.items())
    cache += sum(size(k) for k in known if k not in hashes)
    print(json.dumps({"done": runs, "peer_hashes": len(hashes), "known_peers": len(known), "cache_bytes": cache}), flush=True)
    gateway.stop()


# --- this process --------------------------------------------------------------------------------


def prepare(path, users: int) -> int:
    """Users who wrote to the bot, stored with their access hashes, and a queued broadcast with a
    pending delivery for each. Returns the broadcast's id."""
    from _telegram import access_hashes
    from django.db import connection

    from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
    from offline.telegram.clients import offline_gateway

    ids = range(FIRST, FIRST + users)
    t0 = time.perf_counter()
    done = 0
    lock = threading.Lock()

    def meet(part):  # users write /start, on a few control connections at once
        nonlocal done
        from botapp.telegram.gateway import TgUser
        from offline.telegram.remote import RemoteTelegram

        own = RemoteTelegram(path, timeout=60)
        for user_id in part:
            own.user_sends(TgUser(id=user_id, first_name="U"), "/start")
        own.close()
        with lock:
            done += len(part)

    pool = [threading.Thread(target=meet, args=(ids[k::4],)) for k in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    met = time.perf_counter() - t0
    hashes: dict[int, int] = {}
    setup = offline_gateway(str(path), name="setup", peers=hashes.get)
    hashes.update(access_hashes(setup, ids))
    setup.stop()
    users_table, deliveries = TelegramUser._meta.db_table, BroadcastDelivery._meta.db_table
    with connection.cursor() as cur:  # what runbot stored when these users wrote to the bot
        cur.execute(f"DELETE FROM {users_table} WHERE telegram_id >= %s AND telegram_id < %s", [FIRST, FIRST + users])
        cur.execute(
            f"""INSERT INTO {users_table} (telegram_id, access_hash, username, first_name, last_name, language_code,
                                           start_payload, last_start_payload, state, joined_at, last_seen_at, verification_count, bypass_count,
                                           admin_banned)
                SELECT u.id, u.hash, '', 'U', '', '', '', '', 'active', now(), now(), 0, 0, false
                FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, hash)""",
            [list(ids), [hashes[i] for i in ids]],
        )
    broadcast = Broadcast.objects.create(title=TITLE, text="Broadcast: hello", status=Broadcast.Status.QUEUED, total=users)
    with connection.cursor() as cur:  # what broadcast_start and the preparer leave: one pending delivery per user
        cur.execute(
            f"""INSERT INTO {deliveries} (broadcast_id, user_id, chat_id, status, error)
                SELECT %s, id, telegram_id, 'pending', '' FROM {users_table}
                WHERE telegram_id >= %s AND telegram_id < %s ORDER BY telegram_id""",
            [broadcast.pk, FIRST, FIRST + users],
        )
        cur.execute(f"ANALYZE {deliveries}")
    stored = time.perf_counter() - t0 - met
    print(f"set-up: {users:,} users met the bot in {met:.0f} s; stored with a queued broadcast in {stored:.0f} s")
    return broadcast.pk


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of y against x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=None, help="free lane at TELEGRAM_RATE=R instead of paid broadcasts")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--samples", help="write the samples (seconds, sends, VmRSS kB, VmHWM kB, threads) to this CSV")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()

    from _telegram import STORAGE, offline_env, telegram_process
    from django.core.management import call_command

    from botapp.models import Broadcast, TelegramUser

    call_command("migrate", verbosity=0)
    Broadcast.objects.filter(title=TITLE).delete()
    others = Broadcast.objects.filter(status__in=[Broadcast.Status.QUEUED, Broadcast.Status.SENDING])
    if others.exists():
        raise SystemExit(f"bench/rss.py: other broadcasts are active in this database: {list(others)}")

    with telegram_process("--no-rates", "--channel", str(STORAGE)) as (path, remote, proc):
        broadcast_id = prepare(path, args.users)
        sessions = tempfile.TemporaryDirectory(prefix="courier-bench-sessions-")
        env = offline_env(path, sessions.name)
        if args.rate:
            env.update(TELEGRAM_PAID_BROADCASTS="0", TELEGRAM_RATE=str(args.rate))
        else:
            env.update(TELEGRAM_PAID_BROADCASTS="1")
        errors = tempfile.TemporaryFile("w+")
        child = subprocess.Popen(
            [sys.executable, "bench/rss.py", "--worker"], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=errors, text=True,
        )  # fmt: skip
        try:
            ready = json.loads(child.stdout.readline())
            base = status_kb(child.pid)
            print(
                f"worker {child.pid} ready (Django, kurigram signed in, {ready['in_flight']} sends in flight on "
                f"{ready['threads']} sending threads): "
                f"RSS {base['VmRSS'] / 1024:.1f} MB",
                flush=True,
            )
            sends_before = remote.count("messages.SendMessage")
            samples: list[tuple[float, int, dict]] = []
            lines: list[dict] = []

            def read_worker():
                for line in child.stdout:
                    lines.append(json.loads(line))

            reader = threading.Thread(target=read_worker, daemon=True)
            reader.start()
            t0 = time.monotonic()
            child.stdin.write("go\n")
            child.stdin.flush()
            next_report = args.users // 10
            while child.poll() is None:
                try:
                    st = status_kb(child.pid)
                except (FileNotFoundError, ProcessLookupError):
                    break
                sent = remote.count("messages.SendMessage") - sends_before
                samples.append((time.monotonic() - t0, sent, st))
                if sent >= next_report:
                    runs = [x["run"] for x in lines if "run" in x]
                    print(
                        f"  {time.monotonic() - t0:6.0f} s  {sent:9,} sent  RSS {st['VmRSS'] / 1024:6.1f} MB  "
                        f"peak {st['VmHWM'] / 1024:6.1f} MB  threads {st['Threads']:3}  job runs {len(runs)}, "
                        f"rows handed back or failed {sum(r[1] for r in runs):,}",
                        flush=True,
                    )
                    next_report += args.users // 10
                if any("finished" in x for x in lines):  # the job is over: what follows is the report
                    break
                time.sleep(args.interval)
            child.wait(120)
            reader.join(5)
        finally:
            if child.poll() is None:
                child.kill()
            sessions.cleanup()
        errors.seek(0)
        handed_back, first_error = 0, ""
        for line in errors:
            if "row handed back untouched" in line:
                handed_back += 1
            elif not first_error and line[:1].isalpha() and "Error" in line.split(":")[0] and "IndexError" not in line:
                first_error = line.strip()
        errors.close()
        elapsed = samples[-1][0]
        sent = remote.count("messages.SendMessage") - sends_before
        broadcast = Broadcast.objects.get(pk=broadcast_id)
        done = next((x for x in lines if "done" in x), None)
        Broadcast.objects.filter(title=TITLE).delete()
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + args.users).delete()

    if done is None or broadcast.status != Broadcast.Status.DONE or broadcast.sent != args.users or sent != args.users:
        raise SystemExit(
            f"bench/rss.py: the broadcast ended {broadcast.status} with {broadcast.sent:,} sent "
            f"({broadcast.failed} failed); Telegram received {sent:,} sends of {args.users:,}"
        )
    if args.samples:
        with open(args.samples, "w") as f:
            f.write("seconds,sends,vmrss_kb,vmhwm_kb,threads\n")
            f.writelines(f"{t:.1f},{n},{st['VmRSS']},{st['VmHWM']},{st['Threads']}\n" for t, n, st in samples)
    peak = max(max(s[2]["VmHWM"], s[2]["VmRSS"]) for s in samples) / 1024  # VmHWM is refreshed lazily
    # The slope while a job run's pool is up (between runs the sending threads are gone for a moment).
    steady = [
        (s[1], s[2]["VmRSS"] / 1024) for s in samples if s[1] >= args.users // 10 and s[2]["Threads"] > ready["threads"] // 2
    ]
    if not steady:  # a run too short to be sampled with the pool up (tests/test_bench_scripts.py's)
        steady = [(s[1], s[2]["VmRSS"] / 1024) for s in samples]
    per_100k = slope(steady) * 100_000
    last = steady[-1][1]
    setting = f"TELEGRAM_RATE={args.rate:g}" if args.rate else "TELEGRAM_PAID_BROADCASTS=1"
    print(
        f"\n{setting}, {ready['in_flight']} sends in flight: {args.users:,} sends in {elapsed:.0f} s "
        f"({args.users / elapsed:,.0f}/s) in {len(done['done'])} job run(s), {len(samples)} samples:"
    )
    print(f"  rows the job handed back            {handed_back:,}{f'  (first error: {first_error})' if first_error else ''}")
    print(f"  RSS at ready                        {base['VmRSS'] / 1024:7.1f} MB")
    print(f"  RSS at {steady[0][0]:>9,} sends            {steady[0][1]:7.1f} MB")
    print(f"  RSS at {steady[-1][0]:>9,} sends            {last:7.1f} MB  (last sample with the pool up)")
    print(f"  RSS as the last run ended           {samples[-1][2]['VmRSS'] / 1024:7.1f} MB")
    print(f"  peak RSS (VmHWM)                    {peak:7.1f} MB")
    print(f"  slope from 10 % on (pool up)        {per_100k:+7.1f} MB per 100,000 sends  ({len(steady)} samples)")
    print(
        f"  gateway caches at the end: _peer_hashes {done['peer_hashes']:,} entries, _known_peers {done['known_peers']:,}: "
        f"{done['cache_bytes'] / MB:.1f} MB ({done['cache_bytes'] / MB / args.users * 100_000:.1f} MB per 100,000 users)"
    )
    print(
        f"  extrapolation (not measured) to 1,000,000 sends at this slope: peak about "
        f"{peak + per_100k * (1_000_000 - args.users) / 100_000:.0f} MB (goal < 150 MB)"
    )


if __name__ == "__main__":
    main()
