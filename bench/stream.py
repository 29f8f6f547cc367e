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

  one stream     a GET of the whole file: bytes / seconds from the request to its last byte, against
                 what its calls in flight allow (downloads.IN_FLIGHT x 1 MiB / 50 ms, or the
                 bandwidth cap, the lower) and against the one-at-a-time reader;
  one-at-a-time  this process's own kurigram client (the baseline, not the product) reading the same
                 file as Thunder does: upload.getFile of 1 MiB, the next asked when the last came;
                 its median call is "one getFile round trip";
  TTFB p95       `--ttfb` GETs with `Range: bytes=X-` from random X (a player seeking; the file's
                 location cached by the first), from the request to the first byte of the body;
                 goal: one getFile round trip + 30 ms;
  100 streams    `--streams` GETs at once, each of `--stream-size` MiB from a different MiB of the
                 file: the streaming process's RSS (VmRSS, sampled every 0.1 s, the highest) against
                 80 MB + IN_FLIGHT x 1 MiB per stream; its CPU (user + system, /proc) per MiB
                 served against the CPU of tgcrypto.ige256_decrypt of 1 MiB (AES-256-IGE, what
                 every byte from Telegram costs at least: measured here in the same run);
  replies        `--reply-streams` streams (again and again) and a paid broadcast to
                 `--broadcast-users` users run while new users write /start at `--reply-rate`
                 per second; reply p95 from the user's message entering Telegram to the bot's
                 reply arriving (bench/broadcast.py's measure).

Per run, then min / median / max of `--runs`.

    .venv/bin/python bench/stream.py [--runs 3] [--size 64] [--bandwidth 48] [--streams 100]
"""

from __future__ import annotations

import argparse
import asyncio
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
from broadcast import clean_new, pct, users_write
from django.conf import settings
from django.core.management import call_command
from pyrogram import raw

from botapp import clock
from botapp.models import BotSettings, Broadcast, StoredFile, TelegramUser, UpdatePosition
from botapp.services.broadcasts import broadcast_start
from botapp.services.files import file_store
from botapp.services.stream_links import stream_token_make
from botapp.telegram.client import client_build
from botapp.telegram.downloads import IN_FLIGHT, location_of
from inmemory_telegram.limits import HOME_DC
from inmemory_telegram.state import Media
from offline.telegram.clients import API_HASH, API_ID

MIB = 1024 * 1024
LATENCY = 0.05  # seconds every answer of the bot's data centre takes
AUDIENCE = 150_000_001  # the broadcast's users: AUDIENCE, AUDIENCE + 1, ...
NEW = 160_000_001  # the users who write /start during the runs
TITLE = "bench: stream"
TEXT = "Bench stream broadcast"
BASE_RSS_MB = 80  # the goal's allowance for the process itself, before its streams


# --- the HTTP client ----------------------------------------------------------------------------


async def get(port: int, path: str, *, start: int = 0, length: int | None = None, first_only: bool = False) -> dict:
    """One GET (a range from `start`, `length` bytes or to the end): {"bytes", "ttfb", "seconds"}
    from before connecting; `first_only`: closed once the first byte of the body is in."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        ranged = f"Range: bytes={start}-{'' if length is None else start + length - 1}\r\n" if start or length else ""
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{ranged}Connection: close\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
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
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


class Sampler(threading.Thread):
    """The highest RSS of a process, sampled every 0.1 s until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.wait(0.1):
            self.peak = max(self.peak, rss_mb(self.pid))


# --- a run ----------------------------------------------------------------------------------------


def measure_streams(port, path, size, args, pid, server_pid) -> dict:
    """One stream (and the share of a core the streaming process and telegram_server used meanwhile),
    the TTFBs, and the concurrent streams (RSS, CPU per MiB)."""
    before = process_cpu(pid), process_cpu(server_pid)
    one = asyncio.run(get(port, path))
    busy = [(process_cpu(p) - b) / one["seconds"] for p, b in zip((pid, server_pid), before, strict=True)]
    rng = random.Random(len(path))
    ttfbs = [asyncio.run(get(port, path, start=rng.randrange(size), first_only=True))["ttfb"] for _ in range(args.ttfb)]
    length = args.stream_size * MIB
    starts = [(i * MIB) % max(MIB, size - length) for i in range(args.streams)]

    async def together():
        return await asyncio.gather(*(get(port, path, start=s, length=length) for s in starts))

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
        "busy": busy,
        "ttfb95": pct(ttfbs, 0.95),
        "rss": max(sampler.peak, rss_mb(pid)),
        "cpu_mib": cpu / served,
        "many_rate": served / took,
    }


def streams_forever(port, path, size, n, length, stop: threading.Event, served: list) -> None:
    """`n` streams of `length` bytes from random places, each started again when it ends, until `stop`."""

    async def one(k):
        rng = random.Random(k)
        while not stop.is_set():
            served.append((await get(port, path, start=rng.randrange(max(1, size - length)), length=length))["bytes"])

    async def all_of_them():
        await asyncio.gather(*(one(k) for k in range(n)))

    asyncio.run(all_of_them())


def measure_replies(remote, socket_path, port, path, size, args, first_new) -> dict:
    """A paid broadcast and `--reply-streams` streams while users write /start: the replies' p95."""
    Broadcast.objects.filter(title=TITLE).delete()
    since = remote.events_count()
    stop, asked, served = threading.Event(), {}, []
    streaming = threading.Thread(
        target=streams_forever, args=(port, path, size, args.reply_streams, 2 * MIB, stop, served), daemon=True
    )
    streaming.start()
    writer = threading.Thread(target=users_write, args=(socket_path, first_new, args.reply_rate, stop, asked))
    writer.start()
    broadcast = Broadcast.objects.create(title=TITLE, text=TEXT)
    broadcast_start(broadcast=broadcast)
    deadline = time.monotonic() + 120 + args.broadcast_users / 100
    try:
        while Broadcast.objects.filter(pk=broadcast.pk).values_list("status", flat=True)[0] != Broadcast.Status.DONE:
            if time.monotonic() > deadline:
                raise SystemExit("bench/stream.py: the broadcast did not end in time")
            time.sleep(0.25)
    finally:
        stop.set()
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
    return {"p95": pct(latencies, 0.95), "replies": len(asked), "sent": b.sent, "streamed": sum(served) / MIB}


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
    decrypt = []
    found = []
    with (
        telegram_process("--network", "none", "--channel", str(STORAGE)) as (socket_path, remote, server),
        tempfile.TemporaryDirectory(prefix="courier-bench-") as tmp,
    ):
        remote.dc_set(HOME_DC, latency=LATENCY, bandwidth=bandwidth)
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
            production_process([sys.executable, "manage.py", "runbot"], env, logs / "runbot.log", "runbot: listening", cwd=ROOT),
            production_process(worker, env, logs / "worker.log", " ready.", cwd=ROOT),
        ):  # fmt: skip
            for run in range(args.runs):
                base = asyncio.run(one_at_a_time(socket_path, Path(tmp), message_id, size))
                decrypt.append(decrypt_cpu_per_mib())
                r = measure_streams(port, path, size, args, streamer.pid, server.pid)
                r.update(measure_replies(remote, socket_path, port, path, size, args, NEW + run * 100_000))
                clean_new(NEW + run * 100_000, NEW + (run + 1) * 100_000)
                r["base"] = size / MIB / base["seconds"]
                r["round_trip"] = statistics.median(base["calls"])
                r["decrypt"] = decrypt[-1]
                found.append(r)
                print(
                    f"run {run + 1}: one stream {r['one']:.1f} MiB/s ({r['one'] / allowed:.2f} of allowed, "
                    f"{r['one'] / r['base']:.1f}x the one-at-a-time {r['base']:.1f} MiB/s; CPU meanwhile: stream "
                    f"{r['busy'][0]:.0%}, telegram_server {r['busy'][1]:.0%} of a core); TTFB p95 {r['ttfb95'] * 1000:.0f} ms "
                    f"(round trip {r['round_trip'] * 1000:.0f} ms); {args.streams} streams: RSS {r['rss']:.0f} MB, "
                    f"{r['many_rate']:.1f} MiB/s, CPU {r['cpu_mib'] * 1000:.1f} ms/MiB (decrypt {r['decrypt'] * 1000:.2f} ms/MiB); "
                    f"replies p95 {r['p95'] * 1000:.0f} ms ({r['replies']} replies, {r['sent']} broadcast, "
                    f"{r['streamed']:.0f} MiB streamed meanwhile); load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        Broadcast.objects.filter(title=TITLE).delete()
        StoredFile.objects.filter(pk=stored.pk).delete()

    rss_goal = BASE_RSS_MB + IN_FLIGHT * args.streams
    print(f"\nmin / median / max of {args.runs} (load {os.getloadavg()[0]:.2f}):")
    print(f"  one stream / allowed ({allowed:.1f} MiB/s), goal >= 0.9   {spread([r['one'] / allowed for r in found], '{:.2f}')}")
    print(f"  one stream / one-at-a-time, goal >= 3      {spread([r['one'] / r['base'] for r in found], '{:.2f}')}")
    print(f"  one stream, MiB/s                          {spread([r['one'] for r in found])}")
    print(f"  one-at-a-time, MiB/s                       {spread([r['base'] for r in found])}")
    print(f"  getFile round trip (1 MiB), ms             {spread([r['round_trip'] * 1000 for r in found], '{:.0f}')}")
    print(f"  TTFB p95, ms (goal: round trip + 30)       {spread([r['ttfb95'] * 1000 for r in found], '{:.0f}')}")
    print(
        f"  TTFB p95 - round trip, ms, goal <= 30      {spread([(r['ttfb95'] - r['round_trip']) * 1000 for r in found], '{:.0f}')}"
    )
    print(f"  {args.streams} streams: RSS, MB, goal <= {rss_goal}      {spread([r['rss'] for r in found], '{:.0f}')}")
    print(f"  {args.streams} streams: MiB/s served               {spread([r['many_rate'] for r in found])}")
    print(f"  CPU per MiB served, ms                     {spread([r['cpu_mib'] * 1000 for r in found], '{:.2f}')}")
    print(f"  tgcrypto decrypt of 1 MiB, ms              {spread([r['decrypt'] * 1000 for r in found], '{:.2f}')}")
    print(f"  CPU per MiB / decrypt, goal <= 2           {spread([r['cpu_mib'] / r['decrypt'] for r in found], '{:.1f}')}")
    print(
        f"  replies p95 with {args.reply_streams} streams + a broadcast, ms, goal <= 150   {spread([r['p95'] * 1000 for r in found], '{:.0f}')}"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()
