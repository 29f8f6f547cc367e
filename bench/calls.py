"""Telegram calls per operation, read from the emulated Telegram's own counters (every raw MTProto
request kurigram's client writes is counted by `TelegramServer`, whatever the gateway believes).

runbot (OfflineBot: kurigram's client with updates, the pump, the Router) meets the user, who
writes /help, so runbot stores the user's access hash as it does in production; a worker's
PyrogramGateway (peers = the access hashes runbot stored) then makes the calls, warm (it has
resolved the storage channel once, as long-lived processes have). Counts do not vary between runs;
the script runs 3 times on a fresh Telegram each and says whether they agreed.

    .venv/bin/python bench/calls.py [--runs 3]
"""

from __future__ import annotations

import argparse
import collections
from datetime import timedelta

import _setup  # noqa: F401
from django.core.management import call_command
from django.db import connection

from botapp import clock
from botapp.bot.router import Router
from botapp.models import HandledUpdate, PendingDeletion, TelegramUser
from botapp.services.broadcasts import BroadcastMessage
from botapp.services.outgoing import Outgoing
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import Media, TgUser
from inmemory_telegram.server import TelegramServer
from offline.shortener import MemoryShortener
from offline.telegram.clients import OfflineBot, offline_gateway
from scheduler.jobs.deletions import delete_due_messages

ADMIN = 1000
STORAGE = -1001000000001
USER = TgUser(id=4_000_001, first_name="Alice", username="alice_bench", language_code="en")


def summary(methods: list[str]) -> str:
    counts = collections.Counter(methods)
    return ", ".join(f"{n} {name}" for name, n in counts.items()) or "none"


def run_once() -> dict[str, list[str]]:
    TelegramUser.objects.filter(telegram_id=USER.id).delete()
    # A fresh Telegram numbers messages from 1 again: runbot's claims on the last one's would make
    # its messages look like repeats (services/updates.py).
    HandledUpdate.objects.filter(chat_id=USER.id).delete()
    telegram = TelegramServer(now=clock.now, username="CourierBot", enforce_rates=False)
    telegram.create_channel(STORAGE, title="Storage")
    bot = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=MemoryShortener()),
        peers=user_access_hash,
    )
    worker = offline_gateway(telegram, name="worker", peers=user_access_hash)
    found = {}
    try:
        telegram.user_sends(USER, "/help")  # runbot sees the user and stores the access hash
        bot.pump.process()
        files = [telegram.post(STORAGE, f"part {i}", media=Media("document", f"part{i}.pdf")) for i in range(10)]
        worker.copy_messages(USER.id, STORAGE, [telegram.post(STORAGE, "warm-up")])  # resolves the channel once

        start = len(telegram.calls)
        assert len(worker.copy_messages(USER.id, STORAGE, files)) == 10
        found["10-file link, no caption"] = telegram.methods_called(start)

        start = len(telegram.calls)
        assert len(worker.copy_messages(USER.id, STORAGE, files, caption="From Courier")) == 10
        found["10-file link, with a caption"] = telegram.methods_called(start)

        ids = [worker.send_text(USER.id, f"m{i}").message_id for i in range(250)]
        start = len(telegram.calls)
        assert worker.delete_messages(USER.id, ids) == 250
        found["deleting 250 messages"] = telegram.methods_called(start)

        # The auto-delete sweep: 150 chats, one delivered file each, due (what delete_due_messages
        # does in production: the files deleted across chats, then each user's "deleted" notice).
        chats = list(range(USER.id + 1, USER.id + 151))
        TelegramUser.objects.filter(telegram_id__in=chats).delete()
        hashes = telegram.users_meet(chats)
        TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=hashes[c], first_name="U") for c in chats])
        worker.peers_remember(hashes)
        sent = [worker.send_text(c, "file").message_id for c in chats]
        with connection.cursor() as cur:  # a scratch database: other benches leave due rows behind
            cur.execute(f"TRUNCATE {PendingDeletion._meta.db_table}")
        due = clock.now() - timedelta(minutes=1)
        PendingDeletion.objects.bulk_create(
            [
                PendingDeletion(chat_id=c, message_ids=[m], delete_at=due, share_id="bench")
                for c, m in zip(chats, sent, strict=True)
            ]
        )
        start = len(telegram.calls)
        assert delete_due_messages(gateway=worker).processed == len(chats)
        assert telegram.live(sent) == []
        found["auto-delete sweep, 150 chats, 1 file each"] = telegram.methods_called(start)
        TelegramUser.objects.filter(telegram_id__in=chats).delete()
    finally:
        worker.stop()

    # A broadcast send from a worker process that has never sent to this user (empty peer cache).
    fresh = offline_gateway(telegram, name="broadcast-worker", peers=user_access_hash)
    try:
        message = BroadcastMessage(Outgoing.compose(text="<b>News</b>", media_kind="", media="", buttons="", protect=False), None)
        start = len(telegram.calls)
        message.send(fresh, USER.id, user_id=TelegramUser.objects.get(telegram_id=USER.id).pk)
        found["broadcast send to a user runbot has seen"] = telegram.methods_called(start)
    finally:
        fresh.stop()
        bot.stop()
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    runs = [run_once() for _ in range(args.runs)]
    # Counts per method, not their order: the sweep's batches run side by side (`Sweep`), so one
    # batch's notices may reach Telegram before another batch's deletions.
    counted = [{op: collections.Counter(methods) for op, methods in r.items()} for r in runs]
    same = all(c == counted[0] for c in counted)
    print(f"Telegram calls per operation ({args.runs} runs, {'identical' if same else 'DIFFERENT'}):")
    for name, methods in runs[0].items():
        getusers = methods.count("users.GetUsers")
        counts = [len(r[name]) for r in runs]
        print(f"  {name:42} {'/'.join(map(str, counts)):>8} calls  users.GetUsers: {getusers}  ({summary(methods)})")


if __name__ == "__main__":
    main()
