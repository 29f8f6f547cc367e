"""python manage.py import_users FILE [--format csv|json|sqlite] [--tasks TASKS.json] [--map-steps OLD=STEP,…]
[--map-steps-file FILE] [--skip-overdue] [--dry-run]"""

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from botapp.services.import_files import FORMATS, ImportFileError, import_source_open
from botapp.services.imports import users_import
from botapp.services.imports_drip import (
    drip_clicks_import,
    drip_step_map_parse,
    drip_tables_open,
    drip_task_records,
    drip_task_records_json,
    drip_tasks_import,
)
from botapp.services.imports_scheduler import scheduler_import, scheduler_tables_found

SHOWN = 50  # invalid or repeated records listed by line; the rest are counted


class Command(BaseCommand):
    help = (
        "Import the users of the bot you moved from: a CSV with a header, JSON (a list, JSON lines, mongoexport), "
        "or a SQLite database with a users table; a drip bot's button_clicks and pending tasks too. "
        "Idempotent; a user Courier knows keeps their state."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--format", choices=FORMATS, help="Default: SQLite by its header, else from the extension.")
        parser.add_argument(
            "--map-steps",
            metavar="OLD=STEP,…",
            help="A drip bot's tasks: its post/step key = the Courier sequence step id to schedule, e.g. 101=5,102=6.",
        )
        parser.add_argument(
            "--tasks",
            metavar="TASKS.json",
            help="A drip bot's tasks.json from before its SQLite (a list, or an object keyed by task id).",
        )
        parser.add_argument("--map-steps-file", metavar="FILE", help="The same mapping, one OLD=STEP a line (# comments).")
        parser.add_argument(
            "--skip-overdue",
            action="store_true",
            help="Leave out (and count) pending tasks already due, instead of sending them now.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; write nothing.")

    def handle(self, *args, file, format, tasks, map_steps, map_steps_file, skip_overdue, dry_run, **options):
        if scheduler_tables_found(path=file):  # a scheduled-message system's subscribers and messages
            try:
                report = scheduler_import(path=file, dry_run=dry_run)
            except ImportFileError as exc:
                raise CommandError(str(exc)) from exc
            rows_show(self.stdout, report)
            return f"import_users{' (dry run, nothing written)' if dry_run else ''}:\n{report.summary()}"
        try:
            source = import_source_open(path=file, fmt=format)
            steps = drip_step_map_parse(inline=map_steps, path=map_steps_file)
            drip, task_source = None, None
            if source.fmt == "sqlite":
                drip = drip_tables_open(path=source.path, need_tasks=bool(steps) and not tasks)
            elif (steps or skip_overdue) and not tasks:
                raise ImportFileError(
                    f"{file}: --map-steps and --skip-overdue are for a drip bot's tasks (its SQLite database, or --tasks)"
                )
            if tasks:
                task_source = drip_task_records_json(path=tasks)
            elif drip is not None and drip.tasks:
                task_source = (drip_task_records(tables=drip), drip.tasks["status"])
            records = tqdm(source.records, total=source.total, unit=" users", disable=None, file=sys.stderr)
            report = users_import(records=records, dry_run=dry_run)
        except ImportFileError as exc:
            raise CommandError(str(exc)) from exc
        reports = [report]
        if drip is not None and drip.clicks:
            reports.append(drip_clicks_import(tables=drip, user_ids=report.ids, dry_run=dry_run))
        tasks = None
        if task_source is not None:
            records, status_column = task_source
            tasks = drip_tasks_import(
                records=records, status_column=status_column, steps=steps, user_ids=report.ids,
                skip_overdue=skip_overdue, dry_run=dry_run,
            )  # fmt: skip
            reports.append(tasks)
        for each in reports:
            rows_show(self.stdout, each)
        if tasks is not None and tasks.unmapped:
            keys = ", ".join(f"{key} ({n} task{'s' * (n != 1)})" for key, n in sorted(tasks.unmapped.items()))
            self.stdout.write(f"tasks without a step mapping: {keys}: give --map-steps KEY=<step id> and run again")
        prefix = "import_users (dry run, nothing written)" if dry_run else "import_users"
        return "\n".join([f"{prefix}: {report.summary()}", *(each.summary() for each in reports[1:])])


def rows_show(out, report) -> None:
    """Each invalid and repeated record of a report, with where it is (the first SHOWN of each)."""
    for title, rows in (("invalid", report.invalid), ("repeated (skipped)", report.repeated)):
        for where, why in rows[:SHOWN]:
            out.write(f"{title}: {where}: {why if title == 'invalid' else f'{report.REPEATED} {why}'}")
        if len(rows) > SHOWN:
            out.write(f"{title}: … and {len(rows) - SHOWN} more")
