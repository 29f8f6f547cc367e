"""`manage.py telegram_server`: the in-memory Telegram on a Unix socket, for offline runbot and
workers (TELEGRAM_OFFLINE=1) and tests that run several processes against one Telegram. The file
data centres (media connections: file downloads) are served by a second process it starts, on a
socket beside it (inmemory_telegram/file_dcs.py), as Telegram keeps files on other machines."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from botapp import clock
from inmemory_telegram.process import serve
from inmemory_telegram.rates import NETWORKS
from inmemory_telegram.server import TelegramServer

log = logging.getLogger("botapp.telegram_server")


class Command(BaseCommand):
    help = "Run the in-memory Telegram on a Unix socket (TELEGRAM_OFFLINE_SOCKET); never in production."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--socket", default=str(settings.TELEGRAM_OFFLINE_SOCKET), help="Unix socket path.")
        parser.add_argument("--username", default="CourierOffline", help="The bot's username.")
        parser.add_argument("--channel", type=int, action="append", default=[], help="A channel the bot administers (-100…).")
        parser.add_argument("--no-rates", action="store_true", help="Do not answer FLOOD_WAIT when sends go too fast.")
        parser.add_argument("--rate", type=float, default=None, help="Messages/s allowed overall (default: Telegram's 30).")
        parser.add_argument("--latency", type=float, default=0.0, help="Seconds every answer takes.")
        parser.add_argument(
            "--network", choices=sorted(NETWORKS), default="realistic",
            help="The way requests take to Telegram: 'realistic' (a delay with jitter, inmemory_telegram/rates.py) or 'none'.",
        )  # fmt: skip
        parser.add_argument(
            "--count-per-call", action="store_true",
            help="Count an album or a forward as one message against the overall rates (default: each message).",
        )  # fmt: skip

    def handle(self, *args, **options):
        server = TelegramServer(
            now=clock.now,
            username=options["username"],
            enforce_rates=not options["no_rates"],
            latency=options["latency"],
            network=NETWORKS[options["network"]],
            count_per_message=not options["count_per_call"],
        )
        if options["rate"]:
            server.rates_set(global_rate=options["rate"])
        for channel in options["channel"]:
            server.create_channel(channel)
        asyncio.run(self._serve(server, Path(options["socket"])))

    async def _serve(self, server: TelegramServer, path: Path) -> None:
        def listening() -> None:  # the line callers wait for (offline/readiness.py)
            self.stdout.write(f"telegram_server: listening on {path} as @{server.bot.username} (token {server.bot.token})")
            self.stdout.flush()

        task = asyncio.create_task(serve(server, path, ready=listening, file_dcs=True))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            path.unlink(missing_ok=True)
            log.info("telegram_server stopped: %s calls, %s FLOOD_WAITs", len(server.calls), server.flood_waits)
