"""python manage.py import_mongo FILE_OR_FOLDER… [--dry-run]"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from botapp import clock
from botapp.management.commands.import_users import rows_show
from botapp.services.import_files import ImportFileError, import_source_open, json_records_open
from botapp.services.imports import users_import
from botapp.services.imports_mongo import (
    COLLECTIONS,
    mongo_broadcasts_import,
    mongo_deletions_import,
    mongo_token_counts_import,
    mongo_tokens_import,
)


class Command(BaseCommand):
    help = (
        "Move in from a file-store bot's MongoDB (shared/seeds/000, 001): its mongoexport files, each named after "
        f"its collection ({', '.join(COLLECTIONS)}; .json), or a folder of them. Users first; verified users stay "
        "verified, today's token counts, pending deletions and broadcast deletions are carried. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="mongoexport files (users.json, tokens.json, …) or a folder of them.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; write nothing.")

    def handle(self, *args, paths, dry_run, **options):
        try:
            files = _collections(paths)
            sources = {
                name: import_source_open(path=path, fmt="json") if name == "users" else json_records_open(path=path, holder=name)
                for name, path in files.items()
            }
        except ImportFileError as exc:
            raise CommandError(str(exc)) from exc
        reports = []
        if "users" in sources:
            source = sources["users"]
            records = tqdm(source.records, total=source.total, unit=" users", disable=None, file=sys.stderr)
            reports.append(users_import(records=records, dry_run=dry_run))
        steps = {
            "tokens": lambda r: mongo_tokens_import(records=r, dry_run=dry_run),
            "token_generator_count": lambda r: mongo_token_counts_import(records=r, today=clock.today(), dry_run=dry_run),
            "pending_deletions": lambda r: mongo_deletions_import(records=r, dry_run=dry_run),
            "broadcasts": lambda r: mongo_broadcasts_import(records=r, dry_run=dry_run),
        }
        for name, run in steps.items():
            if name in sources:
                reports.append(run(_named(files[name], sources[name].records)))
        for report in reports:
            rows_show(self.stdout, report)
        prefix = "import_mongo (dry run, nothing written)" if dry_run else "import_mongo"
        lines = [f"users: {r.summary()}" if r is reports[0] and "users" in sources else r.summary() for r in reports]
        return "\n".join(f"{prefix}: {line}" if n == 0 else line for n, line in enumerate(lines))


def _named(path: Path, records):
    """Each record's place with its file's name, so a report line names the file."""
    return ((f"{path.name} {where}", value) for where, value in records)


def _collections(paths: list[str]) -> dict[str, Path]:
    """Each collection's file, by its name (`tokens.json`, `tokens.jsonl`); a folder gives every
    file of it so named. A file named after no collection, or one collection given twice, raises
    ImportFileError naming it."""
    found: dict[str, Path] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(p for p in path.iterdir() if p.stem in COLLECTIONS and p.suffix in (".json", ".jsonl"))
            if not candidates:
                raise ImportFileError(f"{path}: no mongoexport file named after a collection ({', '.join(COLLECTIONS)})")
        elif not path.is_file():
            raise ImportFileError(f"{path}: no such file")
        else:
            candidates = [path]
        for each in candidates:
            if each.stem not in COLLECTIONS:
                raise ImportFileError(f"{each}: not named after a collection Courier reads ({', '.join(COLLECTIONS)})")
            if each.stem in found:
                raise ImportFileError(f"{each}: the {each.stem} collection is given twice (also {found[each.stem]})")
            found[each.stem] = each
    return found
