"""The migration rule of an upgrade (docs/operating.md, "Upgrading"): between `migrate` and the
restart, the previous release's processes run on the new schema. So a migration adds (a table, a
column that is nullable or has a database default, an index, a function) and the code uses it;
removing or renaming what the previous release uses waits for a later release, once no process of
that release is left. A column added NOT NULL with only a Python default (Django drops the column's
default once it has filled the existing rows) makes every insert of the previous release fail.

Checked here for every migration of botapp and scheduler from RULE_FROM on (the first migrations
written under the rule, after the release tests/chaos/test_upgrade.py runs)."""

from __future__ import annotations

from django.db import migrations
from django.db.migrations.loader import MigrationLoader
from django.db.models.fields import NOT_PROVIDED

# The first migration of each app that the rule covers: those after the previous release's last
# (botapp 0030, scheduler 0002, at commit a083718).
RULE_FROM = {"botapp": "0031", "scheduler": "0003"}
REMOVALS = (
    migrations.RemoveField,
    migrations.DeleteModel,
    migrations.RenameField,
    migrations.RenameModel,
    migrations.AlterModelTable,
    migrations.RemoveConstraint,
)


def _kept_by_old_inserts(field) -> bool:
    """Whether an INSERT that does not name the column still succeeds."""
    return field.null or field.db_default is not NOT_PROVIDED or field.many_to_many


def upgrade_hazards(loader: MigrationLoader, rule_from: dict[str, str], *, until: tuple[str, str] | None = None) -> list[str]:
    """What in the migrations from `rule_from` on breaks the previous release's processes, in the
    schema they leave (`until`: as that migration leaves it, with what it needs; else all)."""
    hazards = []
    final = loader.project_state(until)
    plan = set(loader.graph.forwards_plan(until)) if until else set(loader.disk_migrations)
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        if app not in rule_from or name[:4] < rule_from[app] or (app, name) not in plan:
            continue
        before = loader.project_state((app, name), at_end=False)
        for op in migration.operations:
            where = f"{app}.{name}: {op.describe()}"
            if isinstance(op, REMOVALS):
                hazards.append(f"{where}: removes or renames what the previous release uses (a later release may)")
            elif isinstance(op, migrations.AddField):
                model = final.models.get((app, op.model_name_lower))
                field = model.fields.get(op.name) if model is not None else None
                if field is not None and not _kept_by_old_inserts(field):
                    hazards.append(f"{where}: NOT NULL without a database default (db_default): old inserts fail")
            elif isinstance(op, migrations.AlterField):
                old = before.models[(app, op.model_name_lower)].fields[op.name]
                if _kept_by_old_inserts(old) and not _kept_by_old_inserts(op.field):
                    hazards.append(f"{where}: makes a column old inserts leave out required")
    return hazards


def test_migrations_since_the_previous_release_only_add():
    assert upgrade_hazards(MigrationLoader(None, ignore_no_migrations=True), RULE_FROM) == []


def test_the_checker_finds_a_column_added_not_null_with_only_a_python_default():
    """0031 added its stream columns NOT NULL with Python defaults, and 0036 gave them database
    defaults: the schema as 0035 leaves it has the four columns the checker must name."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    hazards = upgrade_hazards(loader, RULE_FROM, until=("botapp", "0035_premium_notice_lease"))
    assert sorted(h.split(": NOT NULL")[0] for h in hazards) == [
        "botapp.0031_stream_links: Add field stream_generation to storedfile",
        "botapp.0031_stream_links: Add field stream_lifetime_hours to botsettings",
        "botapp.0031_stream_links: Add field stream_links to botsettings",
        "botapp.0031_stream_links: Add field stream_links to storedfile",
    ]
