"""A scheduled message to 100,000 listed recipients, beside a broadcast to the same 100,000 users:
does a message to a list go through the send pipeline at the pipeline's figures?

Set-up (not measured): `--recipients` users write to the bot on `manage.py telegram_server
--no-rates` (a process of its own, so its CPU is not counted) and their access hashes are stored
as runbot would. Then each run, alternating the two cases:

  message    POST /api/v1/messages/ with the 100,000 user_ids (JSON, through the whole API stack:
             Bearer token, throttle, serializer, the unknown-id check as one query, the row),
             timed (`create`); its time moved to now and `broadcasts_start_due` run, timed
             (`queue`: one delivery row per listed id: the first START_ROWS when it starts, the
             rest by `broadcasts_prepare` as the worker makes them, an INSERT ... SELECT a chunk);
  broadcast  a draft to every active user (the same 100,000) started with broadcast_start, timed
             with the rest of its rows made the same way (`queue`).

Then the first `--sends` deliveries of each go out through the broadcast job's own loop,
Sweep(BroadcastSendSweep) as send_broadcasts runs it, on a worker's gateway (PyrogramGateway on
the bulk lane of RedisLimiter at 100,000/s, so it never sleeps but makes every Redis round trip),
measured as sends per CPU-second of this process (time.process_time, all threads). The rest of the
deliveries are cancelled and every row removed before the next case.

    .venv/bin/python bench/scheduled.py [--runs 3] [--recipients 100000] [--sends 5000] [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import time

import _setup  # noqa: F401
import redis
from _setup import spread
from _telegram import access_hashes, telegram_process, users_meet_bot
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from api.clients import apiclient_create
from api.models import ApiClient
from botapp import clock
from botapp.models import Broadcast, TelegramUser
from botapp.services.broadcasts import broadcast_start, broadcasts_prepare, broadcasts_start_due
from botapp.services.users import user_access_hash
from botapp.telegram.limiter import BULK, RedisLimiter
from offline.telegram.clients import offline_gateway
from scheduler.jobs.broadcast_send import BroadcastSendSweep
from scheduler.jobs.sweep import Sweep

FIRST = 90_000_001
TITLE = "bench: scheduled"
CASES = ("message", "broadcast")


def create_message(client: APIClient, ids: list[int]) -> tuple[Broadcast, float, int]:
    body = json.dumps({"send_at": clock.now().replace(year=clock.now().year + 1).isoformat(), "user_ids": ids, "text": "Hello"})
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.post("/api/v1/messages/", body, content_type="application/json")
        took = time.perf_counter() - started
    if response.status_code != 201:
        raise SystemExit(f"bench/scheduled.py: the API answered {response.status_code}: {response.content[:300]!r}")
    message = Broadcast.objects.get(pk=response.json()["id"])
    Broadcast.objects.filter(pk=message.pk).update(title=TITLE)
    return message, took, len(queries)


def queue(case: str, client: APIClient, ids: list[int]) -> tuple[Broadcast, dict]:
    figures = {}
    if case == "message":
        message, figures["create"], figures["create_queries"] = create_message(client, ids)
        Broadcast.objects.filter(pk=message.pk).update(scheduled_at=clock.now())
        started = time.perf_counter()
        broadcasts_start_due()
        broadcasts_prepare(time_budget=600)  # the rows past the first START_ROWS, as the worker makes them
        figures["queue"] = time.perf_counter() - started
        message.refresh_from_db()
        return message, figures
    broadcast = Broadcast.objects.create(title=TITLE, text="Hello")
    started = time.perf_counter()
    broadcast_start(broadcast=broadcast)
    broadcasts_prepare(time_budget=600)
    figures["queue"] = time.perf_counter() - started
    broadcast.refresh_from_db()
    return broadcast, figures


class FirstSends(BroadcastSendSweep):
    """The broadcast job, claiming its first `left` deliveries and no more."""

    def __init__(self, gateway, *, left: int):
        super().__init__(gateway)
        self.left = left

    def claim(self, n: int):
        rows = super().claim(min(n, self.left)) if self.left > 0 else []
        self.left -= len(rows)
        return rows


def send(path, broadcast: Broadcast, sends: int, threads: int) -> float:
    prefix = f"courier:bench:{time.time_ns()}"
    client = redis.Redis.from_url(settings.REDIS_URL, max_connections=threads + 8)
    limiter = RedisLimiter(client, rate=100_000, prefix=prefix, lane=BULK)
    gateway = offline_gateway(str(path), name="scheduled", limiter=limiter, peers=user_access_hash)
    job = FirstSends(gateway, left=sends)

    cpu = time.process_time()
    processed, failed, _ = Sweep(job, batch_size=200, time_budget=600, in_flight=threads).run()
    cpu = time.process_time() - cpu
    gateway.stop()
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    if (processed, failed) != (sends, 0):
        raise SystemExit(f"bench/scheduled.py: {broadcast.kind} sent {processed} ({failed} failed) of {sends}")
    return sends / cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS, settings.SECURE_SSL_REDIRECT = ["testserver"], False
    Broadcast.objects.filter(title=TITLE).delete()
    others = Broadcast.objects.filter(status__in=[Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.SCHEDULED])
    if others.exists():
        raise SystemExit(f"bench/scheduled.py: other broadcasts are waiting in this database: {list(others)[:3]}")
    if (
        TelegramUser.objects.exclude(telegram_id__gte=FIRST, telegram_id__lt=FIRST + args.recipients)
        .filter(state="active")
        .exists()
    ):
        raise SystemExit("bench/scheduled.py: the bench database has other active users (a broadcast would reach them too)")
    ids = list(range(FIRST, FIRST + args.recipients))
    ApiClient.objects.filter(name=TITLE).delete()
    _, token = apiclient_create(name=TITLE, scopes="read,write")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    with telegram_process("--no-rates") as (path, remote, _proc):
        started = time.perf_counter()
        users_meet_bot(remote, ids)
        hashes: dict[int, int] = {}
        setup = offline_gateway(str(path), name="setup", peers=hashes.get)
        hashes.update(access_hashes(setup, ids))
        setup.stop()
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + args.recipients).delete()
        TelegramUser.objects.bulk_create(
            [TelegramUser(telegram_id=i, access_hash=hashes[i], first_name="U") for i in ids], batch_size=5000
        )
        print(f"set-up: {len(ids):,} users met the bot in {time.perf_counter() - started:.0f} s", flush=True)

        found: dict[str, dict[str, list[float]]] = {c: {"queue": [], "create": [], "sends": []} for c in CASES}
        for run in range(args.runs):
            for case in CASES:
                broadcast, figures = queue(case, client, ids)
                if broadcast.total != len(ids):
                    raise SystemExit(f"bench/scheduled.py: {case} queued {broadcast.total}, not {len(ids)}")
                per_cpu = send(path, broadcast, args.sends, args.threads)
                Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.CANCELLED)
                Broadcast.objects.filter(pk=broadcast.pk).delete()
                found[case]["queue"].append(figures["queue"])
                found[case]["sends"].append(per_cpu)
                line = f"run {run + 1} {case:9} queue {figures['queue']:.2f} s"
                if "create" in figures:
                    found[case]["create"].append(figures["create"])
                    line += f", POST /api/v1/messages/ {figures['create']:.2f} s ({figures['create_queries']} queries)"
                print(f"{line}, {per_cpu:,.0f} sends/CPU-s", flush=True)
        ApiClient.objects.filter(name=TITLE).delete()
        TelegramUser.objects.filter(telegram_id__gte=FIRST, telegram_id__lt=FIRST + args.recipients).delete()

    print(f"\n{len(ids):,} recipients; min / median / max of {args.runs}:")
    print(f"  POST /api/v1/messages/ with the list     {spread(found['message']['create'], '{:.2f}')} s")
    for case in CASES:
        print(f"  {case:9} queue (a row per recipient)   {spread(found[case]['queue'], '{:.2f}')} s")
    for case in CASES:
        print(f"  {case:9} sender cost, first {args.sends:,}    {spread(found[case]['sends'], '{:,.0f}')} sends/CPU-s")
    ratios = [m / b for m, b in zip(found["message"]["sends"], found["broadcast"]["sends"], strict=True)]
    print(f"  message / broadcast sender cost, run by run: {spread(ratios, '{:.2f}')}")


if __name__ == "__main__":
    main()
