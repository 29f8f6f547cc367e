"""How close the shared limiter gets to its configured rate when Telegram answers in 80 ms.

Several processes (like runbot plus workers) send through LimitedGateway(FakeTelegram(latency),
RedisLimiter(rate)) from many threads each, to distinct private chats. Prints achieved rate /
configured rate for each configured rate.

    REDIS_URL=redis://127.0.0.1:6379/15 python bench/limiter.py [--rates 30 1000] [--seconds 6]
"""

import argparse
import multiprocessing
import threading
import time

import _setup  # noqa: F401
import redis
from django.conf import settings

from botapp.telegram.fake import FakeTelegram
from botapp.telegram.limited import LimitedGateway
from botapp.telegram.limiter import RedisLimiter


def sender(prefix, rate, count, threads, latency, chat_base, out):
    lim = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL, max_connections=threads + 4), rate=rate, prefix=prefix)
    gateway = LimitedGateway(FakeTelegram(latency=latency), lim)
    stamps = []
    lock = threading.Lock()
    counter = iter(range(count))

    def loop():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            gateway.send_text(chat_base + i, "hello")
            with lock:
                stamps.append(time.time())

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put(stamps)


def measure(rate, seconds, processes, latency):
    prefix = f"courier:bench:{time.time_ns()}"
    total = int(rate * seconds)
    in_flight = max(4, int(rate * latency * 2))  # enough concurrent calls to cover the latency
    threads = max(2, in_flight // processes + 1)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    share = total // processes
    procs = [
        ctx.Process(target=sender, args=(prefix, rate, share, threads, latency, 1_000_000 * (p + 1), out))
        for p in range(processes)
    ]
    for p in procs:
        p.start()
    stamps = sorted(s for _ in procs for s in out.get(timeout=seconds * 10 + 60))
    for p in procs:
        p.join()
    # Rate between the first and the last completed send (n-1 intervals).
    achieved = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    redis.Redis.from_url(settings.REDIS_URL).delete(*[f"{prefix}:global", f"{prefix}:pause"])
    return achieved, len(stamps), processes, threads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", type=float, nargs="+", default=[30, 1000])
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.08)
    args = parser.parse_args()
    for rate in args.rates:
        achieved, sends, processes, threads = measure(rate, args.seconds, args.processes, args.latency)
        print(
            f"configured {rate:>6.0f}/s  achieved {achieved:8.1f}/s  ratio {achieved / rate:.3f}  "
            f"({sends} sends, {processes} processes x {threads} threads, {args.latency * 1000:.0f} ms latency)"
        )


if __name__ == "__main__":
    main()
