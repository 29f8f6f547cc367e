"""`manage.py stream`: the streaming process (stream and download links), config.asgi_stream under
uvicorn. The command checks the configuration, then becomes uvicorn (exec): signals, workers and
graceful shutdown are uvicorn's."""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from botapp.config import ConfigError, bot_config_load


class Command(BaseCommand):
    help = "Serve stream and download links (config.asgi_stream under uvicorn)."
    requires_system_checks = []  # the bot's configuration is checked below, naming every bad variable

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8001, help="Port to listen on (default 8001).")
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="Processes (default 1); each signs in its own kurigram session(s) and holds its own streams.",
        )

    def handle(self, *args, host: str, port: int, workers: int, **options):
        if workers < 1:
            raise CommandError("--workers is at least 1.")
        if not 0 < port < 65536:
            raise CommandError(f"--port {port} is not a TCP port (1 to 65535).")
        try:
            bot_config_load()
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        if not settings.STREAM_PUBLIC_URL:
            self.stderr.write("STREAM_PUBLIC_URL is not set: the bot and the console give no stream links to this process.")
        argv = [
            sys.executable, "-m", "uvicorn", "config.asgi_stream:application",
            "--host", host, "--port", str(port), "--workers", str(workers),
            "--lifespan", "on",  # the readers start with the process (botapp/stream/app.py)
            "--loop", "uvloop", "--http", "httptools",  # requirements/base.txt says why
            "--no-server-header",
            # Client addresses for the per-address limit come from X-Forwarded-For as PROXY_COUNT
            # says (botapp/views.py: client_ip), not from uvicorn's rewriting.
            "--no-proxy-headers",
            "--timeout-graceful-shutdown", "10",
        ]  # fmt: skip
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)
