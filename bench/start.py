"""/start <file> for brand-new users: database queries, latency, and runbot's throughput.

1. Queries and latency, in-process: runbot's pieces as the tests run them (OfflineBot: kurigram's
   client with updates on an in-process TelegramServer with rates off, the Router; `pump.process()`
   runs the handler in this thread). For each of 200 new users: the user sends "/start <share>"
   (a stored two-file link, default settings: copy, auto-delete notice, pending deletion), and the
   time is taken from the user's message entering Telegram until the handler has finished its
   replies (update delivery, parsing, the router, the database and both Telegram calls, with the
   emulated Telegram's work in this process too). No limiter: Courier's own cost. Queries are
   counted with CaptureQueriesContext on a second set of 200 users (so counting costs no latency).
2. Throughput: `manage.py runbot` itself (TELEGRAM_OFFLINE=1, its default 16 update threads, the
   Redis limiter at TELEGRAM_RATE=100000 so it never waits) against `manage.py telegram_server
   --no-rates`; 600 distinct new users each send /start <share> at once, and updates/s = 600 /
   (time from the first message to the last pending deletion runbot wrote). Twice: with the
   server's realistic network (15 ms + up to 25 ms each way: runbot's 16 threads each wait two
   round trips per update, so this is latency-bound, as in production) and with none (runbot's
   own capacity, CPU-bound: the figure earlier versions of this bench printed).

    .venv/bin/python bench/start.py [--runs 3] [--users 200] [--burst 600]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import _setup  # noqa: F401
from _setup import ROOT, spread
from _telegram import ADMIN, STORAGE, offline_env, process_cpu, telegram_process
from django.core.management import call_command
from django.db import connection
from django.db.models import Max
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.bot.router import Router
from botapp.models import BotSettings, HandledUpdate, PendingDeletion, StoredFile, TelegramUser, UpdatePosition
from botapp.services.files import file_store
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import Media, TgUser
from inmemory_telegram.server import TelegramServer
from offline.readiness import ready_line_wait
from offline.shortener import MemoryShortener
from offline.telegram.clients import OfflineBot

FIRST = 60_000_001  # bench users: FIRST, FIRST + 1, ...


def clean(first: int, last: int) -> None:
    PendingDeletion.objects.filter(chat_id__gte=first, chat_id__lt=last).delete()
    TelegramUser.objects.filter(telegram_id__gte=first, telegram_id__lt=last).delete()
    # Each run has a fresh Telegram, which numbers messages (and its update sequence) from 1 again:
    # runbot's claims and stored position from the last one would mistake its updates for repeats.
    HandledUpdate.objects.filter(chat_id__gte=first, chat_id__lt=last).delete()
    UpdatePosition.objects.all().delete()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def in_process_run(first: int, users: int):
    """Returns (latencies in s, CPU-s per /start, queries per /start, the SQL of one) for `users`
    timed and `users` counted new users."""
    telegram = TelegramServer(now=clock.now, username="CourierBot", enforce_rates=False)
    telegram.create_channel(STORAGE, title="Storage")
    ids = [telegram.post(STORAGE, "Report", media=Media("document", "report.pdf")), telegram.post(STORAGE, "Read me")]
    share = file_store(source_chat_id=STORAGE, message_ids=ids, title="Report").share_id
    bot = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=MemoryShortener()),
        peers=user_access_hash,
    )
    try:
        user_ids = iter(range(first, first + 2 * users + 5))
        for _ in range(5):  # warm-up: the day's stats row, the storage channel resolved once, caches
            telegram.user_sends(TgUser(id=next(user_ids), first_name="Warm"), f"/start {share}")
            bot.pump.process()
        latencies, cpu = [], time.process_time()
        for _ in range(users):
            user = TgUser(id=next(user_ids), first_name="New", language_code="en")
            before = len(telegram.events)
            start = time.perf_counter()
            telegram.user_sends(user, f"/start {share}")
            bot.pump.process()
            latencies.append(time.perf_counter() - start)
            assert [e.action for e in telegram.events[before:]] == ["copy", "copy", "send"], telegram.events[before:]
        cpu = (time.process_time() - cpu) / users
        queries, sample = [], None
        for _ in range(users):
            user = TgUser(id=next(user_ids), first_name="New", language_code="en")
            telegram.user_sends(user, f"/start {share}")
            with CaptureQueriesContext(connection) as ctx:
                bot.pump.process()
            queries.append(len(ctx.captured_queries))
            sample = sample or [q["sql"] for q in ctx.captured_queries]
        return latencies, cpu, queries, sample
    finally:
        bot.stop()


def runbot_run(first: int, burst: int, path, remote, server_pid, share: str):
    """Start runbot on the telegram_server at `path`, send `burst` /start messages at once, and time
    until runbot has handled them all. Returns (updates/s, seconds the users took to send them all,
    runbot CPU-s, telegram_server CPU-s)."""
    sessions = tempfile.TemporaryDirectory(prefix="courier-bench-sessions-")
    env = offline_env(path, sessions.name, TELEGRAM_RATE="100000")
    bot = subprocess.Popen([sys.executable, "manage.py", "runbot"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        try:
            ready_line_wait(bot, "runbot: listening")  # signed in, its handlers registered
        except RuntimeError as exc:
            raise SystemExit(f"runbot did not start: {exc}") from exc
        bot_cpu, server_cpu = process_cpu(bot.pid), process_cpu(server_pid)
        started = time.time()
        for user_id in range(first, first + burst):
            remote.user_sends(TgUser(id=user_id, first_name="New", language_code="en"), f"/start {share}")
        sent = time.time() - started
        deadline = time.monotonic() + 300
        rows = PendingDeletion.objects.filter(chat_id__gte=first, chat_id__lt=first + burst)
        while rows.count() < burst:
            if time.monotonic() > deadline or bot.poll() is not None:
                raise SystemExit(f"runbot handled {rows.count()} of {burst} in time")
            time.sleep(0.1)
        last = rows.aggregate(last=Max("created_at"))["last"].timestamp()
        bot_cpu, server_cpu = process_cpu(bot.pid) - bot_cpu, process_cpu(server_pid) - server_cpu
        return burst / (last - started), sent, bot_cpu, server_cpu
    finally:
        bot.terminate()
        bot.wait(30)
        sessions.cleanup()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--burst", type=int, default=600)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.save()
    print(
        f"default settings: auto-delete {conf.auto_delete_minutes} min, verification "
        f"{'on' if conf.verification_enabled else 'off'}, caption {conf.file_caption!r}"
    )

    span = 2 * args.users + 5
    p95s, medians, cpus, query_counts = [], [], [], []
    for run in range(args.runs):
        first = FIRST + run * span
        clean(first, first + span)
        latencies, cpu, queries, sample = in_process_run(first, args.users)
        clean(first, first + span)
        p95s.append(percentile(latencies, 95) * 1000)
        medians.append(percentile(latencies, 50) * 1000)
        query_counts.append(max(queries))
        cpus.append(cpu * 1000)
        print(
            f"run {run + 1} in-process: latency p50 {medians[-1]:.1f} ms, p95 {p95s[-1]:.1f} ms, max {max(latencies) * 1000:.1f} ms, "
            f"CPU {cpus[-1]:.1f} ms per /start; "
            f"queries per /start min {min(queries)} max {max(queries)}",
            flush=True,
        )
    print("queries of one /start <file> by a new user:")
    for sql in sample:
        print("   ", sql[:150])

    rates: dict[str, list[float]] = {"realistic": [], "none": []}
    bot_cpus: dict[str, list[float]] = {"realistic": [], "none": []}
    first = FIRST + args.runs * span
    for network in rates:  # telegram_server's network: production's latency, then none
        with telegram_process("--no-rates", "--network", network, "--channel", str(STORAGE)) as (path, remote, proc):
            ids = [
                remote.post(STORAGE, "Report", media={"kind": "document", "file": "report.pdf"}),
                remote.post(STORAGE, "Read me"),
            ]
            stored = file_store(source_chat_id=STORAGE, message_ids=ids, title="Report (runbot bench)")
            for run in range(args.runs):
                clean(first, first + args.burst)
                rate, sent, bot_cpu, server_cpu = runbot_run(first, args.burst, path, remote, proc.pid, stored.share_id)
                clean(first, first + args.burst)
                first += args.burst
                rates[network].append(rate)
                bot_cpus[network].append(bot_cpu / args.burst * 1000)
                print(
                    f"run {run + 1} runbot, network {network}: {args.burst} new users' /start <file> (all sent within "
                    f"{sent:.2f} s) handled at {rate:.0f} updates/s (runbot {bot_cpu:.1f} CPU-s, telegram_server {server_cpu:.1f} CPU-s)",
                    flush=True,
                )
            StoredFile.objects.filter(pk=stored.pk).delete()

    print(f"\nmin / median / max of {args.runs} runs:")
    print(f"  queries per /start <file>, new user (worst of {args.users})  {spread(query_counts, '{:.0f}')}")
    print(f"  latency p50, ms                                   {spread(medians, '{:.1f}')}")
    print(f"  latency p95, ms ({args.users} users)                     {spread(p95s, '{:.1f}')}")
    print(f"  CPU per /start in-process (emulated Telegram included), ms  {spread(cpus, '{:.1f}')}")
    for network in rates:
        print(f"  runbot updates/s ({args.burst} new users at once), network {network:9}  {spread(rates[network], '{:.0f}')}")
        print(f"  runbot CPU per update, ms, network {network:9}                {spread(bot_cpus[network], '{:.1f}')}")


if __name__ == "__main__":
    main()
