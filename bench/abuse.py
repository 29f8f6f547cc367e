"""Fair use under a flood, through production processes: `--abusers` users (20) each send /start
`--rate` times a second (10) for `--seconds` (60), while `--others` other users (200) send one
/start each, evenly over the same minute.

Set-up (not measured): `manage.py telegram_server --latency 0.05` (a process of its own, Telegram's
rates enforced as inmemory_telegram/rates.py models them: 30 messages/s over any sliding second,
counted when each request arrives after the realistic network's 15 ms + up to 25 ms; 1/s per
private chat after a burst of 3; every answer 50 ms later); Bot settings' fair use on with its
defaults (20 messages a minute; messages faster than a chat is answered are not handled); a real
`manage.py runbot` (its default 16 update threads). Every user is new to the bot in each run.

Measured on the server's side (inmemory_telegram/inspection.py: `send_times`, when each message
was accepted; `flood_waits`):

  others p50/p95/max  from a user's /start entering Telegram (this process's clock just before the
                      call: the machine's monotonic clock, as the server's) to the bot's answer arriving;
  abuser answers      answers each abuser got (max, and in all), the "⏳" notices apart: at most
                      the limit a minute; notices: at most one per limit (the pace's, the minute's);
  FLOOD_WAITs         the server answered during the run;
  runbot CPU-s        the run's, and the server's.

Per run, then min / median / max of `--runs`.

    .venv/bin/python bench/abuse.py [--runs 3] [--abusers 20] [--rate 10] [--others 200] [--seconds 60]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
from pathlib import Path

import _setup  # noqa: F401
import redis
from _setup import ROOT, spread
from _telegram import offline_env, process_cpu, production_process, telegram_process
from django.conf import settings
from django.core.management import call_command

from botapp.models import BotSettings, HandledUpdate, Sequence, TelegramUser, UpdatePosition
from botapp.telegram.gateway import TgUser
from offline.telegram.remote import RemoteTelegram

ABUSERS = 150_000_001  # + run * 100_000: the abusers of a run
OTHERS = 160_000_001  # + run * 100_000: the other users of a run
LATENCY = 0.05
NOTICE = "⏳"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p * (len(values) - 1)))] if values else float("nan")


def flood(path, first: int, abusers: int, rate: float, seconds: float, stop: threading.Event) -> None:
    """Each abuser sends /start `rate` times a second, in step, for `seconds`."""
    remote = RemoteTelegram(path, timeout=60)
    users = [TgUser(id=first + n, first_name="Flood", language_code="en") for n in range(abusers)]
    start = time.monotonic()
    for tick in range(int(rate * seconds)):
        if stop.wait(max(0.0, start + tick / rate - time.monotonic())):
            break
        for user in users:
            remote.user_sends(user, "/start")
    remote.close()


def others_write(path, first: int, count: int, seconds: float, sent: dict[int, float], stop: threading.Event) -> None:
    """`count` new users send one /start each, evenly over `seconds`; `sent`: id -> when."""
    remote = RemoteTelegram(path, timeout=60)
    start = time.monotonic()
    for n in range(count):
        if stop.wait(max(0.0, start + n * seconds / count - time.monotonic())):
            break
        sent[first + n] = time.monotonic()
        remote.user_sends(TgUser(id=first + n, first_name="New", language_code="en"), "/start")
    remote.close()


def clean(first: int, last: int) -> None:
    TelegramUser.objects.filter(telegram_id__gte=first, telegram_id__lt=last).delete()
    HandledUpdate.objects.filter(chat_id__gte=first, chat_id__lt=last).delete()


def run_once(path, remote, pids, *, run: int, abusers: int, rate: float, others: int, seconds: float, limit: int) -> dict:
    first_abuser, first_other = ABUSERS + run * 100_000, OTHERS + run * 100_000
    since, floods = remote.events_count(), remote.flood_waits()
    cpu = {name: process_cpu(pid) for name, pid in pids.items()}
    stop, asked = threading.Event(), {}
    threads = [
        threading.Thread(target=flood, args=(path, first_abuser, abusers, rate, seconds, stop)),
        threading.Thread(target=others_write, args=(path, first_other, others, seconds, asked, stop)),
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    finally:
        stop.set()
    # Every other user gets the welcome (runbot may still be answering the last few).
    deadline = time.monotonic() + 60
    while True:
        sends = remote.send_times(since)
        answered: dict[int, float] = {}
        for chat, at, _ in sends:
            if chat in asked and chat not in answered:
                answered[chat] = at
        if len(answered) == len(asked) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    if len(answered) < len(asked):
        raise SystemExit(f"bench/abuse.py: {len(asked) - len(answered)} of {len(asked)} users got no answer in 60 s")
    cpu = {name: process_cpu(pids[name]) - c for name, c in cpu.items()}
    per_abuser = collections.Counter()
    notices = collections.Counter()
    for chat, _, text in sends:
        if first_abuser <= chat < first_abuser + abusers:
            (notices if text.startswith(NOTICE) else per_abuser)[chat] += 1
    latencies = [answered[c] - asked[c] for c in asked]
    began = min(asked.values())
    slowest = sorted(((answered[c] - asked[c], asked[c] - began) for c in asked), reverse=True)[:5]
    return {
        "slowest": slowest,
        "p50": pct(latencies, 0.5),
        "p95": pct(latencies, 0.95),
        "max": max(latencies),
        "answers_max": max(per_abuser.values(), default=0),
        "answers": sum(per_abuser.values()),
        "notices_max": max(notices.values(), default=0),
        "floods": remote.flood_waits() - floods,
        "cpu": cpu,
        "limit": limit,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--abusers", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="/start per second of each abuser")
    parser.add_argument("--others", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--logs", default=None, help="keep runbot's output in this directory")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if Sequence.objects.filter(enabled=True, start_payload="").exists():
        raise SystemExit("bench/abuse.py: a sequence for every new user is enabled in this database")
    conf = BotSettings.load()
    defaults = {f.name: f.default for f in BotSettings._meta.fields if f.name.startswith("fair_use_")}
    for name, value in {**defaults, "fair_use_enabled": True, "allow_list_enabled": False}.items():
        setattr(conf, name, value)
    conf.save()
    limit = conf.fair_use_commands_per_minute
    for run in range(args.runs):
        clean(ABUSERS + run * 100_000, ABUSERS + (run + 1) * 100_000)
        clean(OTHERS + run * 100_000, OTHERS + (run + 1) * 100_000)
    UpdatePosition.objects.all().delete()  # a fresh Telegram numbers its updates from 1 again
    # The bench's users' counts from an earlier invocation (botapp/telegram/quotas.py's keys).
    client = redis.Redis.from_url(settings.REDIS_URL)
    for first in (ABUSERS, OTHERS):
        for key in client.scan_iter(f"courier:quota:{str(first)[:2]}*", count=1000):
            client.delete(key)

    with (
        telegram_process("--latency", str(LATENCY)) as (path, remote, server),
        tempfile.TemporaryDirectory(prefix="courier-bench-") as tmp,
    ):
        logs = Path(args.logs) if args.logs else Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        env = offline_env(path, tmp, TELEGRAM_PAID_BROADCASTS="0", LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
        print(
            f"{args.abusers} users x /start {args.rate:g}/s for {args.seconds:g} s, {args.others} others once each; "
            f"fair use: {limit} messages a minute; Telegram answers in {LATENCY * 1000:.0f} ms",
            flush=True,
        )
        found = []
        with production_process(
            [sys.executable, "manage.py", "runbot"], env, logs / "runbot.log", "runbot: listening", cwd=ROOT
        ) as bot:
            pids = {"runbot": bot.pid, "telegram_server": server.pid}
            for run in range(args.runs):
                r = run_once(path, remote, pids, run=run, abusers=args.abusers, rate=args.rate, others=args.others,
                             seconds=args.seconds, limit=limit)  # fmt: skip
                found.append(r)
                print(
                    f"run {run + 1}: others p50 {r['p50'] * 1000:.0f} ms, p95 {r['p95'] * 1000:.0f} ms, max {r['max'] * 1000:.0f} ms; "
                    f"abusers: at most {r['answers_max']} answers each (limit {limit}), {r['answers']} in all, "
                    f"at most {r['notices_max']} notices each; FLOOD_WAITs {r['floods']}; "
                    f"CPU-s {', '.join(f'{k} {v:.1f}' for k, v in r['cpu'].items())}; slowest answers (ms, asked at s): "
                    + ", ".join(f"{w * 1000:.0f} at {at:.1f}" for w, at in r["slowest"]),
                    flush=True,
                )

    for run in range(args.runs):  # the runs' users: another bench's broadcast must not reach them
        clean(ABUSERS + run * 100_000, ABUSERS + (run + 1) * 100_000)
        clean(OTHERS + run * 100_000, OTHERS + (run + 1) * 100_000)

    print(f"\nmin / median / max of {args.runs}:")
    print(f"  others' answer p95, ms       {spread([r['p95'] * 1000 for r in found], '{:.0f}')}")
    print(f"  others' answer p50, ms       {spread([r['p50'] * 1000 for r in found], '{:.0f}')}")
    print(f"  answers per abuser, most     {spread([r['answers_max'] for r in found], '{:.0f}')} (limit {limit})")
    print(f"  notices per abuser, most     {spread([r['notices_max'] for r in found], '{:.0f}')}")
    print(f"  FLOOD_WAITs                  {spread([r['floods'] for r in found], '{:.0f}')}")
    print(f"  runbot CPU-s a run           {spread([r['cpu']['runbot'] for r in found], '{:.1f}')}")


if __name__ == "__main__":
    main()
