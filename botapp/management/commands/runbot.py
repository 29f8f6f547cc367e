"""`manage.py runbot`: the Telegram bot. `--sandbox` runs it offline on the in-memory Telegram."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from botapp.config import ConfigError, admin_ids_load, bot_config_load, storage_channel_load

log = logging.getLogger("botapp.runbot")

SANDBOX_ADMIN = 1000
SANDBOX_STORAGE = -1001000000001


class Command(BaseCommand):
    help = "Run the Telegram bot (or, with --sandbox, an offline conversation on the in-memory Telegram)."
    requires_system_checks = []  # configuration is checked below, naming every bad variable

    def add_arguments(self, parser):
        parser.add_argument("--sandbox", action="store_true", help="Offline: in-memory Telegram, conversation from stdin.")
        parser.add_argument("--json", action="store_true", help="With --sandbox: print JSON lines.")
        parser.add_argument(
            "--demo", action="store_true", help="With --sandbox: store a demo file and print its deep link first."
        )
        parser.add_argument(
            "--threads",
            type=int,
            default=16,
            help="Updates handled at once (default 16): each waits for the database and Telegram.",
        )

    def handle(self, *args, **options):
        if options["sandbox"]:
            self._verbosity = options["verbosity"]
            return self.sandbox(as_json=options["json"], demo=options["demo"])
        try:
            config = bot_config_load()
        except ConfigError as exc:
            self.stderr.write("runbot: configuration error:")
            for problem in exc.problems:
                self.stderr.write(f"  - {problem}")
            self.stderr.write("Set these in the environment or in .env (see .env.example).")
            sys.exit(2)
        try:
            asyncio.run(self.serve(config, threads=options["threads"]))
        except ConfigError as exc:  # Telegram refused the credentials at sign-in
            self.stderr.write("runbot: configuration error:")
            for problem in exc.problems:
                self.stderr.write(f"  - {problem}")
            sys.exit(2)

    async def serve(self, config, *, threads: int) -> None:
        from botapp.services.health import heartbeat_start
        from botapp.services.users import user_access_hash
        from botapp.telegram.handlers import UpdatePump
        from botapp.telegram.limiter import RedisLimiter
        from botapp.telegram.pyrogram_gateway import PyrogramGateway, client_build, client_start
        from botapp.telegram.router import Router

        client = client_build(
            name="bot",
            api_id=config.api_id,
            api_hash=config.api_hash,
            bot_token=config.bot_token,
            workdir=config.session_dir,
            no_updates=False,
            offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
            # As many updates in flight as handler threads: kurigram's default (cores + 4) would
            # cap them below the pool, or queue them inside kurigram where no one sees them.
            workers=threads,
        )
        loop = asyncio.get_running_loop()
        # runbot shares the global send limiter with every worker.
        gateway = PyrogramGateway(
            client,
            loop,
            limiter=RedisLimiter.from_settings(),
            max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT,
            peers=user_access_hash,
        )
        router = Router(
            gateway,
            admin_ids=config.admin_ids,
            storage_channel_id=config.storage_channel_id,
            broadcast_channel_id=config.broadcast_channel_id,
        )
        pump = UpdatePump(router, threads=threads)
        pump.register(client)

        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        await client_start(client)
        await loop.run_in_executor(pump.executor, _remember_username, gateway.bot_username)
        log.info("runbot started as @%s; admins=%s", gateway.bot_username, sorted(config.admin_ids))
        heartbeat = heartbeat_start(process="bot")  # the console's dashboard: is the bot running?
        await stop.wait()
        heartbeat.set()
        log.info("runbot stopping: finishing updates in flight")
        await pump.drain()
        await client.stop()
        log.info("runbot stopped")

    def sandbox(self, *, as_json: bool, demo: bool) -> None:
        from django.test.utils import override_settings

        from botapp import clock
        from botapp.sandbox import Sandbox, demo_setup, stdin_is_tty
        from botapp.services.shortener import MemoryShortener
        from botapp.services.users import user_access_hash
        from botapp.telegram.router import Router
        from botapp.telegram.server.offline import OfflineBot, offline_gateway
        from botapp.telegram.server.server import TelegramServer

        if self._verbosity < 2:
            # Job and service logs would drown the conversation; --verbosity 2 shows them.
            logging.getLogger().setLevel(logging.WARNING)
        call_command("migrate", verbosity=0, interactive=False)
        # The sandbox runs background work itself (a queued broadcast is sent at once, jobs on
        # `wait`): Celery's wake-ups go to an in-memory broker, never to a real one.
        from celery import current_app

        current_app.conf.broker_url = "memory://localhost/"
        # One in-memory Telegram; runbot's client and a worker's client talk to it over MTProto.
        # The sandbox moves a virtual clock, so real-time rate windows would mean nothing here.
        telegram = TelegramServer(username=_remember_username("CourierBot"), enforce_rates=False)
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
            )
            worker = offline_gateway(telegram, name="worker", peers=user_access_hash)
            try:
                box = Sandbox(
                    telegram=telegram, bot=bot, worker=worker, out=self.stdout._out, as_json=as_json, links=shortener.follow
                )
                if demo:
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
                worker.stop()
                bot.stop()
        if failures and not interactive:
            sys.exit(1)


def _remember_username(username: str) -> str:
    from botapp.models import BotSettings

    conf = BotSettings.load()
    if username and conf.bot_username != username:
        conf.bot_username = username
        conf.save(update_fields=["bot_username"])
    return username
