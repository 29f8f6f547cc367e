"""python manage.py import_campaign OLD.env DRIP.db|USERS.json [--tasks TASKS.json] [--dry-run]"""

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from botapp.management.commands.import_users import rows_show
from botapp.services.import_files import ImportFileError, import_source_open
from botapp.services.imports import users_import
from botapp.services.imports_campaign import drip_campaign_build, drip_env_read, drip_farewell
from botapp.services.imports_drip import (
    drip_clicks_import,
    drip_tables_open,
    drip_task_records,
    drip_task_records_json,
    drip_tasks_import,
)


class Command(BaseCommand):
    help = (
        "Move in from a drip bot (shared/seeds/002): build its campaign from its .env (posts channel, welcome post, "
        "the 40 s / 3 min / farewell / 2 h steps with their buttons) and import its users, clicks and pending tasks "
        "from its SQLite database (or users.json and --tasks tasks.json). Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("env", help="The drip bot's .env file.")
        parser.add_argument("data", help="Its SQLite database (drip.db), or its users.json from before the migration.")
        parser.add_argument("--tasks", metavar="TASKS.json", help="Its tasks.json, beside a users.json.")
        parser.add_argument("--dry-run", action="store_true", help="Say what it would do; write nothing.")

    def handle(self, *args, env, data, tasks, dry_run, **options):
        try:
            config = drip_env_read(path=env)
            source = import_source_open(path=data)
            drip = drip_tables_open(path=source.path) if source.fmt == "sqlite" else None
            task_source = None
            if tasks:
                task_source = drip_task_records_json(path=tasks)
            elif drip is not None and drip.tasks:
                task_source = (drip_task_records(tables=drip), drip.tasks["status"])
            campaign = drip_campaign_build(
                env=config, farewell=drip_farewell(path=source.path if drip else None), dry_run=dry_run
            )
        except ImportFileError as exc:
            raise CommandError(str(exc)) from exc
        for line in campaign.lines:
            self.stdout.write(f"campaign: {line}")
        if not campaign.lines:
            self.stdout.write("campaign: already built (nothing to change)")
        records = tqdm(source.records, total=source.total, unit=" users", disable=None, file=sys.stderr)
        report = users_import(records=records, dry_run=dry_run)
        reports = [report]
        if drip is not None and drip.clicks:
            reports.append(drip_clicks_import(tables=drip, user_ids=report.ids, dry_run=dry_run))
        if task_source is not None:
            records, status_column = task_source
            reports.append(
                drip_tasks_import(
                    records=records, status_column=status_column, steps=campaign.steps, user_ids=report.ids,
                    dry_run=dry_run,
                )
            )  # fmt: skip
        for each in reports:
            rows_show(self.stdout, each)
        prefix = "import_campaign (dry run, nothing written)" if dry_run else "import_campaign"
        return "\n".join([f"{prefix}: {report.summary()}", *(each.summary() for each in reports[1:])])
