"""`manage.py sandbox`: the bot offline on the in-memory Telegram, a conversation from stdin.

The real router, services and background jobs run against the in-memory Telegram over MTProto (a
runbot client and a worker client); a virtual clock moves with `wait`. See offline/sandbox.py for
the lines it reads. Tooling: nothing in production imports this.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from datetime import timedelta

import psycopg
from celery import current_app
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection, connections
from django.test.utils import override_settings
from django.utils import timezone

from botapp import clock
from botapp.bot.router import Router
from botapp.config import admin_ids_load, storage_channel_load
from botapp.models import HandledUpdate
from botapp.services.files import bot_username_record
from botapp.services.users import user_access_hash, user_access_hashes_fill
from botapp.signals import broadcast_queued, work_scheduled
from botapp.telegram.quotas import quotas
from inmemory_telegram.server import TelegramServer
from offline.campaign_demo import campaign_demo_setup
from offline.sandbox import Sandbox, demo_setup, stdin_is_tty
from offline.shortener import MemoryShortener
from offline.stream_demo import stream_demo, stream_demo_lines, stream_demo_store, stream_port
from offline.telegram.clients import OfflineBot, offline_gateway
from scheduler.receivers import broadcast_sender_wake, work_wake

SANDBOX_ADMIN = 1000
SANDBOX_STORAGE = -1001000000001
DEMOS = ("files", "campaign", "stream")
# The scheduler's receivers that would hand the sandbox's background work to Celery, with the
# dispatch_uid scheduler/apps.py connects each with: the sandbox does that work itself.
PUBLISHERS = (
    (broadcast_queued, broadcast_sender_wake, "scheduler.broadcast_sender_wake"),
    (work_scheduled, work_wake, "scheduler.work_wake"),
)


class Command(BaseCommand):
    help = "Run the bot offline on the in-memory Telegram: a conversation from stdin (see README)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON lines.")
        parser.add_argument(
            "--demo",
            nargs="?",
            const="files",
            choices=DEMOS,
            help="Demo data: `files` (the default with --demo) stores a demo file and prints its deep link first; "
            "`campaign` rebuilds a drip bot's campaign (offline/campaign_demo.py) and prints its /start line; "
            "`stream` stores the demo video and runs the streaming process (offline/stream_demo.py), printing "
            "its player page and a curl -C - line.",
        )
        parser.add_argument(
            "--fresh", action="store_true", help="Drop and create the database first (`make sandbox` does): an empty bot."
        )

    def handle(self, *args, **options):
        self._verbosity = options["verbosity"]
        if options["fresh"]:
            own = sandbox_database_name(settings.DATABASES["default"]["NAME"])
            if own != settings.DATABASES["default"]["NAME"]:
                # Run where a console's processes run (`docker compose run --rm web python manage.py
                # sandbox --fresh --demo`): the database and the cache they use are theirs, never
                # dropped nor written by the sandbox.
                self.stderr.write(f"sandbox: on a database of its own, {own}, and a cache in the process")
                sandbox_stores_use(database=own)
            database_recreate()
            # A fresh bot's users have no counts either: fair use's keys of this run's own (its
            # clock starts at the same moment every run, so an earlier run's would count).
            quotas().prefix = f"courier:sandbox:{time.time_ns()}:quota"
        # Log lines carry the sandbox's clock (moved by `wait`), as the conversation's notes do.
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(sandbox_clock_stamp)
        # One send at a time: sends due together (a campaign step for three users) go out in their
        # claim's order, not in whichever order the pool's threads reach Telegram, so a transcript
        # (the README's) is the same every run.
        in_flight, settings.SENDS_IN_FLIGHT = settings.SENDS_IN_FLIGHT, 1
        try:
            with celery_kept_out():
                self.sandbox(as_json=options["json"], demo=options["demo"])
        finally:
            settings.SENDS_IN_FLIGHT = in_flight
            for handler in handlers:
                handler.removeFilter(sandbox_clock_stamp)

    def sandbox(self, *, as_json: bool, demo: str | None) -> None:
        if self._verbosity < 2:
            # Job and service logs would drown the conversation; --verbosity 2 shows them.
            logging.getLogger().setLevel(logging.WARNING)

        call_command("migrate", verbosity=0, interactive=False)
        if demo:
            # A demo starts at the next DEMO_HOUR on the sandbox's clock (the operator's time zone), so
            # what it shows does not hang on when it runs: the campaign's two hours of `wait` started
            # at 22:00 crossed midnight, and /stats' "new today" counted 1 user of 4.
            clock.clock_advance(demo_start(clock.now()) - clock.now())
        # A new in-memory Telegram numbers messages from 1 again: claims on another one's updates
        # (services/updates.py) would take its new messages for repeats.
        HandledUpdate.objects.all().delete()
        # One in-memory Telegram; runbot's client and a worker's client talk to it over MTProto.
        # The sandbox moves a virtual clock, so real-time rate windows would mean nothing here.
        telegram = TelegramServer(now=clock.now, username=bot_username_record(username="CourierBot"), enforce_rates=False)
        storage = storage_channel_load() or SANDBOX_STORAGE
        telegram.create_channel(storage, title="Storage")
        admins = admin_ids_load() or frozenset({SANDBOX_ADMIN})
        # What every part of the sandbox reads, for as long as it runs (the settings form refuses the
        # storage channel as the backup, nobody bans an admin; tracked buttons need an address, and
        # the sandbox follows them itself): its channel and admins, set or not.
        with override_settings(
            STORAGE_CHANNEL_ID=str(storage),
            ADMIN_IDS=",".join(map(str, sorted(admins))),
            PUBLIC_URL=settings.PUBLIC_URL or "https://courier.example",
        ):
            shortener = MemoryShortener()  # verification links go "through" an in-memory shortener
            bot = OfflineBot(
                telegram,
                # The sandbox has one channel (`post`): marked posts there are broadcast.
                lambda gw: Router(
                    gw,
                    admin_ids=admins,
                    storage_channel_id=storage,
                    shortener=shortener,
                    broadcast_channel_id=storage,
                ),
                peers=user_access_hash,
                peers_learnt=user_access_hashes_fill,
            )
            worker = offline_gateway(telegram, name="worker", peers=user_access_hash, peers_learnt=user_access_hashes_fill)
            streaming = contextlib.ExitStack()
            try:
                box = Sandbox(
                    telegram=telegram, bot=bot, worker=worker, out=self.stdout._out, as_json=as_json, links=shortener.follow
                )
                if demo == "campaign":
                    payload = campaign_demo_setup(telegram)
                    box.note(
                        f"demo campaign ready: send '1001: /start {payload}' (link t.me/{telegram.bot.username}?start={payload})",
                        payload=payload,
                    )
                elif demo == "stream":
                    stored = stream_demo_store(telegram, storage_channel_id=storage)
                    links = streaming.enter_context(stream_demo(telegram, stored, port=stream_port()))
                    for line in stream_demo_lines(links):
                        box.note(line, watch=links.watch, download=links.download)
                    box.note(
                        f"the same video in the bot: send '1001: /start {stored.share_id}' (its Stream / Download buttons)",
                        share_id=stored.share_id,
                    )
                elif demo:
                    stored = demo_setup(telegram, storage_channel_id=storage)
                    bot.pump.process(expect=len(stored.message_ids), posts=True)  # runbot hears of the demo posts now
                    box.note(
                        f"demo file stored: send '1001: /start {stored.share_id}' (link t.me/{telegram.bot.username}?start={stored.share_id})",
                        share_id=stored.share_id,
                    )
                interactive = stdin_is_tty()
                if interactive:
                    box.note(
                        f"sandbox ready at {timezone.localtime(clock.now()):%Y-%m-%d %H:%M %Z}; admins: {sorted(admins)}. Ctrl-D to quit."
                    )
                failures = box.run(sys.stdin, interactive=interactive)
            finally:
                streaming.close()
                worker.stop()
                bot.stop()
        if failures and not interactive:
            sys.exit(1)


DEMO_HOUR = 9  # a demo's first morning, local time: its day has room for every wait it makes


def demo_start(now):
    """The next DEMO_HOUR:00 after `now`, in the operator's time zone."""
    local = timezone.localtime(now)
    start = local.replace(hour=DEMO_HOUR, minute=0, second=0, microsecond=0)
    return start if start > local else start + timedelta(days=1)


@contextlib.contextmanager
def celery_kept_out():
    """While the sandbox runs it does its background work itself (a queued broadcast at once, the
    wake-ups and the jobs on `wait`): the scheduler's receivers that would publish that work
    (PUBLISHERS; a wake-up is also armed in Redis, which may be another Courier's) are
    disconnected, and anything else published goes to an in-memory broker. All is put back on the
    way out: tests run the command inside their own process, whose Celery must stay as it was."""
    broker = current_app.conf.broker_url
    current_app.conf.broker_url = "memory://localhost/"
    for signal, _, uid in PUBLISHERS:
        signal.disconnect(dispatch_uid=uid)
    try:
        yield
    finally:
        for signal, receiver, uid in PUBLISHERS:
            signal.connect(receiver, dispatch_uid=uid)
        current_app.conf.broker_url = broker


def sandbox_clock_stamp(record: logging.LogRecord) -> bool:
    """A logging filter: the record's time is the sandbox's clock, not the wall clock."""
    moment = clock.now().timestamp()
    record.created, record.msecs = moment, (moment % 1) * 1000
    return True


def sandbox_database_name(name: str) -> str:
    """The database `--fresh` may drop and create: one whose name says it is a sandbox's, as
    `make sandbox`'s and the suite's are; any other (a console's) gives its name + `_sandbox`."""
    return name if "sandbox" in name else f"{name}_sandbox"


def sandbox_stores_use(*, database: str) -> None:
    """Point this process at `database` and at a cache of its own, in the process, for the rest of
    its life (settings, the bot's hot values and the limiter's keys would otherwise land in the Redis
    the console's processes read). `override_settings` has Django make its caches again."""
    connections["default"].close()
    connections["default"].settings_dict["NAME"] = database
    override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}).enable()


def database_recreate() -> None:
    """Drop and create the default database (through the server's `postgres` database), so the
    sandbox starts empty, as a fresh install would."""
    connection.close()
    params = connection.get_connection_params()
    name = connection.settings_dict["NAME"]
    params["dbname"] = "postgres"
    quoted = '"' + name.replace('"', '""') + '"'
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {quoted}")
