"""Sender cost: broadcast sends per CPU-second of the sending process.

The emulated Telegram is `manage.py telegram_server --no-rates` in a process of its own, so its
CPU is not counted; the sender is this process (every thread: the sending threads, kurigram's
loop, its crypto executor), measured with time.process_time() around 5,000 sends to 5,000
distinct users who wrote to the bot (a fresh gateway each time). Three configurations alternate
within each run:

  job      the broadcast job's own loop: Sweep(BroadcastSendSweep) as send_broadcasts runs it
           (claims of 200 with their access hashes, sends, results and counters recorded in bulk)
           through a worker's gateway: PyrogramGateway(limiter=RedisLimiter(lane=BULK),
           peers=user_access_hash), as scheduler/sender.py builds it.
  gateway  the same gateway, sends only: access hashes handed over as the claim does.
  bare     no limiter: kurigram and the gateway alone.

The limiter's rate is set to 100,000/s so it never sleeps, but every Redis round trip it makes is
made. All three use the same number of sending threads (8: the stream's in-flight count at the
free 30/s rate).

--paced free|paid measures the job variant at production's pacing instead (the headline figure; the
unthrottled ones above are the ceiling): the limiter as RedisLimiter.from_settings builds a
worker's (the bulk lane at TELEGRAM_RATE x headroom, 28.5/s; or with TELEGRAM_PAID_BROADCASTS on,
TELEGRAM_PAID_RATE x headroom, 960/s, the sends carrying the paid flag), the stream sized for that
rate, against a telegram_server that enforces Telegram's rates (FLOOD_WAITs counted) with a 50 ms
answer. Its CPU includes what the process spends waiting for its slots (the idle cost at 28.5/s).
Use one job slice's worth of sends (--sends 1440: the 50 s time budget at 28.8/s), so each
slice's own start (a pool, the first claim, the last record) weighs as it does in production.

--profile runs the job variant once under cProfile instead, one profiler per thread (the calling
thread's claims and records, the sending threads, kurigram's loop and crypto threads), each timing
its own thread's CPU (time.thread_time), merged; it prints CPU ms per send by cumulative and by
own time. cProfile's overhead inflates every figure (calls that are cheap and many the most):
read it for where the time goes, not for the rate.

    .venv/bin/python bench/sender.py [--runs 3] [--sends 5000] [--threads 8] [--profile [--top 25] [--profile-out FILE]]
    .venv/bin/python bench/sender.py --paced free --sends 1440    # one 50 s job slice a run
    .venv/bin/python bench/sender.py --paced paid --sends 10000   # ~10 s a run
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time

import _setup  # noqa: F401
import redis
from _setup import ROOT, spread
from _telegram import access_hashes, process_cpu, telegram_process, users_meet_bot
from django.conf import settings
from django.core.management import call_command
from django.db import close_old_connections

from botapp.models import Broadcast, BroadcastDelivery, TelegramUser
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import SendItem
from botapp.telegram.limiter import BULK, RedisLimiter, global_rate
from offline.telegram.clients import offline_gateway
from scheduler.jobs.broadcast_send import BroadcastSendSweep
from scheduler.jobs.sweep import sends_sweep

FIRST = 30_000_001
LIMITER_RATE = 100_000  # never sleeps, but makes every round trip
VARIANTS = ("job", "gateway", "bare")
TITLE = "bench: sender cost"


def queue_broadcast(chats) -> None:
    """A started broadcast with one pending delivery per chat (what broadcast_start and the preparer leave)."""
    users = dict(TelegramUser.objects.filter(telegram_id__in=chats).values_list("telegram_id", "pk"))
    broadcast = Broadcast.objects.create(title=TITLE, text="Broadcast: hello", status=Broadcast.Status.QUEUED, total=len(chats))
    BroadcastDelivery.objects.bulk_create(
        [BroadcastDelivery(broadcast=broadcast, user_id=users[c], chat_id=c) for c in chats], batch_size=5000
    )


class ThreadProfiles:
    """cProfile in every thread started after `install()` and, between `enable()` and `disable()`,
    in the calling thread; each profiler times its own thread's CPU."""

    def __init__(self):
        self.main = cProfile.Profile(time.thread_time)
        self.threads: list[cProfile.Profile] = []
        self.lock = threading.Lock()

    def _start(self, frame, event, arg):  # threading.setprofile: the new thread's first event
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        with self.lock:
            self.threads.append(profile)
        profile.enable()

    def install(self):
        threading.setprofile(self._start)

    def enable(self):
        self.main.enable()

    def disable(self):
        self.main.disable()
        threading.setprofile(None)

    def stats(self) -> pstats.Stats:
        stats = pstats.Stats(self.main)
        for profile in self.threads:  # their threads have ended (pool shut down, gateway stopped)
            stats.add(profile)
        return stats


def measure(path, remote, server_pid, variant, chats, hashes, threads, profiles=None, paced: str = ""):
    prefix = f"courier:bench:{time.time_ns()}"
    client = redis.Redis.from_url(settings.REDIS_URL, max_connections=threads + 8)
    limiter = None if variant == "bare" else RedisLimiter(client, rate=LIMITER_RATE, prefix=prefix, lane=BULK)
    rate = LIMITER_RATE
    if paced:  # production's limiter for a worker (RedisLimiter.from_settings), on keys of its own
        worker = RedisLimiter.from_settings(lane=BULK)
        free_rate = 1 / worker.free_interval if worker.free_interval else None
        limiter = RedisLimiter(
            worker.redis, rate=worker.rate, free_rate=free_rate, allowed=worker.allowed, free_allowed=worker.free_allowed,
            span=worker.span, prefix=prefix, lane=BULK,
        )  # fmt: skip
        rate = global_rate()
    if profiles is not None:
        profiles.install()  # kurigram's loop thread starts with the gateway
    gateway = offline_gateway(str(path), name=f"sender-{variant}", limiter=limiter, peers=user_access_hash, paid=paced == "paid")
    if variant == "job":
        queue_broadcast(chats)
    sends_before = remote.count("messages.SendMessage")
    if profiles is not None:
        profiles.enable()
    server_cpu, wall, cpu = process_cpu(server_pid), time.perf_counter(), time.process_time()
    stream = sends_sweep(BroadcastSendSweep(gateway), batch_size=200, time_budget=600, rate=rate)
    if variant == "job":
        processed, failed, _ = stream.run()
        if (processed, failed) != (len(chats), 0):
            raise SystemExit(f"bench/sender.py: the job sent {processed} ({failed} failed) of {len(chats)}")
    else:
        for start in range(0, len(chats), 200):  # as each claim of 200 hands its access hashes over
            gateway.peers_remember({c: hashes[c] for c in chats[start : start + 200]})
        group = stream.group if variant == "gateway" else 1
        todo, lock = iter(chats), threading.Lock()

        def loop():
            try:
                while True:
                    with lock:
                        batch = [c for c in (next(todo, None) for _ in range(group)) if c is not None]
                    if not batch:
                        return
                    if variant == "gateway":
                        gateway.send_many([SendItem(c, "Broadcast: hello") for c in batch])
                    else:
                        gateway.send_text(batch[0], "Broadcast: hello")
            finally:
                close_old_connections()

        pool = [threading.Thread(target=loop) for _ in range(stream.in_flight if variant == "gateway" else threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    server_cpu = process_cpu(server_pid) - server_cpu
    if profiles is not None:
        profiles.disable()
    gateway.stop()
    sent = remote.count("messages.SendMessage") - sends_before
    if sent != len(chats):
        raise SystemExit(f"bench/sender.py: Telegram received {sent} sends, not {len(chats)}")
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    return len(chats) / cpu, len(chats) / wall, server_cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--profile", action="store_true", help="profile the job variant once instead")
    parser.add_argument("--paced", choices=["free", "paid"], help="the job variant at production's pacing instead")
    parser.add_argument("--top", type=int, default=25, help="lines of the profile to print")
    parser.add_argument("--profile-out", help="also save the merged profile here (pstats format)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.paced:
        settings.TELEGRAM_PAID_BROADCASTS = args.paced == "paid"
    variants = ("job",) if args.paced else VARIANTS
    total = args.sends * (1 if args.profile else len(variants) * args.runs)
    ids = range(FIRST, FIRST + total)
    Broadcast.objects.filter(title=TITLE).delete()
    others = Broadcast.objects.filter(status__in=[Broadcast.Status.QUEUED, Broadcast.Status.SENDING])
    if others.exists():
        raise SystemExit(f"bench/sender.py: other broadcasts are active in this database: {list(others)}")

    server = ("--latency", "0.05") if args.paced else ("--no-rates",)  # paced: Telegram's rates enforced
    with telegram_process(*server) as (path, remote, proc):
        users_meet_bot(remote, ids)
        hashes: dict[int, int] = {}
        setup = offline_gateway(str(path), name="setup", peers=hashes.get)
        hashes.update(access_hashes(setup, ids))
        setup.stop()
        # What runbot stored when these users wrote to the bot.
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + total).delete()
        TelegramUser.objects.bulk_create(
            [TelegramUser(telegram_id=i, access_hash=hashes[i], first_name="U") for i in ids], batch_size=5000
        )

        if args.profile:
            profiles = ThreadProfiles()
            chats = list(ids)
            per_cpu, _, _ = measure(
                path, remote, proc.pid, "job", chats, hashes, args.threads, profiles, paced=args.paced or ""
            )  # fmt: skip
            Broadcast.objects.filter(title=TITLE).delete()
            TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + total).delete()
            stats = profiles.stats()
            if args.profile_out:
                stats.dump_stats(args.profile_out)
            profile_print(stats, len(chats), per_cpu, args.top)
            return

        chats = iter(ids)
        found = {v: [] for v in variants}
        floods = remote.flood_waits() if args.paced else 0
        for run in range(args.runs):
            for variant in variants:  # alternating, so the machine's drift hits every variant alike
                per_cpu, per_wall, server_cpu = measure(
                    path, remote, proc.pid, variant, [next(chats) for _ in range(args.sends)], hashes, args.threads,
                    paced=args.paced or "",
                )  # fmt: skip
                found[variant].append(per_cpu)
                print(
                    f"run {run + 1} {variant:8} {per_cpu:7,.0f} sends/CPU-s  ({per_wall:,.1f} sends/s wall; "
                    f"telegram_server used {server_cpu:.2f} CPU-s, not counted)",
                    flush=True,
                )
        if args.paced:
            print(
                f"\npaced {args.paced}: the limiter at {global_rate():,.1f}/s, {remote.flood_waits() - floods} FLOOD_WAITs "
                f"in all; sends per CPU-second of the worker at real pacing, min / median / max: "
                f"{spread(found['job'], '{:,.0f}')}"
            )
            Broadcast.objects.filter(title=TITLE).delete()
            TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + total).delete()
            return
        Broadcast.objects.filter(title=TITLE).delete()
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + total).delete()
        print(f"\n{args.sends:,} sends from {args.threads} threads; sends per CPU-second of the sender, min / median / max:")
        for variant in VARIANTS:
            print(f"  {variant:8} {spread(found[variant], '{:,.0f}')}")
        for a, b in (("job", "bare"), ("gateway", "bare")):
            ratios = [x / y for x, y in zip(found[a], found[b], strict=True)]
            print(f"  {a} / {b}, run by run: {spread(ratios, '{:.2f}')}")


def profile_print(stats: pstats.Stats, sends: int, per_cpu: float, top: int) -> None:
    """CPU ms per send of the heaviest functions, by cumulative and by own time, summed over threads.
    A thread's entry points (its run(), the loop's run_forever) hold that thread's whole time."""
    rows = stats.stats  # (file, line, name) -> (primitive calls, calls, own time, cumulative, callers)
    total = sum(tt for _, _, tt, _, _ in rows.values())
    print(
        f"job, {sends:,} sends from the stream's pool, under cProfile ({per_cpu:,.0f} sends/CPU-s profiled): "
        f"{total / sends * 1000:.3f} CPU ms per send in profiled functions, all threads"
    )

    def name(key):
        file, line, func = key
        for cut in ("site-packages/", f"{ROOT}/", "/lib/python3.11/"):
            if cut in file:
                file = file.split(cut, 1)[1]
        return f"{func} ({file}:{line})" if line else func

    for title, column in (("cumulative", 3), ("own time", 2)):
        print(f"\ntop {top} by {title}, CPU ms per send (calls per send):")
        for key, row in sorted(rows.items(), key=lambda kv: kv[1][column], reverse=True)[:top]:
            print(f"  {row[column] / sends * 1000:7.3f}  ({row[1] / sends:6.1f})  {name(key)}")


if __name__ == "__main__":
    main()
