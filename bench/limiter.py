"""Broadcast rate: how close Courier's senders get to the rate Telegram allows, and how often
Telegram has to say FLOOD_WAIT.

`manage.py telegram_server --latency 0.08` plays Telegram as strictly as inmemory_telegram/rates.py
models it: 30 messages/s without the paid flag and 1000/s in all (paid sends share it) over any
sliding second, counted per message when each request arrives, after the network's delay and
jitter (rates.REALISTIC: 15 ms + up to 25 ms, in order per connection); a burst of 3 then 1/s per
private chat; every answer 80 ms later; FLOOD_WAIT_X beyond, longer when ignored. Two sender
processes (two workers) each send through PyrogramGateway(limiter=RedisLimiter(...), paid=...) to
distinct users who have written to the bot, as a broadcast does, configured as
RedisLimiter.from_settings configures a worker: the bulk lane, paced at TELEGRAM_RATE_HEADROOM
(TELEGRAM_PAID_RATE_HEADROOM when paid) of the allowed rate, each call admitted against windows of
TELEGRAM_RATE_SPAN seconds holding at most the allowed rate; and as many sends in flight per process
as the broadcast stream uses (scheduler.jobs.sweep.sends_sweep: rate x ANSWER_TIME sends, 4..256,
in batches of the limiter's window, `send_batch_size`: pairs at 30/s, 16 in one MTProto
container at 1000/s, each thread calling `send_many`).

Achieved rate is taken between the first and the last completed send. Each case runs 3 times,
the cases alternating; min / median / max are printed. A diagnostic case paces the free broadcast
without the windows (paced slots only: what the windows are for; --no-diagnostic skips it);
--hostile adds each case again with the server's hostile mode on (salt rotations, unknown 420s).

    .venv/bin/python bench/limiter.py [--runs 3] [--free-sends 400] [--paid-sends 5000] [--hostile]
"""

from __future__ import annotations

import argparse
import collections
import logging
import math
import multiprocessing
import threading
import time

import _setup  # noqa: F401
import redis
from _setup import spread
from _telegram import access_hashes, process_cpu, telegram_process, users_meet_bot
from django.conf import settings

from botapp.telegram.gateway import SendItem, TelegramError
from botapp.telegram.limiter import BULK, RedisLimiter, send_batch_size
from offline.readiness import READY_TIMEOUT
from offline.telegram.clients import offline_gateway
from scheduler.jobs.sweep import sends_in_flight

LATENCY = 0.08


def in_flight(rate: float) -> int:
    """Sending threads a worker runs at `rate` (the broadcast stream's rule, sends_sweep:
    sends_in_flight sends, in batches of send_batch_size)."""
    return math.ceil(sends_in_flight(rate) / send_batch_size(rate))


def worker_limiter(client, *, rate: float, allowed: float, paid: bool, windows: bool, prefix: str) -> RedisLimiter:
    """The bulk lane as RedisLimiter.from_settings builds it for a worker (`windows=False`: the
    paced slots alone)."""
    free = float(settings.TELEGRAM_RATE)
    options = dict(rate=rate, prefix=prefix, lane=BULK, span=settings.TELEGRAM_RATE_SPAN)
    if windows:
        options["allowed"] = allowed
    if paid:
        options.update(free_rate=free * settings.TELEGRAM_RATE_HEADROOM, free_allowed=free if windows else None)
    return RedisLimiter(client, **options)


def sender(path, name, rate, allowed, windows, prefix, paid, chats, hashes, threads, signed_in, go, out):
    """One sender process: its own kurigram session, the shared limiter, `threads` threads."""
    for name in ("botapp.telegram.request", "botapp.telegram.batching"):  # FLOOD_WAITs are counted instead
        logging.getLogger(name).setLevel(logging.ERROR)
    client = redis.Redis.from_url(settings.REDIS_URL, max_connections=threads + 4)
    limiter = worker_limiter(client, rate=rate, allowed=allowed, paid=paid, windows=windows, prefix=prefix)
    gateway = offline_gateway(path, name=name, limiter=limiter, paid=paid)
    gateway.peers_remember(hashes)  # as the broadcast claim hands each batch's access hashes over
    lock = threading.Lock()
    todo = iter(chats)
    stamps, errors = [], []

    group = send_batch_size(rate)

    def loop():
        while True:
            with lock:
                batch = [c for c in (next(todo, None) for _ in range(group)) if c is not None]
            if not batch:
                return
            results = gateway.send_many([SendItem(c, "Broadcast: hello") for c in batch])
            now = time.time()
            with lock:
                for result in results:
                    if isinstance(result, TelegramError):
                        errors.append(type(result).__name__)
                    else:
                        stamps.append(now)

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    signed_in.put(name)
    go.wait()
    cpu = time.process_time()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    cpu = time.process_time() - cpu
    gateway.stop()
    out.put((stamps, errors, cpu))


def run_once(path, remote, server_pid, *, rate, allowed, windows, paid, chats, hashes, processes, hostile):
    prefix = f"courier:bench:{time.time_ns()}"
    threads = in_flight(rate)
    ctx = multiprocessing.get_context("fork")
    out, signed_in, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    share = [chats[p::processes] for p in range(processes)]
    procs = [
        ctx.Process(
            target=sender,
            args=(str(path), f"sender-{p}", rate, allowed, windows, prefix, paid, share[p], hashes, threads, signed_in, go, out),
        )
        for p in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every session signed in (the timeout only bounds a sender that never starts)
        signed_in.get(timeout=READY_TIMEOUT)
    floods, server_cpu = remote.flood_waits(), process_cpu(server_pid)
    if hostile:
        remote.hostile_start()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    faults = remote.hostile_stop() if hostile else {}
    for p in procs:
        p.join(30)
    floods = remote.flood_waits() - floods
    server_cpu = process_cpu(server_pid) - server_cpu
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    stamps = sorted(s for r in results for s in r[0])
    errors = [e for r in results for e in r[1]]
    elapsed = stamps[-1] - stamps[0]
    return {
        "achieved": (len(stamps) - 1) / elapsed,
        "sends": len(stamps),
        "errors": errors,
        "floods": floods,
        "threads": threads,
        "elapsed": elapsed,
        "sender_cpu": sum(r[2] for r in results),
        "server_cpu": server_cpu,
        "hostile": faults,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--free-sends", type=int, default=400, help="sends per run at 30/s")
    parser.add_argument("--paid-sends", type=int, default=5000, help="sends per run at 1000/s (paid)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--no-diagnostic", dest="diagnostic", action="store_false", help="skip the free case without windows")
    parser.add_argument("--hostile", action="store_true", help="each case again with the hostile mode on")
    args = parser.parse_args()
    headroom, paid_headroom = settings.TELEGRAM_RATE_HEADROOM, settings.TELEGRAM_PAID_RATE_HEADROOM

    with telegram_process("--latency", str(LATENCY)) as (path, remote, proc):
        # (name, rate Telegram allows, the limiter's headroom, windows on, paid flag, hostile, sends per run)
        cases = [
            ("free", 30.0, headroom, True, False, False, args.free_sends),
            ("paid", 1000.0, paid_headroom, True, True, False, args.paid_sends),
        ]
        if args.diagnostic:
            cases.append(
                ("free, paced slots only, no windows (diagnostic)", 30.0, headroom, False, False, False, args.free_sends)
            )
        if args.hostile:
            cases += [(f"{c[0]}, hostile", *c[1:5], True, c[6]) for c in cases[:2]]
        total = sum(c[-1] for c in cases) * args.runs
        first = 10_000_001
        users_meet_bot(remote, range(first, first + total))
        hashes: dict[int, int] = {}
        setup = offline_gateway(str(path), name="setup", peers=hashes.get)
        hashes.update(access_hashes(setup, range(first, first + total)))
        setup.stop()  # no thread left running when the senders fork

        chats = iter(range(first, first + total))
        results = {name: [] for name, *_ in cases}
        for run in range(args.runs):
            for name, allowed, room, windows, paid, hostile, n in cases:  # alternating: drift hits them alike
                r = run_once(
                    path, remote, proc.pid, rate=allowed * room, allowed=allowed, windows=windows, paid=paid,
                    chats=[next(chats) for _ in range(n)], hashes=hashes, processes=args.processes, hostile=hostile,
                )  # fmt: skip
                results[name].append(r)
                print(
                    f"run {run + 1} {name}: allowed {allowed:.0f}/s, limiter {allowed * room:g}/s  achieved {r['achieved']:.1f}/s  "
                    f"ratio {r['achieved'] / allowed:.3f}  FLOOD_WAITs {r['floods']:3} in {r['sends']} sends  "
                    f"failed {len(r['errors'])}{' ' + str(dict(collections.Counter(r['errors']))) if r['errors'] else ''}  ({args.processes} processes x {r['threads']} threads, "
                    f"{r['elapsed']:.1f} s; CPU: senders {r['sender_cpu']:.1f} s, telegram_server {r['server_cpu']:.1f} s)"
                    f"{'  hostile: ' + str(r['hostile']) if hostile else ''}",
                    flush=True,
                )

        print(f"\n{LATENCY * 1000:.0f} ms latency, {args.processes} sender processes, min / median / max of {args.runs} runs:")
        for name, allowed, room, *_ in cases:
            rs = results[name]
            print(f"{name} (allowed {allowed:.0f}/s, limiter {allowed * room:g}/s):")
            print(f"    achieved/allowed           {spread([r['achieved'] / allowed for r in rs], '{:.3f}')}")
            print(f"    FLOOD_WAITs per 400 sends  {spread([r['floods'] * 400 / r['sends'] for r in rs], '{:.1f}')}")
            print(f"    sends that failed          {spread([len(r['errors']) for r in rs], '{:.0f}')}")
            print(f"    sender CPU-s per 1000 sends {spread([r['sender_cpu'] * 1000 / r['sends'] for r in rs], '{:.2f}')}")
            if rs[0]["hostile"]:
                print(f"    salt rotations / unknown 420s {spread([r['hostile']['rotations'] for r in rs], '{:.0f}')} / "
                      f"{spread([r['hostile']['floods'] for r in rs], '{:.0f}')}")  # fmt: skip


if __name__ == "__main__":
    main()
