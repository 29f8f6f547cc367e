"""Stream and download links through the production path, side by side with a reader that asks
Telegram one 1 MiB getFile at a time (FileToLink "Thunder"'s method, no read-ahead).

Set-up (not measured): `manage.py telegram_server --network none` (a process of its own, Telegram's
rates enforced as inmemory_telegram/rates.py models them, file reads included), then its link to
the bot's data centre set over its control socket: every answer 50 ms late and each connection
carrying at most `--bandwidth` MiB/s, its answers one after another (`dc_set(2, latency=0.05,
bandwidth=...)`). A generated `--size` MiB video is posted in the storage channel and stored with
a signed link (stream links on). The production processes on that Telegram, the bench database and
Redis: `manage.py stream` (uvicorn, its own kurigram session; STREAM_MAX_PER_ADDRESS and
STREAM_MAX_TOTAL raised to 1,000 so that one client address may open every stream), a real
`manage.py runbot` and one real Celery worker (`-c 4`, TELEGRAM_PAID_BROADCASTS=1). The HTTP client
is this process (asyncio streams, HTTP/1.1, one connection per request).

Each run, measured:

  one stream     a GET of the whole file, after one GET of it opened the process's media
                 connections (the reader opens them as streams need them, and keeps them): bytes /
                 seconds from the request to its last byte, against what its calls in flight allow
                 (downloads.IN_FLIGHT x 1 MiB / 50 ms, or the bandwidth cap, the lower; and
                 IN_FLIGHT x 1 MiB / the one-at-a-time reader's median call, the round trip as
                 measured) and against the one-at-a-time reader;
  one-at-a-time  this process's own kurigram client (the baseline, not the product) reading the same
                 file as Thunder does: upload.getFile of 1 MiB, the next asked when the last came;
                 its median call is "one getFile round trip";
  TTFB p95       `--ttfb` GETs with `Range: bytes=X-` from random X (a player seeking; the file's
                 location cached by the first), from the request to the first byte of the body;
                 goal: one getFile round trip + 30 ms; beside it, `--ttfb` HEADs (the same request
                 without the call to Telegram: the link check, the database, the slot);
  100 streams    `--streams` GETs open together (started 20 ms apart), each of `--stream-size` MiB
                 from a different MiB of the file: the streaming process's RSS (VmRSS, sampled every
                 0.1 s, the highest; and before them) against 80 MB + IN_FLIGHT x 1 MiB per
                 stream; its CPU (user + system, /proc) per MiB served against the CPU of
                 tgcrypto.ige256_decrypt of 1 MiB (AES-256-IGE, what every byte from Telegram costs
                 at least: measured here in the same run);
  replies        a paid broadcast to `--broadcast-users` users while new users write /start at
                 `--reply-rate` per second, once alone and once with `--reply-streams` streams of
                 2 MiB from random places (each started again when it ends); reply p95 from the
                 user's message entering Telegram to the bot's reply arriving (bench/broadcast.py's
                 measure); beside it, how long telegram_server took to take the user's message (its
                 control call: the emulator's own delay) and the p95 from then to the reply. The
                 streams' getFile answers come from telegram_server's file DCs' process, apart from
                 the process answering the bot's chats (inmemory_telegram/file_dcs.py), as
                 Telegram keeps files on other machines; their CPU is shown apart.

Per run, then min / median / max of `--runs`.

    .venv/bin/python bench/stream.py [--runs 3] [--size 64] [--bandwidth 48] [--streams 100]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import _setup  # noqa: F401
import redis
import tgcrypto
from _setup import ROOT, spread
from _telegram import STORAGE, offline_env, process_cpu, production_process, telegram_process
from broadcast import clean_new, pct, tree_cpu
from django.conf import settings
from django.core.management import call_command
from pyrogram import raw

from botapp import clock
from botapp.models import BotSettings, Broadcast, StoredFile, TelegramUser, UpdatePosition
from botapp.services.broadcasts import broadcast_start
from botapp.services.files import file_store
from botapp.services.stream_links import stream_token_make
from botapp.telegram.client import client_build
from botapp.telegram.downloads import CONNECTIONS, IN_FLIGHT, location_of
from botapp.telegram.gateway import TgUser
from inmemory_telegram.limits import HOME_DC
from inmemory_telegram.state import Media
from offline.telegram.clients import API_HASH, API_ID
from offline.telegram.remote import RemoteTelegram

MIB = 1024 * 1024
REFUSED = [0]  # answers 500 asked again (get)
LATENCY = 0.05  # seconds every answer of the bot's data centre takes
AUDIENCE = 150_000_001  # the broadcast's users: AUDIENCE, AUDIENCE + 1, ...
NEW = 160_000_001  # the users who write /start during the runs
TITLE = "bench: stream"
TEXT = "Bench stream broadcast"
# Seconds between two of the concurrent streams' requests: viewers arrive over a second or two, not
# in the same millisecond (each request opens a PostgreSQL connection for its link check).
STAGGER = 0.02
BASE_RSS_MB = 80  # the goal's allowance for the process itself, before its streams


# --- the HTTP client ----------------------------------------------------------------------------


async def get(
    port: int, path: str, *, start: int = 0, length: int | None = None, first_only: bool = False, retries: int = 5
) -> dict:
    """One GET (a range from `start`, `length` bytes or to the end): {"bytes", "ttfb", "seconds"}
    from before connecting; `first_only`: closed once the first byte of the body is in. A 500 is
    asked again up to `retries` times, counted in REFUSED (the streaming process's link check
    found PostgreSQL out of connections: on this shared machine other suites hold most of them)."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        ranged = f"Range: bytes={start}-{'' if length is None else start + length - 1}\r\n" if start or length else ""
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{ranged}Connection: close\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status == 500 and retries:  # PostgreSQL refused the link check a connection: the machine's, shared
            REFUSED[0] += 1
            writer.close()
            await asyncio.sleep(0.2)
            return await get(port, path, start=start, length=length, first_only=first_only, retries=retries - 1)
        if status not in (200, 206):
            raise SystemExit(f"bench/stream.py: the streaming process answered {status}: {head[:300]!r}")
        want = next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))
        got, ttfb = 0, None
        while got < want:
            piece = await reader.read(256 * 1024)
            if not piece:
                raise SystemExit(f"bench/stream.py: a response ended at {got} of {want} bytes")
            if ttfb is None:
                ttfb = time.monotonic() - began
                if first_only:
                    return {"bytes": len(piece), "ttfb": ttfb, "seconds": ttfb}
            got += len(piece)
        return {"bytes": got, "ttfb": ttfb, "seconds": time.monotonic() - began}
    finally:
        writer.close()


async def head(port: int, path: str) -> float:
    """Seconds a HEAD takes (the link checked, the file's size known: no call to Telegram)."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        return time.monotonic() - began
    finally:
        writer.close()


# --- the baseline: one getFile at a time -----------------------------------------------------------


async def one_at_a_time(socket_path, workdir: Path, message_id: int, size: int) -> dict:
    """Thunder's reader as a kurigram client of the emulator: the file's location from the message,
    then upload.getFile of 1 MiB from offset 0, each asked when the last one's answer came.
    {"seconds" of the reads, "calls": [seconds of each]}."""
    client = client_build(
        name="thunder", api_id=API_ID, api_hash=API_HASH, bot_token="7000000001:offline-token", workdir=workdir,
        no_updates=True, offline=str(socket_path), in_memory=True,
    )  # fmt: skip
    await client.start()
    try:
        peer = await client.resolve_peer(STORAGE)
        channel = raw.types.InputChannel(channel_id=peer.channel_id, access_hash=peer.access_hash)
        answer = await client.invoke(
            raw.functions.channels.GetMessages(channel=channel, id=[raw.types.InputMessageID(id=message_id)])
        )
        location = location_of(answer.messages[0]).input
        calls, got = [], 0
        began = time.monotonic()
        for offset in range(0, size, MIB):
            asked = time.monotonic()
            part = await client.invoke(raw.functions.upload.GetFile(location=location, offset=offset, limit=MIB))
            calls.append(time.monotonic() - asked)
            got += len(part.bytes)
        if got != size:
            raise SystemExit(f"bench/stream.py: the one-at-a-time reader got {got} of {size} bytes")
        return {"seconds": time.monotonic() - began, "calls": calls}
    finally:
        await client.stop()


def decrypt_cpu_per_mib(rounds: int = 40) -> float:
    """CPU seconds tgcrypto.ige256_decrypt takes for 1 MiB (AES-256-IGE), in this process."""
    data, key, iv = os.urandom(MIB), os.urandom(32), os.urandom(32)
    tgcrypto.ige256_decrypt(data, key, iv)
    began = time.process_time()
    for _ in range(rounds):
        tgcrypto.ige256_decrypt(data, key, iv)
    return (time.process_time() - began) / rounds


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        found = [int(line.split()[1]) for line in f if line.startswith("VmRSS:")]
    if not found:  # a process that has exited (a zombie) has no resident set
        raise SystemExit(f"bench/stream.py: process {pid} exited during the run (see --logs)")
    return found[0] / 1024


class Sampler(threading.Thread):
    """The highest RSS of a process, sampled every 0.1 s until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.wait(0.1):
            self.peak = max(self.peak, rss_mb(self.pid))


# --- a run ----------------------------------------------------------------------------------------


def measure_streams(port, path, size, args, pid, server_pid, files_pid) -> dict:
    """One stream (and the share of a core the streaming process and telegram_server's two processes
    used meanwhile), the TTFBs, and the concurrent streams (RSS, CPU per MiB)."""
    cold = asyncio.run(get(port, path))  # the process's connections to the file's DC opened meanwhile
    before = process_cpu(pid), process_cpu(server_pid), process_cpu(files_pid)
    one = asyncio.run(get(port, path))
    busy = [(process_cpu(p) - b) / one["seconds"] for p, b in zip((pid, server_pid, files_pid), before, strict=True)]
    rng = random.Random(len(path))
    ttfbs = [asyncio.run(get(port, path, start=rng.randrange(size), first_only=True))["ttfb"] for _ in range(args.ttfb)]
    heads = [asyncio.run(head(port, path)) for _ in range(args.ttfb)]
    idle = rss_mb(pid)
    length = args.stream_size * MIB
    starts = [(i * MIB) % max(MIB, size - length) for i in range(args.streams)]

    async def staggered(n, start):
        await asyncio.sleep(n * STAGGER)
        return await get(port, path, start=start, length=length)

    async def together():
        return await asyncio.gather(*(staggered(n, s) for n, s in enumerate(starts)))

    sampler = Sampler(pid)
    sampler.start()
    cpu = process_cpu(pid)
    began = time.monotonic()
    many = asyncio.run(together())
    took = time.monotonic() - began
    cpu = process_cpu(pid) - cpu
    sampler.stop.set()
    sampler.join()
    served = sum(r["bytes"] for r in many) / MIB
    return {
        "one": size / MIB / one["seconds"],
        "first": size / MIB / cold["seconds"],  # in run 1, the process's first GET
        "one_busy": busy,
        "ttfb95": pct(ttfbs, 0.95),
        "ttfb50": pct(ttfbs, 0.5),
        "head95": pct(heads, 0.95),
        "idle": idle,
        "rss": max(sampler.peak, rss_mb(pid)),
        "cpu_mib": cpu / served,
        "many_rate": served / took,
    }


def users_write(path, first: int, rate: float, stop: threading.Event, sent: dict, told: dict) -> None:
    """bench/broadcast.py's: new users write /start at `rate` per second until `stop`; `sent`: id ->
    when the call was made; `told`: id -> when telegram_server answered it (the update was handed
    to runbot's connection by then: what the emulator's own delay adds is told - sent)."""
    remote = RemoteTelegram(path, timeout=60)
    start, n = time.monotonic(), 0
    while not stop.is_set():
        if stop.wait(max(0.0, start + n / rate - time.monotonic())):
            break
        user_id = first + n
        sent[user_id] = time.monotonic()
        remote.user_sends(TgUser(id=user_id, first_name="New", language_code="en"), "/start")
        told[user_id] = time.monotonic()
        n += 1
    remote.close()


def streams_forever(port, path, size, n, length, stop, served) -> None:
    """`n` streams of `length` bytes from random places, each started again when it ends, until
    `stop` (a multiprocessing Event); the bytes in `served` (a multiprocessing Value). Run in a
    process of its own, so that its reading never delays this process's users (their /start and
    its timestamps)."""

    async def one(k):
        rng = random.Random(k)
        await asyncio.sleep(k * STAGGER)
        while not stop.is_set():
            got = await get(port, path, start=rng.randrange(max(1, size - length)), length=length)
            with served.get_lock():
                served.value += got["bytes"]

    async def all_of_them():
        await asyncio.gather(*(one(k) for k in range(n)))

    asyncio.run(all_of_them())


def measure_replies(remote, socket_path, port, path, size, args, first_new, streams: int, pids: dict) -> dict:
    """A paid broadcast and `streams` streams while users write /start: the replies' p95, and the
    share of a core each process used meanwhile."""
    cpu = {name: tree_cpu(pid) for name, pid in pids.items()}
    began = time.monotonic()
    Broadcast.objects.filter(title=TITLE).delete()
    since = remote.events_count()
    stop, asked, told = threading.Event(), {}, {}
    forked = multiprocessing.get_context("fork")  # the child touches no database connection
    stop_streams, served = forked.Event(), forked.Value("q", 0)
    streaming = forked.Process(target=streams_forever, args=(port, path, size, streams, 2 * MIB, stop_streams, served))
    streaming.start()
    pids, cpu["HTTP client"] = {**pids, "HTTP client": streaming.pid}, 0.0
    writer = threading.Thread(target=users_write, args=(socket_path, first_new, args.reply_rate, stop, asked, told))
    writer.start()
    broadcast = Broadcast.objects.create(title=TITLE, text=TEXT)
    broadcast_start(broadcast=broadcast)
    deadline = time.monotonic() + 120 + args.broadcast_users / 100
    try:
        while Broadcast.objects.filter(pk=broadcast.pk).values_list("status", flat=True)[0] != Broadcast.Status.DONE:
            if time.monotonic() > deadline:
                raise SystemExit("bench/stream.py: the broadcast did not end in time")
            time.sleep(0.25)
        took = time.monotonic() - began
        busy = {name: (tree_cpu(pid) - cpu[name]) / took for name, pid in pids.items()}
    finally:
        stop.set()
        stop_streams.set()
        writer.join()
        streaming.join(120)
    replied: dict[int, float] = {}
    wait_until = time.monotonic() + 60
    while len(replied) < len(asked) and time.monotonic() < wait_until:
        replied = {}
        for chat, at, text in remote.send_times(since):
            if chat in asked and not text.startswith(TEXT):
                replied.setdefault(chat, at)
        time.sleep(0.25)
    if len(replied) < len(asked):
        raise SystemExit(f"bench/stream.py: {len(asked) - len(replied)} of {len(asked)} users got no reply in 60 s")
    b = Broadcast.objects.get(pk=broadcast.pk)
    latencies = [replied[c] - asked[c] for c in asked]
    taken = [replied[c] - told[c] for c in asked]  # from telegram_server having taken the message
    return {
        "p95": pct(latencies, 0.95),
        "told95": pct([told[c] - asked[c] for c in asked], 0.95),
        "taken95": pct(taken, 0.95),
        "replies": len(asked),
        "sent": b.sent,
        "streamed": served.value / MIB,
        "busy": busy,
    }


def stored_video(remote, size: int) -> tuple[StoredFile, int, str]:
    message_id = remote.post(STORAGE, "", media=Media("video", "bench.mp4"), file_size=size)
    stored = file_store(source_chat_id=STORAGE, message_ids=[message_id], title=TITLE)
    token = stream_token_make(stored=stored, index=0, expires_at=clock.now() + timedelta(hours=6), user_id=None)
    return stored, message_id, f"/f/{token}/bench.mp4?download=1"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=64, help="MiB of the file one stream and the baseline read")
    parser.add_argument("--bandwidth", type=float, default=48.0, help="MiB/s one connection to Telegram carries")
    parser.add_argument("--ttfb", type=int, default=40, help="seeks whose time to first byte is measured")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--stream-size", type=int, default=4, help="MiB each of the concurrent streams reads")
    parser.add_argument("--reply-streams", type=int, default=50)
    parser.add_argument("--broadcast-users", type=int, default=3000)
    parser.add_argument("--reply-rate", type=float, default=10.0)
    parser.add_argument("--logs", default=None, help="keep the processes' output in this directory")
    args = parser.parse_args()
    size = args.size * MIB
    call_command("migrate", verbosity=0)
    Broadcast.objects.filter(title=TITLE).delete()
    StoredFile.objects.filter(title=TITLE).delete()
    clean_new(NEW, NEW + 10_000_000)
    UpdatePosition.objects.all().delete()  # a fresh Telegram numbers its updates from 1 again
    others = TelegramUser.objects.exclude(telegram_id__gte=AUDIENCE, telegram_id__lt=NEW)
    if others.filter(state=TelegramUser.State.ACTIVE).exists():
        raise SystemExit("bench/stream.py: other active users in this database would get the broadcast")
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("celery")
    conf = BotSettings.load()
    conf.stream_links = BotSettings.StreamLinks.ON
    conf.save()
    bandwidth = args.bandwidth * MIB
    allowed = min(IN_FLIGHT * MIB / LATENCY, bandwidth) / MIB
    # What the calls in flight allow when each part goes on a connection of its own (the reader's
    # CONNECTIONS): IN_FLIGHT parts a round trip, a round trip being the latency and the part's own
    # time on its connection's capped link. The stricter reading of the goal.
    spread_allowed = min(IN_FLIGHT * MIB / (LATENCY + MIB / bandwidth), CONNECTIONS * bandwidth) / MIB
    decrypt = []
    found = []
    with (
        telegram_process("--network", "none", "--channel", str(STORAGE)) as (socket_path, remote, server),
        tempfile.TemporaryDirectory(prefix="courier-bench-") as tmp,
    ):
        remote.dc_set(HOME_DC, latency=LATENCY, bandwidth=bandwidth)
        files_pid = remote.process_ids()["file_dcs"]
        audience = range(AUDIENCE, AUDIENCE + args.broadcast_users)
        hashes = remote.users_meet(list(audience))
        TelegramUser.objects.filter(telegram_id__gte=AUDIENCE, telegram_id__lt=NEW).delete()
        TelegramUser.objects.bulk_create(
            [TelegramUser(telegram_id=i, access_hash=hashes[i], first_name="U") for i in audience], batch_size=5000
        )
        stored, message_id, path = stored_video(remote, size)
        logs = Path(args.logs) if args.logs else Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        env = offline_env(
            socket_path, tmp, TELEGRAM_PAID_BROADCASTS="1", LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
            STREAM_PUBLIC_URL=f"http://127.0.0.1:{port}", STREAM_MAX_PER_ADDRESS="1000", STREAM_MAX_TOTAL="1000",
            SECURE_SSL_REDIRECT="0",
        )  # fmt: skip
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "4", "--without-gossip", "--without-mingle",
                  "--loglevel", "INFO"]  # fmt: skip
        print(
            f"Telegram answers in {LATENCY * 1000:.0f} ms, {args.bandwidth:g} MiB/s per connection; {IN_FLIGHT} getFile in "
            f"flight allow {allowed:.1f} MiB/s; a {args.size} MiB file; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        with (
            production_process(
                [sys.executable, "manage.py", "stream", "--port", str(port)], env, logs / "stream.log",
                "Application startup complete", cwd=ROOT,
            ) as streamer,
            production_process([sys.executable, "manage.py", "runbot"], env, logs / "runbot.log", "runbot: listening", cwd=ROOT) as bot,
            production_process(worker, env, logs / "worker.log", " ready.", cwd=ROOT) as celery,
        ):  # fmt: skip
            pids = {
                "stream": streamer.pid, "telegram_server (both)": server.pid, "of which file DCs": files_pid, "runbot": bot.pid,
                "worker": celery.pid,
            }  # fmt: skip
            for run in range(args.runs):
                base = asyncio.run(one_at_a_time(socket_path, Path(tmp), message_id, size))
                decrypt.append(decrypt_cpu_per_mib())
                r = measure_streams(port, path, size, args, streamer.pid, server.pid, files_pid)
                first = NEW + run * 100_000
                alone = measure_replies(remote, socket_path, port, path, size, args, first, 0, pids)
                r["alone"], r["alone_busy"], r["alone_told"] = alone["p95"], alone["busy"], alone["told95"]
                r["alone_taken"] = alone["taken95"]
                r.update(measure_replies(remote, socket_path, port, path, size, args, first + 50_000, args.reply_streams, pids))
                clean_new(first, first + 100_000)
                r["base"] = size / MIB / base["seconds"]
                r["round_trip"] = statistics.median(base["calls"])
                r["decrypt"] = decrypt[-1]
                found.append(r)
                print(
                    f"run {run + 1}: one stream {r['one']:.1f} MiB/s (the GET before it {r['first']:.1f}; "
                    f"{r['one'] / allowed:.2f} of allowed, "
                    f"{r['one'] / r['base']:.1f}x the one-at-a-time {r['base']:.1f} MiB/s; CPU meanwhile: stream "
                    f"{r['one_busy'][0]:.0%}, telegram_server {r['one_busy'][1]:.0%} + file DCs {r['one_busy'][2]:.0%} of a core); TTFB p50 {r['ttfb50'] * 1000:.0f}, "
                    f"p95 {r['ttfb95'] * 1000:.0f} ms (round trip {r['round_trip'] * 1000:.0f} ms; HEAD p95 "
                    f"{r['head95'] * 1000:.0f} ms); {args.streams} streams: RSS {r['idle']:.0f} -> {r['rss']:.0f} MB, "
                    f"{r['many_rate']:.1f} MiB/s, CPU {r['cpu_mib'] * 1000:.1f} ms/MiB (decrypt {r['decrypt'] * 1000:.2f} ms/MiB); "
                    f"replies p95 {r['alone'] * 1000:.0f} ms alone, {r['p95'] * 1000:.0f} ms with {args.reply_streams} streams "
                    f"({r['replies']} replies, {r['sent']} broadcast, {r['streamed']:.0f} MiB streamed meanwhile); "
                    f"{REFUSED[0]} answers 500 asked again so far; load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
                for label, busy, told in (
                    ("alone", r["alone_busy"], r["alone_told"]),
                    (f"with {args.reply_streams} streams", r["busy"], r["told95"]),
                ):
                    print(
                        f"    replies {label}: telegram_server took p95 {told * 1000:.0f} ms to take a user's message; "
                        "CPU, share of a core: " + ", ".join(f"{k} {v:.0%}" for k, v in busy.items())
                    )
        Broadcast.objects.filter(title=TITLE).delete()
        StoredFile.objects.filter(pk=stored.pk).delete()

    rss_goal = BASE_RSS_MB + IN_FLIGHT * args.streams
    rows = [
        (f"one stream / allowed ({allowed:.1f} MiB/s), goal >= 0.9", [r["one"] / allowed for r in found], "{:.2f}"),
        (
            f"one stream / {IN_FLIGHT} parts a round trip, each on its own connection ({spread_allowed:.1f} MiB/s), goal >= 0.9",
            [r["one"] / spread_allowed for r in found],
            "{:.2f}",
        ),
        (
            f"one stream / {IN_FLIGHT} parts a measured round trip (the one-at-a-time reader's median call)",
            [r["one"] * r["round_trip"] / IN_FLIGHT for r in found],
            "{:.2f}",
        ),
        ("one stream / one-at-a-time, goal >= 3", [r["one"] / r["base"] for r in found], "{:.2f}"),
        ("one stream, MiB/s", [r["one"] for r in found], "{:.1f}"),
        (
            "the GET before it (in run 1 the process's first: its connections opened meanwhile), MiB/s",
            [r["first"] for r in found],
            "{:.1f}",
        ),
        ("one-at-a-time, MiB/s", [r["base"] for r in found], "{:.1f}"),
        ("getFile round trip (1 MiB, median), ms", [r["round_trip"] * 1000 for r in found], "{:.0f}"),
        ("TTFB p95, ms", [r["ttfb95"] * 1000 for r in found], "{:.0f}"),
        ("TTFB p95 - round trip, ms, goal <= 30", [(r["ttfb95"] - r["round_trip"]) * 1000 for r in found], "{:.0f}"),
        ("TTFB p50, ms", [r["ttfb50"] * 1000 for r in found], "{:.0f}"),
        ("HEAD p95, ms", [r["head95"] * 1000 for r in found], "{:.0f}"),
        (f"{args.streams} streams: RSS, MB, goal <= {rss_goal}", [r["rss"] for r in found], "{:.0f}"),
        (f"RSS before the {args.streams} streams, MB", [r["idle"] for r in found], "{:.0f}"),
        (f"{args.streams} streams: MiB/s served", [r["many_rate"] for r in found], "{:.1f}"),
        ("CPU per MiB served, ms", [r["cpu_mib"] * 1000 for r in found], "{:.2f}"),
        ("tgcrypto decrypt of 1 MiB, ms", [r["decrypt"] * 1000 for r in found], "{:.2f}"),
        ("CPU per MiB / decrypt, goal <= 2", [r["cpu_mib"] / r["decrypt"] for r in found], "{:.1f}"),
        ("replies p95, a broadcast alone, ms", [r["alone"] * 1000 for r in found], "{:.0f}"),
        (
            f"replies p95, a broadcast and {args.reply_streams} streams, ms, goal <= 150",
            [r["p95"] * 1000 for r in found],
            "{:.0f}",
        ),
        ("  of which telegram_server taking the user's message, p95, ms", [r["told95"] * 1000 for r in found], "{:.0f}"),
        ("  from telegram_server having taken it to the reply, p95, ms", [r["taken95"] * 1000 for r in found], "{:.0f}"),
        ("  the same, a broadcast alone, p95, ms", [r["alone_taken"] * 1000 for r in found], "{:.0f}"),
    ]
    print(f"\nmin / median / max of {args.runs} (load {os.getloadavg()[0]:.2f}):")
    for what, values, fmt in rows:
        print(f"  {what:<62} {spread(values, fmt)}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()
