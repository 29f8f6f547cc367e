"""python manage.py import_users FILE [--format csv|json|sqlite] [--dry-run]"""

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from botapp.services.imports import FORMATS, ImportFileError, import_source_open, users_import

SHOWN = 50  # invalid or repeated records listed by line; the rest are counted


class Command(BaseCommand):
    help = (
        "Import the users of the bot you moved from: a CSV with a header, JSON (a list, JSON lines, mongoexport), "
        "or a SQLite database with a users table. Idempotent; a user Courier knows keeps their state."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--format", choices=FORMATS, help="Default: from the file's extension.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; write nothing.")

    def handle(self, *args, file, format, dry_run, **options):
        try:
            source = import_source_open(path=file, fmt=format)
            records = tqdm(source.records, total=source.total, unit=" users", disable=None, file=sys.stderr)
            report = users_import(records=records, dry_run=dry_run)
        except ImportFileError as exc:
            raise CommandError(str(exc)) from exc
        for title, rows in (("invalid", report.invalid), ("repeated (skipped)", report.repeated)):
            for where, why in rows[:SHOWN]:
                self.stdout.write(f"{title}: {where}: {why if title == 'invalid' else f'the same user as {why}'}")
            if len(rows) > SHOWN:
                self.stdout.write(f"{title}: … and {len(rows) - SHOWN} more")
        prefix = "import_users (dry run, nothing written)" if dry_run else "import_users"
        return f"{prefix}: {report.summary()}"
