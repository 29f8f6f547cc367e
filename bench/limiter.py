"""Broadcast rate: how close Courier's senders get to the rate Telegram allows, and how often
Telegram has to say FLOOD_WAIT.

`manage.py telegram_server --latency 0.08` plays Telegram (every answer takes 80 ms; 30 messages/s
overall over a sliding second, 1000/s for sends with the paid-broadcast flag, a burst of 3 then
1/s per private chat, FLOOD_WAIT_X beyond). Two sender processes (two workers) each send through
PyrogramGateway(limiter=RedisLimiter(...), paid=...) to distinct users who have written to the bot,
as a broadcast does, configured as scheduler/sender.py configures a worker: the bulk lane, paced at
TELEGRAM_RATE_HEADROOM (TELEGRAM_PAID_RATE_HEADROOM when paid) of the allowed rate, and as many sends in flight per process as the
broadcast stream uses (scheduler.jobs.sweep.sends_sweep: rate x ANSWER_TIME sends, 4..256, in
batches of the limiter's window, `send_batch_size`: one at a time at 30/s, 47 in one MTProto
container at 1000/s, each thread calling `send_many`).

Achieved rate is taken between the first and the last completed send. Each case runs 3 times,
the cases alternating; min / median / max are printed. A third, diagnostic case paces the free
broadcast at exactly 30/s (headroom 1.0; --no-diagnostic skips it).

    .venv/bin/python bench/limiter.py [--runs 3] [--free-sends 400] [--paid-sends 5000]
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


def sender(path, name, rate, prefix, paid, chats, hashes, threads, signed_in, go, out):
    """One sender process: its own kurigram session, the shared limiter, `threads` threads."""
    logging.getLogger("botapp.telegram.pyrogram_gateway").setLevel(logging.ERROR)  # FLOOD_WAITs are counted instead
    client = redis.Redis.from_url(settings.REDIS_URL, max_connections=threads + 4)
    gateway = offline_gateway(path, name=name, limiter=RedisLimiter(client, rate=rate, prefix=prefix, lane=BULK), paid=paid)
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


def run_once(path, remote, server_pid, *, rate, paid, chats, hashes, processes):
    prefix = f"courier:bench:{time.time_ns()}"
    threads = in_flight(rate)
    ctx = multiprocessing.get_context("fork")
    out, signed_in, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    share = [chats[p::processes] for p in range(processes)]
    procs = [
        ctx.Process(
            target=sender, args=(str(path), f"sender-{p}", rate, prefix, paid, share[p], hashes, threads, signed_in, go, out)
        )
        for p in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every session signed in (the timeout only bounds a sender that never starts)
        signed_in.get(timeout=READY_TIMEOUT)
    floods, server_cpu = remote.flood_waits(), process_cpu(server_pid)
    go.set()
    results = [out.get(timeout=600) for _ in procs]
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
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--free-sends", type=int, default=400, help="sends per run at 30/s")
    parser.add_argument("--paid-sends", type=int, default=5000, help="sends per run at 1000/s (paid)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--no-diagnostic", dest="diagnostic", action="store_false", help="skip the free case at headroom 1.0")
    args = parser.parse_args()
    headroom, paid_headroom = settings.TELEGRAM_RATE_HEADROOM, settings.TELEGRAM_PAID_RATE_HEADROOM

    with telegram_process("--latency", str(LATENCY)) as (path, remote, proc):
        # (name, rate Telegram allows, the limiter's headroom, paid flag, sends per run)
        cases = [("free", 30.0, headroom, False, args.free_sends), ("paid", 1000.0, paid_headroom, True, args.paid_sends)]
        if args.diagnostic:
            cases.append(("free, limiter at exactly 30/s (diagnostic)", 30.0, 1.0, False, args.free_sends))
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
            for name, allowed, room, paid, n in cases:  # the cases alternate, so drift hits them alike
                r = run_once(
                    path, remote, proc.pid, rate=allowed * room, paid=paid, chats=[next(chats) for _ in range(n)],
                    hashes=hashes, processes=args.processes,
                )  # fmt: skip
                results[name].append(r)
                print(
                    f"run {run + 1} {name}: allowed {allowed:.0f}/s, limiter {allowed * room:g}/s  achieved {r['achieved']:.1f}/s  "
                    f"ratio {r['achieved'] / allowed:.3f}  FLOOD_WAITs {r['floods']:3} in {r['sends']} sends  "
                    f"failed {len(r['errors'])}{' ' + str(dict(collections.Counter(r['errors']))) if r['errors'] else ''}  ({args.processes} processes x {r['threads']} threads, "
                    f"{r['elapsed']:.1f} s; CPU: senders {r['sender_cpu']:.1f} s, telegram_server {r['server_cpu']:.1f} s)",
                    flush=True,
                )

        print(f"\n{LATENCY * 1000:.0f} ms latency, {args.processes} sender processes, min / median / max of {args.runs} runs:")
        for name, allowed, room, _, _ in cases:
            rs = results[name]
            print(f"{name} (allowed {allowed:.0f}/s, limiter {allowed * room:g}/s):")
            print(f"    achieved/allowed           {spread([r['achieved'] / allowed for r in rs], '{:.3f}')}")
            print(f"    FLOOD_WAITs per 400 sends  {spread([r['floods'] * 400 / r['sends'] for r in rs], '{:.1f}')}")
            print(f"    sends that failed          {spread([len(r['errors']) for r in rs], '{:.0f}')}")
            print(f"    sender CPU-s per 1000 sends {spread([r['sender_cpu'] * 1000 / r['sends'] for r in rs], '{:.2f}')}")


if __name__ == "__main__":
    main()
