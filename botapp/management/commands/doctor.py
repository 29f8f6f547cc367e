"""`manage.py doctor`: check a deployment from where it runs, one line per check, and exit 1 when
anything needs fixing (botapp/services/doctor.py says what each check looks at)."""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from botapp.config import bot_config_load
from botapp.services.doctor import AREAS, FAIL, WARN, doctor_run
from botapp.telegram.client import client_configured
from botapp.telegram.download_pool import bots_admin
from botapp.telegram.pyrogram_gateway import PyrogramGateway

MARKS = {"ok": "✔", WARN: "!", FAIL: "✘"}


def gateway_open():
    """A gateway signed in with the deployment's token on a session of its own, kept in memory:
    runbot's and the workers' session files are never touched."""
    client = client_configured(bot_config_load(), name="doctor", no_updates=True, in_memory=True)
    gateway = PyrogramGateway.in_thread(client, max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT)
    try:
        gateway.start()
    except BaseException:
        gateway.stop()
        raise
    return gateway


def stream_admins(tokens: list[str], chat_id: int) -> list:
    """Whether each stream bot is an admin of `chat_id`, asked with in-memory sessions of its own."""
    config = bot_config_load()
    return bots_admin(
        tokens, chat_id, api_id=config.api_id, api_hash=config.api_hash,
        offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
    )  # fmt: skip


class Command(BaseCommand):
    help = "Check everything the deployment depends on; one line per check; exit 1 if anything is wrong."
    requires_system_checks = []  # the checks are ours to run and report (the settings area includes them)

    def add_arguments(self, parser):
        parser.add_argument("--only", action="append", choices=AREAS, help="Check only this area (repeatable).")

    def handle(self, *args, **options):
        findings = doctor_run(gateway_open=gateway_open, stream_admins=stream_admins, areas=tuple(options["only"] or AREAS))
        style = {"ok": self.style.SUCCESS, WARN: self.style.WARNING, FAIL: self.style.ERROR}
        for f in findings:
            self.stdout.write(style[f.status](f"{MARKS[f.status]} {f.area:<9} {f.name}: {f.text}"))
        failed = sum(f.status == FAIL for f in findings)
        warned = sum(f.status == WARN for f in findings)
        if failed:
            self.stdout.write(style[FAIL](f"{failed} problem(s) to fix" + (f", {warned} warning(s)" if warned else "")))
            sys.exit(1)
        self.stdout.write(style["ok"]("All good" + (f" ({warned} warning(s))" if warned else "")))
