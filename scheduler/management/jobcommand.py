"""The base of every job command: run the job once, say what it did, exit non-zero on failure."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from botapp.config import ConfigError
from scheduler.jobs.registry import JOBS, job_run


class JobCommand(BaseCommand):
    job_name = ""

    @property
    def help(self) -> str:  # type: ignore[override]
        job = JOBS[self.job_name]
        return f"{job.summary}. Schedule in beat: {job.cron_text()} (TIME_ZONE). Also safe to run from cron."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would be done; change nothing.")

    def handle(self, *args, dry_run: bool = False, **options):
        try:
            outcome = job_run(self.job_name, trigger="command", dry_run=dry_run)
        except ConfigError as exc:
            self.stderr.write(f"{self.job_name}: configuration error: {exc}")
            sys.exit(2)
        except Exception as exc:  # recorded in the job run; one line here
            self.stderr.write(f"{self.job_name}: failed: {type(exc).__name__}: {exc}")
            sys.exit(1)
        prefix = "dry run: " if dry_run else ""
        self.stdout.write(f"{self.job_name}: {prefix}{outcome}")
