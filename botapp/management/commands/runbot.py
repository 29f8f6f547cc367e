"""`manage.py runbot`: the Telegram bot (`manage.py sandbox` runs it offline on the in-memory Telegram)."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
from collections.abc import Callable

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

from botapp.bot.router import Router
from botapp.config import ConfigError, bot_config_load
from botapp.services.files import bot_username_record
from botapp.services.health import heartbeat_start
from botapp.services.posts_commands import posts_command_channels
from botapp.services.updates import UpdatePositions
from botapp.services.users import user_access_hash, user_access_hashes_fill
from botapp.telegram.client import client_configured, client_start
from botapp.telegram.limiter import RedisLimiter
from botapp.telegram.pyrogram_gateway import PyrogramGateway
from botapp.telegram.updates import UpdatePump
from botapp.telegram.user_session import UserHistory, user_client_build

log = logging.getLogger("botapp.runbot")

# Updates kurigram hands the pump at once, per handler thread: the rest of a flood waits in
# kurigram's queue in arrival order, these in the pump's by priority.
UPDATES_PER_THREAD = 16


class Command(BaseCommand):
    help = "Run the Telegram bot."
    requires_system_checks = []  # configuration is checked below, naming every bad variable

    def add_arguments(self, parser):
        parser.add_argument(
            "--threads",
            type=int,
            default=16,
            help="Updates handled at once (default 16): each waits for the database and Telegram.",
        )

    def handle(self, *args, **options):
        try:
            config = bot_config_load()
        except ConfigError as exc:
            self.stderr.write("runbot: configuration error:")
            for problem in exc.problems:
                self.stderr.write(f"  - {problem}")
            self.stderr.write("Set these in the environment or in .env (see .env.example).")
            sys.exit(2)
        for notice in config.notices:
            self.stderr.write(f"runbot: {notice}")
        if not config.admin_ids:
            self.stderr.write(
                "runbot: warning: ADMIN_IDS is empty: no one can use the admin commands (/ban, /broadcast, storing files)."
            )
        try:
            asyncio.run(self.serve(config, threads=options["threads"], ready=self._listening))
        except ConfigError as exc:  # Telegram refused the credentials at sign-in
            self.stderr.write("runbot: configuration error:")
            for problem in exc.problems:
                self.stderr.write(f"  - {problem}")
            sys.exit(2)

    def _listening(self, username: str) -> None:
        """The line a process that starts runbot waits for (offline/readiness.py): signed in, every
        update handler registered."""
        self.stdout.write(f"runbot: listening as @{username}")
        self.stdout.flush()

    async def serve(self, config, *, threads: int, ready: Callable[[str], object] | None = None) -> None:
        """Serve until SIGTERM or SIGINT; `ready(username)` once updates are being handled."""
        # More updates in flight than handler threads: those waiting for a thread wait in the
        # pump's pool, which takes them by priority (admins, new users first), not in kurigram's
        # queue, first come first served, where no one sees them.
        client = client_configured(config, name="bot", no_updates=False, workers=threads * UPDATES_PER_THREAD)
        loop = asyncio.get_running_loop()
        # runbot shares the global send limiter with every worker.
        gateway = PyrogramGateway(
            client,
            loop,
            limiter=RedisLimiter.from_settings(),
            max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT,
            peers=user_access_hash,
            peers_learnt=user_access_hashes_fill,  # a user imported from another bot: Telegram names their hash
        )
        router = Router(
            gateway,
            admin_ids=config.admin_ids,
            storage_channel_id=config.storage_channel_id,
            broadcast_channel_id=config.broadcast_channel_id,
            posts_channels=await loop.run_in_executor(None, _posts_channels),  # the database, off the loop
            # A posts command of a public channel reads it through the operator's user session,
            # connected on the first such read (manage.py login_user_session makes it).
            user_history=UserHistory(
                functools.partial(
                    user_client_build,
                    api_id=config.api_id,
                    api_hash=config.api_hash,
                    offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
                ),
                workdir=config.session_dir,
            ),
        )
        # The pump stores runbot's place in the update stream as it handles updates, and fetches
        # what came while runbot was down when it starts (docs/reliability.md#updates).
        pump = UpdatePump(router, threads=threads, positions=UpdatePositions())
        pump.register(client)

        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        await client_start(client, refused=ConfigError)
        await loop.run_in_executor(pump.executor, functools.partial(bot_username_record, username=gateway.bot_username))
        await pump.resume(client)
        log.info("runbot started as @%s; admins=%s", gateway.bot_username, sorted(config.admin_ids))
        heartbeat = heartbeat_start(process="bot")  # the console's dashboard: is the bot running?
        if ready is not None:
            ready(gateway.bot_username)
        await stop.wait()
        heartbeat.set()
        log.info("runbot stopping: finishing updates in flight")
        await pump.drain()
        await client.stop()
        await loop.run_in_executor(None, router.user_history.stop)  # its own thread and loop
        await pump.close()  # the position of the last update handled
        log.info("runbot stopped")


def _posts_channels() -> frozenset[int]:
    """The posts commands' channels (runbot hears their posts), on a thread of the loop's executor:
    its connection is closed after, as no later call there would."""
    try:
        return posts_command_channels()
    finally:
        connection.close()
