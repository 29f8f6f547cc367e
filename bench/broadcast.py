"""A broadcast end to end, as production runs it, with users writing to the bot meanwhile: the rate
Telegram counts over the whole broadcast, its FloodWaits, and how long the users wait for replies.

Set-up (not measured): `manage.py telegram_server --latency 0.05` (a process of its own, Telegram's
rates enforced as inmemory_telegram/rates.py models them: 30 messages/s without the paid flag and
1000/s in all over any sliding second, counted when each request arrives after the realistic
network's 15 ms + up to 25 ms; 1/s per private chat; every answer 50 ms later). `--users` users
have written to the bot and are stored with their access hashes, as runbot stores them. Then the
production processes on that Telegram, the bench database and Redis (broker, limiter): a real
`manage.py runbot` and one real Celery worker (`celery -A config worker -c 4`, the Procfile's
default), no beat: a broadcast's job slices are driven by the wake-up at `broadcast_start`, the
preparer's and the sender's own re-queue (scheduler/tasks.py: `outcome.more`) and their lingering.
Modes: `free` (TELEGRAM_PAID_BROADCASTS=0: everything in 30/s), `paid` and `burst`
(TELEGRAM_PAID_BROADCASTS=1 for both processes, as a deployment sets it: the worker's sends carry
the paid flag, 1000/s; replies stay in the free 30/s).

`--link N` (with `burst`): instead of plain /start, `--link-users` new users (60) open a link of N
stored files (2: each gets a copy of each file and the "deleted in 30 min" notice, three messages
into one chat) at `--reply-rate`, from `--link-after` seconds after the broadcast's start (while it
is under way). Measured besides: the broadcast's sends / allowed from the first user's /start to
the last message they got; each user's first message p95 (the "reply" figures) and their whole
answer's p95.

Each run: a text broadcast to every active user (the `--users`) is started through the admin's
service, `broadcast_start` (the first 10,000 rows in the call, the worker makes the rest), and at
the same moment brand-new users start writing `/start` (no payload: what a user who taps Start
after following a link to the bot sends; the bot answers with its welcome, one message) at
`--reply-rate` per second (4/s in `free` and `paid`, 20/s in `burst`), evenly, until the
broadcast's last send. Measured on the server's side (inmemory_telegram/inspection.py: `send_times`,
when each message was accepted; `flood_waits`):

  all/allowed   every message the bot sent (broadcast and replies) from the broadcast's first send
                to its last, per second over that span, / the rate Telegram allows (30/s free;
                1000/s paid, the one budget paid and free sends share);
  bcast/allowed the broadcast's sends alone, the same way;
  FLOOD_WAITs   the server answered during the run (each pauses a budget);
  reply p50/p95 from the user's message entering Telegram (this process's clock just before the
                call: the machine's monotonic clock, as the server's) to the bot's reply arriving;
  start         from calling broadcast_start to the first broadcast send arriving;
  max gap       the longest time between two consecutive sends within the span (a gap between job
                slices shows here); the send_broadcasts job runs of the span and their triggers.

Per run, then min / median / max of `--runs`.

    .venv/bin/python bench/broadcast.py [--mode free|paid|burst] [--users 20000] [--reply-rate R] [--runs 3]
    .venv/bin/python bench/broadcast.py --mode burst --users 10000 --link 2 [--link-users 60] [--link-after 2]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import _setup  # noqa: F401
import redis
from _setup import ROOT, spread
from _telegram import STORAGE, offline_env, process_cpu, production_process, telegram_process
from django.conf import settings
from django.core.management import call_command

from botapp.models import Broadcast, HandledUpdate, PendingDeletion, Sequence, StoredFile, TelegramUser, UpdatePosition
from botapp.services.broadcasts import broadcast_start
from botapp.services.files import file_store
from botapp.services.send_window import send_window_current
from botapp.telegram.gateway import TgUser
from botapp.telegram.limits import GLOBAL_RATE, PAID_RATE
from offline.telegram.remote import RemoteTelegram
from scheduler.models import JobRun

FIRST = 120_000_001  # the audience: FIRST, FIRST + 1, ...
NEW = 140_000_001  # the users who write /start during the runs: NEW, NEW + 1, ...
TITLE = "bench: broadcast"
TEXT = "Bench broadcast: hello"
LATENCY = 0.05
MODES = {"free": (False, 4.0), "paid": (True, 4.0), "burst": (True, 20.0)}  # paid flag, default reply rate


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p * (len(values) - 1)))] if values else float("nan")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (a Celery worker's pool)."""
    total = process_cpu(pid)
    with contextlib.suppress(FileNotFoundError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += process_cpu(int(child))
    return total


def users_write(path, first: int, rate: float, stop: threading.Event, sent: dict[int, float], link: Link | None = None) -> None:
    """New users write /start at `rate` per second, evenly, until `stop`; `sent`: id -> when. With
    a `link`: `link.users` of them, from `link.after` seconds on, each opening the file link."""
    remote = RemoteTelegram(path, timeout=60)
    start, n = time.monotonic() + (link.after if link else 0.0), 0
    text = f"/start {link.share}" if link else "/start"
    while not stop.is_set() and (link is None or n < link.users):
        due = start + n / rate
        if stop.wait(max(0.0, due - time.monotonic())):
            break
        user_id = first + n
        sent[user_id] = time.monotonic()
        remote.user_sends(TgUser(id=user_id, first_name="New", language_code="en"), text)
        n += 1
    remote.close()


@dataclass(frozen=True)
class Link:
    """The burst's file link (`--link N`): its share id, how many users open it, and how long after
    the broadcast's start they begin."""

    share: str
    files: int
    users: int
    after: float


def clean_new(first: int, last: int) -> None:
    PendingDeletion.objects.filter(chat_id__gte=first, chat_id__lt=last).delete()
    TelegramUser.objects.filter(telegram_id__gte=first, telegram_id__lt=last).delete()
    HandledUpdate.objects.filter(chat_id__gte=first, chat_id__lt=last).delete()


def run_once(path, remote, pids, *, users: int, rate: float, allowed: float, first_new: int, link: Link | None = None) -> dict:
    Broadcast.objects.filter(title=TITLE).delete()
    since, calls_since = remote.events_count(), len(remote.call_times())
    floods = remote.flood_waits()
    cpu = {name: tree_cpu(pid) for name, pid in pids.items()}
    broadcast = Broadcast.objects.create(title=TITLE, text=TEXT)
    stop, asked = threading.Event(), {}
    writer = threading.Thread(target=users_write, args=(path, first_new, rate, stop, asked, link))
    writer.start()
    called = time.monotonic()
    queued = broadcast_start(broadcast=broadcast)
    took = time.monotonic() - called
    deadline = called + 120 + 3 * users / (allowed * 0.9)
    try:
        while Broadcast.objects.filter(pk=broadcast.pk).values_list("status", flat=True)[0] != Broadcast.Status.DONE:
            if time.monotonic() > deadline:
                b = Broadcast.objects.get(pk=broadcast.pk)
                raise SystemExit(f"bench/broadcast.py: the broadcast is {b.status}, {b.sent} of {b.total} sent in time")
            time.sleep(0.25)
    finally:
        stop.set()
        writer.join()
    # Every user who wrote gets the welcome, or the link's files and notice (runbot may still be
    # answering the last few).
    replied: dict[int, float] = {}
    sends: list[tuple[int, float, str]] = []
    whole = (link.files + 1) if link else 1  # messages each user gets: the welcome, or the files and the notice
    wait_until = time.monotonic() + 60
    while True:
        sends = remote.send_times(since)
        replied, got = {}, collections.Counter()
        for chat, at, text in sends:
            if chat in asked and not text.startswith(TEXT):
                got[chat] += 1
                replied.setdefault(chat, at)
        if (len(replied) == len(asked) and all(got[c] >= whole for c in asked)) or time.monotonic() > wait_until:
            break
        time.sleep(0.25)
    if len(replied) < len(asked):
        raise SystemExit(f"bench/broadcast.py: {len(asked) - len(replied)} of {len(asked)} users got no reply in 60 s")
    floods = remote.flood_waits() - floods
    refused = refusals(remote.call_times(calls_since), sends) if floods else []
    cpu = {name: tree_cpu(pid) - c for name, c in cpu.items() for pid in [pids[name]]}
    b = Broadcast.objects.get(pk=broadcast.pk)
    # New users who joined while the worker made the rows past the first 10,000 are in it too.
    if b.sent < users or (b.sent, b.failed, b.interrupted) != (b.total, 0, 0):
        raise SystemExit(f"bench/broadcast.py: sent {b.sent}, failed {b.failed}, interrupted {b.interrupted} of {b.total}")

    ours = [at for _, at, text in sends if text.startswith(TEXT)]
    first, last = min(ours), max(ours)
    span = last - first
    within = sorted(at for _, at, _ in sends if first <= at <= last)
    gaps = [b - a for a, b in zip(within, within[1:], strict=False)]
    latencies = [replied[c] - asked[c] for c in asked]
    burst = {}
    if link is not None:  # the burst: from the first user's /start to the last message they got
        began = min(asked.values())
        ended = max(at for chat, at, text in sends if chat in asked)
        during = [at for _, at, text in sends if text.startswith(TEXT) and began <= at <= ended]
        burst = {
            "span": ended - began,
            "bcast": len(during) / (ended - began) / allowed,
            "whole": pct([max(at for chat, at, _ in sends if chat == c) - asked[c] for c in asked], 0.95),
            "short": sum(got[c] < whole for c in asked),
        }
    runs = JobRun.objects.filter(job="send_broadcasts", started_at__gte=b.started_at or b.created_at).order_by("started_at")
    return {
        "queued": queued,
        "start_call": took,
        "start": first - called,
        "span": span,
        "all": (len(within) - 1) / span / allowed,
        "bcast": (len(ours) - 1) / span / allowed,
        "replies": len(asked),
        "floods": floods,
        "p50": pct(latencies, 0.5),
        "p95": pct(latencies, 0.95),
        "max": max(latencies),
        "gap": max(gaps),
        "jobs": collections.Counter(r.trigger for r in runs),
        "cpu": cpu,
        "per_second": collections.Counter(int(at - first) for at in within),
        "refused": [flood_context(at, chat, sends, first) for at, chat in refused],
        "burst": burst,
    }


def refusals(calls, sends) -> list[tuple[float, int]]:
    """(when, chat) of the sends Telegram refused: a chat's calls beyond its messages accepted
    are the first ones (each refused call was repeated and then accepted)."""
    accepted = collections.Counter(chat for chat, _, _ in sends)
    tried: dict[int, list[float]] = collections.defaultdict(list)
    for method, chat, at in calls:
        if method == "messages.SendMessage" and chat is not None:
            tried[chat].append(at)
    return sorted((at, chat) for chat, times in tried.items() for at in times[: len(times) - accepted[chat]])


def flood_context(at: float, chat: int, sends, first: float) -> str:
    """What arrived in the second before a refused send: how many, whose, and the gaps between
    the last arrivals (a stall followed by a bunch shows here)."""
    before = sorted((t, text.startswith(TEXT)) for _, t, text in sends if at - 1.0 < t <= at)
    gaps = [f"{(b[0] - a[0]) * 1000:.0f}{'' if b[1] else 'r'}" for a, b in zip(before, before[1:], strict=False)]
    whose = "worker" if chat < NEW else "runbot"
    return (
        f"+{at - first:.1f} s (at {at:.3f}) a {whose} send to {chat} refused: {len(before)} arrived in the second before it "
        f"({sum(b for _, b in before)} broadcast); gaps between them, ms (r: before a reply): {' '.join(gaps)}"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=sorted(MODES), default="free")
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--reply-rate", type=float, default=None, help="/start per second (default: 4, burst 20)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--logs", default=None, help="keep runbot's and the worker's output in this directory")
    parser.add_argument("--link", type=int, default=0, help="burst: new users open a link of this many files instead")
    parser.add_argument("--link-users", type=int, default=60, help="with --link: how many open it (at --reply-rate)")
    parser.add_argument("--link-after", type=float, default=2.0, help="with --link: seconds after the broadcast's start")
    args = parser.parse_args()
    paid, default_rate = MODES[args.mode]
    rate = args.reply_rate or default_rate
    allowed = float(PAID_RATE if paid else GLOBAL_RATE)
    call_command("migrate", verbosity=0)
    audience = range(FIRST, FIRST + args.users)
    Broadcast.objects.filter(title=TITLE).delete()
    clean_new(NEW, NEW + 10_000_000)  # left by a run that failed
    others = TelegramUser.objects.exclude(telegram_id__gte=FIRST, telegram_id__lt=NEW).filter(state=TelegramUser.State.ACTIVE)
    if others.exists():
        raise SystemExit(f"bench/broadcast.py: {others.count()} other active users in this database would get the broadcast")
    if Sequence.objects.filter(enabled=True, start_payload="").exists():
        raise SystemExit("bench/broadcast.py: a sequence for every new user is enabled in this database")
    window = send_window_current()
    if not window.always:
        raise SystemExit(f"bench/broadcast.py: Bot settings have a send window ({window}); the bench measures none")
    # A fresh Telegram numbers its messages and updates from 1 again: runbot's stored position and
    # claims from an earlier invocation would mistake its updates for repeats.
    UpdatePosition.objects.all().delete()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")

    keep = Path(args.logs) if args.logs else None
    with (
        telegram_process("--latency", str(LATENCY), "--channel", str(STORAGE)) as (path, remote, server),
        tempfile.TemporaryDirectory(prefix="courier-bench-") as tmp,
    ):
        link = None
        if args.link:  # a stored link of that many files, with the auto-delete notice (Bot settings' default)
            StoredFile.objects.filter(title=TITLE).delete()
            ids = [
                remote.post(STORAGE, f"File {n + 1}", media={"kind": "document", "file": f"f{n}.pdf"}) for n in range(args.link)
            ]
            share = file_store(source_chat_id=STORAGE, message_ids=ids, title=TITLE).share_id
            link = Link(share=share, files=args.link, users=args.link_users, after=args.link_after)
        hashes: dict[int, int] = {}
        for start in range(0, args.users, 5000):
            hashes.update(remote.users_meet(list(audience[start : start + 5000])))
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=NEW).delete()
        TelegramUser.objects.bulk_create(
            [TelegramUser(telegram_id=i, access_hash=hashes[i], first_name="U") for i in audience], batch_size=5000
        )
        logs = keep or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        env = offline_env(path, tmp, TELEGRAM_PAID_BROADCASTS="1" if paid else "0", LOG_LEVEL="INFO", PYTHONUNBUFFERED="1")
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "4", "--without-gossip", "--without-mingle",
                  "--loglevel", "INFO"]  # fmt: skip
        print(
            f"{args.mode}: {args.users:,} users, allowed {allowed:.0f}/s, new users' /start at {rate:g}/s, "
            f"Telegram answers in {LATENCY * 1000:.0f} ms",
            flush=True,
        )
        found = []
        with (
            production_process(
                [sys.executable, "manage.py", "runbot"], env, logs / "runbot.log", "runbot: listening", cwd=ROOT
            ) as bot,
            production_process(worker, env, logs / "worker.log", " ready.", cwd=ROOT) as celery,
        ):
            pids = {"runbot": bot.pid, "worker": celery.pid, "telegram_server": server.pid}
            for run in range(args.runs):
                first_new = NEW + run * 100_000
                r = run_once(path, remote, pids, users=args.users, rate=rate, allowed=allowed, first_new=first_new, link=link)
                clean_new(first_new, first_new + 100_000)
                found.append(r)
                per_second = [r["per_second"][s] for s in sorted(r["per_second"])]
                print(
                    f"run {run + 1}: all/allowed {r['all']:.3f}, broadcast alone {r['bcast']:.3f} over {r['span']:.1f} s; "
                    f"FLOOD_WAITs {r['floods']}; {r['replies']} replies p50 {r['p50'] * 1000:.0f} ms, p95 {r['p95'] * 1000:.0f} ms, "
                    f"max {r['max'] * 1000:.0f} ms; start: call {r['start_call']:.2f} s ({r['queued']:,} queued), "
                    f"first send {r['start']:.2f} s after; max gap {r['gap'] * 1000:.0f} ms; "
                    f"send_broadcasts runs {dict(r['jobs'])}; CPU-s {', '.join(f'{k} {v:.1f}' for k, v in r['cpu'].items())}",
                    flush=True,
                )
                print(
                    f"    sends per second of the span: min {min(per_second)}, {per_second[:3]} ... {per_second[-3:]}", flush=True
                )
                for line in r["refused"]:
                    print(f"    FLOOD_WAIT: {line}", flush=True)
                if r["burst"]:
                    b = r["burst"]
                    print(
                        f"    link burst: {r['replies']} users over {b['span']:.1f} s (first ask to last message): broadcast "
                        f"{b['bcast']:.3f} of allowed meanwhile; first message p95 {r['p95'] * 1000:.0f} ms, whole answer "
                        f"p95 {b['whole'] * 1000:.0f} ms; users short of a message: {b['short']}",
                        flush=True,
                    )
        Broadcast.objects.filter(title=TITLE).delete()
        StoredFile.objects.filter(title=TITLE).delete()

    print(f"\n{args.mode}, {args.users:,} users, /start at {rate:g}/s; min / median / max of {args.runs}:")
    print(f"  all sends / allowed ({allowed:.0f}/s)   {spread([r['all'] for r in found], '{:.3f}')}")
    print(f"  broadcast alone / allowed    {spread([r['bcast'] for r in found], '{:.3f}')}")
    print(f"  FLOOD_WAITs                  {spread([r['floods'] for r in found], '{:.0f}')}")
    print(f"  reply p50, ms                {spread([r['p50'] * 1000 for r in found], '{:.0f}')}")
    print(f"  reply p95, ms                {spread([r['p95'] * 1000 for r in found], '{:.0f}')}")
    print(f"  start to first send, s       {spread([r['start'] for r in found], '{:.2f}')}")
    print(f"  longest gap between sends, ms {spread([r['gap'] * 1000 for r in found], '{:.0f}')}")
    if link is not None:
        print(f"  {args.link}-file link burst ({args.link_users} users at {rate:g}/s): broadcast / allowed meanwhile "
              f"{spread([r['burst']['bcast'] for r in found], '{:.3f}')}; first message p95, ms "
              f"{spread([r['p95'] * 1000 for r in found], '{:.0f}')}; whole answer p95, ms "
              f"{spread([r['burst']['whole'] * 1000 for r in found], '{:.0f}')}")  # fmt: skip


if __name__ == "__main__":
    main()
