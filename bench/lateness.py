"""Lateness of due work: how long after its due time each row goes out, with the wake-ups of
scheduler/wakeup.py and no beat (so what is measured is the wake-up, not the minute sweep).

Set-up (not measured): `--rows` users write to the bot on `manage.py telegram_server` (a process
of its own, Telegram's rates enforced) and their access hashes are stored as runbot would; one
real Celery worker (`celery -A config worker -c 4`, the Procfile's default) on that Telegram, the
bench database and Redis (broker, limiter at the configured rate: TELEGRAM_RATE, 30/s).

Each run, for each kind, `--rows` rows are written through the services production writes them
with, due at random times spread over `--spread` seconds starting `--lead` (30) s later, written
in random order (so earlier rows keep re-arming the wake-up):

  steps      sequences_enroll: one step (delay 0) of a sequence for the bench's start payload,
             each user joined at the row's due time; sent = Telegram receives the step;
  messages   message_schedule: a scheduled message to one listed user, send_at the due time;
             sent = Telegram receives it;
  deletions  deletion_schedule: an auto-delete due then; sent = Telegram receives the
             "deleted" notice that follows the deletion.

Bot settings have a send window (quiet hours) open for the whole run, from an hour before it to
six hours after, in TIME_ZONE: steps and broadcasts go through its check as in a deployment that
sets one (each run of their jobs, each claim, and `due_next`); `--no-send-window` measures with
none (every moment open). The window found in the database is put back afterwards.

Lateness = when Telegram received the send (the server's time.monotonic(), the machine's clock)
minus the due time; p50 / p95 / max per run, then min / median / max of the runs. Last, idle
queries: one beat round of the four waking jobs on an empty database, as beat's tasks run them
now (job + `wakeup_after_run`) and as they ran before (the job alone), counted with
CaptureQueriesContext.

    .venv/bin/python bench/lateness.py [--runs 3] [--rows 1000] [--spread 60] [--kinds steps,messages,deletions]
                                       [--lead 30] [--no-send-window]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import _setup  # noqa: F401
import redis
from _setup import ROOT, spread
from _telegram import access_hashes, offline_env, production_process, telegram_process, users_meet_bot
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from botapp import clock
from botapp.models import BotSettings, Broadcast, PendingDeletion, Sequence, SequenceMessage, TelegramUser
from botapp.services.autodelete import deletion_schedule
from botapp.services.messages import message_schedule
from botapp.services.send_window import send_window_current
from botapp.services.sequences import sequence_steps_forget, sequences_enroll
from botapp.services.users import user_access_hash
from offline.telegram.clients import offline_gateway
from scheduler.jobs.registry import JOBS, job_run
from scheduler.wakeup import wakeup_after_run

FIRST = 91_000_001
PAYLOAD = "bench-lateness"
TITLE = "bench: lateness"
KINDS = ("steps", "messages", "deletions")
# Seconds from the start of writing to the first due time (--lead): writing 1,000 rows takes a few
# seconds, and over 10 on a shared machine that other runs load; the lead is set-up, not measured.
LEAD = 30.0
GONE_MESSAGE = 999_999_999  # the deletion's message: not there (Telegram deletes nothing, the notice goes out)
WAKING = ("send_sequence_messages", "delete_due_messages", "send_broadcasts", "end_premium_plans")


def clean(ids: list[int]) -> None:
    SequenceMessage.objects.filter(user__telegram_id__in=ids).delete()
    Broadcast.objects.filter(title=TITLE).delete()
    PendingDeletion.objects.filter(chat_id__in=ids).delete()


def write(kind: str, ids: list[int], spread_s: float, rng: random.Random, lead: float = LEAD) -> dict[int, float]:
    """The rows of `kind`, one per user, due over `spread_s` seconds from `lead` on; returns each
    chat's due time on the monotonic clock."""
    base = clock.now() + timedelta(seconds=lead)
    offsets = {chat: rng.uniform(0, spread_s) for chat in ids}
    order = list(ids)
    rng.shuffle(order)
    due_mono: dict[int, float] = {}
    users = {u.telegram_id: u for u in TelegramUser.objects.filter(telegram_id__in=ids)}
    for chat in order:
        due = base + timedelta(seconds=offsets[chat])
        due_mono[chat] = time.monotonic() + (due - clock.now()).total_seconds()
        if kind == "steps":
            user = users[chat]
            user.joined_at = due
            sequences_enroll(user=user)
        elif kind == "messages":
            message_schedule(send_at=due, text="Scheduled", user_ids=[chat], title=TITLE)
        else:
            deletion_schedule(chat_id=chat, message_ids=[GONE_MESSAGE], share_id="", minutes=0, now=due)
    if time.monotonic() > min(due_mono.values()):
        raise SystemExit(f"bench/lateness.py: writing {len(ids)} {kind} took longer than the {lead:.0f} s lead (--lead)")
    return due_mono


def settled(kind: str, ids: list[int]) -> bool:
    if kind == "steps":
        return not SequenceMessage.objects.filter(user__telegram_id__in=ids, status__in=["pending", "sending"]).exists()
    if kind == "messages":
        return not Broadcast.objects.filter(title=TITLE).exclude(status__in=["done", "cancelled"]).exists()
    return not PendingDeletion.objects.filter(chat_id__in=ids).exists()


def lateness(remote, since: int, due_mono: dict[int, float]) -> list[float]:
    sent: dict[int, float] = {}
    for method, chat, at in remote.call_times(since):
        if method == "messages.SendMessage" and chat in due_mono and chat not in sent:
            sent[chat] = at
    missing = set(due_mono) - set(sent)
    if missing:
        raise SystemExit(f"bench/lateness.py: {len(missing)} chats got nothing, e.g. {sorted(missing)[:3]}")
    return sorted(sent[chat] - due_mono[chat] for chat in due_mono)


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, round(p * (len(values) - 1)))]


@contextlib.contextmanager
def celery_worker(env: dict, log: Path):
    """One `celery -A config worker` (4 processes), its queue emptied first; stopped on the way out."""
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")
    args = [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "4", "--without-gossip", "--without-mingle",
            "--loglevel", "INFO"]  # fmt: skip
    with production_process(args, env, log, " ready.", cwd=ROOT) as proc:
        yield proc


def idle_queries(path) -> tuple[int, int]:
    """Queries of one beat round of the waking jobs on an empty database: (before, now)."""
    gateway = offline_gateway(str(path), name="idle", peers=user_access_hash)
    before = now = 0
    for name in WAKING:
        job_run(name, trigger="beat", gateway=gateway)  # settings cached, as in a worker that ran before
        with CaptureQueriesContext(connection) as alone:
            job_run(name, trigger="beat", gateway=gateway)
        with CaptureQueriesContext(connection) as woken:
            wakeup_after_run(JOBS[name], job_run(name, trigger="beat", gateway=gateway), token=None)
        before, now = before + len(alone), now + len(woken)
    gateway.stop()
    return before, now


@contextlib.contextmanager
def send_window(enabled: bool):
    """Bot settings' send window open from an hour ago to six hours on (TIME_ZONE), or none; the
    window found is put back on the way out. Yields the window the jobs read."""
    conf = BotSettings.load()
    found = (conf.send_window_start, conf.send_window_end, conf.send_window_tz)
    local = timezone.localtime(clock.now()).replace(second=0, microsecond=0)
    if enabled:
        conf.send_window_start, conf.send_window_end = (local - timedelta(hours=1)).time(), (local + timedelta(hours=6)).time()
    else:
        conf.send_window_start = conf.send_window_end = None
    conf.send_window_tz = ""
    conf.full_clean()
    conf.save()
    try:
        window = send_window_current()
        if enabled and (window.always or not window.is_open(clock.now())):
            raise SystemExit(f"bench/lateness.py: the send window {window} is not a window open now")
        yield window
    finally:
        conf = BotSettings.load()
        conf.send_window_start, conf.send_window_end, conf.send_window_tz = found
        conf.save()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=60.0)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--lead", type=float, default=LEAD, help="seconds of set-up before the first row is due")
    parser.add_argument("--no-send-window", action="store_true", help="no send window (by default one open for the run)")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if set(kinds) - set(KINDS):
        raise SystemExit(f"bench/lateness.py: --kinds takes {', '.join(KINDS)}")
    call_command("migrate", verbosity=0)
    ids = list(range(FIRST, FIRST + args.rows))
    clean(ids)
    if Sequence.objects.filter(enabled=True, start_payload="").exists():
        raise SystemExit("bench/lateness.py: an enabled sequence for every user exists in this database")
    Sequence.objects.filter(name=TITLE).delete()
    sequence = Sequence.objects.create(name=TITLE, start_payload=PAYLOAD, enabled=True)
    sequence.steps.create(delay_seconds=0, text="Step")
    sequence_steps_forget()
    rng = random.Random(args.seed)

    with (
        send_window(not args.no_send_window) as window,
        telegram_process() as (path, remote, _proc),
        tempfile.TemporaryDirectory(prefix="courier-bench-") as tmp,
    ):
        print(f"send window: {'none' if window.always else f'{window.start:%H:%M}-{window.end:%H:%M} {window.zone}'}", flush=True)
        users_meet_bot(remote, ids)
        hashes: dict[int, int] = {}
        setup = offline_gateway(str(path), name="setup", peers=hashes.get)
        hashes.update(access_hashes(setup, ids))
        setup.stop()
        TelegramUser.objects.filter(telegram_id__in=ids).delete()
        TelegramUser.objects.bulk_create(
            [TelegramUser(telegram_id=i, access_hash=hashes[i], first_name="U", start_payload=PAYLOAD) for i in ids],
            batch_size=5000,
        )
        before, now = idle_queries(path)
        print(f"idle: one beat round of {len(WAKING)} waking jobs makes {now} queries (the jobs alone: {before})", flush=True)

        found: dict[str, dict[str, list[float]]] = {k: {"p50": [], "p95": [], "max": []} for k in kinds}
        env = offline_env(path, tmp, TELEGRAM_PAID_BROADCASTS="0", LOG_LEVEL="INFO")  # INFO: its "ready." line
        with celery_worker(env, Path(tmp) / "worker.log"):
            for run in range(args.runs):
                for kind in kinds:
                    since = len(remote.call_times())
                    due_mono = write(kind, ids, args.spread, rng, args.lead)
                    deadline = max(due_mono.values()) + 120
                    while not settled(kind, ids):
                        if time.monotonic() > deadline:
                            raise SystemExit(f"bench/lateness.py: {kind} not all sent 120 s after the last was due")
                        time.sleep(0.5)
                    late = lateness(remote, since, due_mono)
                    figures = {"p50": pct(late, 0.5), "p95": pct(late, 0.95), "max": late[-1]}
                    for name, value in figures.items():
                        found[kind][name].append(value)
                    print(
                        f"run {run + 1} {kind:9} {len(late)} rows: lateness p50 {figures['p50']:.3f} s, "
                        f"p95 {figures['p95']:.3f} s, max {figures['max']:.3f} s (mean {statistics.mean(late):.3f} s)",
                        flush=True,
                    )
                    clean(ids)
        TelegramUser.objects.filter(telegram_id__in=ids).delete()
        sequence.delete()
        sequence_steps_forget()

    print(f"\n{args.rows:,} rows due over {args.spread:.0f} s, lateness in seconds; min / median / max of {args.runs}:")
    for kind in kinds:
        line = ", ".join(f"{name} {spread(values, '{:.3f}')}" for name, values in found[kind].items())
        print(f"  {kind:9} {line}")
    print(f"  idle beat round: {now} queries, {before} before wake-ups")


if __name__ == "__main__":
    main()
