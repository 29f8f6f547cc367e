"""Writing a batch's results back: one statement, whatever the number of rows.

PostgreSQL gets `UPDATE … FROM unnest(%s::type[], …)`, one array per column that differs between
rows, and a plain value for a column that is the same in every row (a batch's `sent_at`, its
statuses when all went out): Django's bulk_update builds a CASE per row and field, which grows
quadratically.

What it costs the worker is psycopg adapting each array: a list of datetimes costs the most, ints
and strings less, and an int array written as an array literal ("{1,2,3}") least. So integer
columns go as literals and repeated values once.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models

INTEGER_COLUMNS = {"AutoField", "BigAutoField", "IntegerField", "BigIntegerField", "PositiveIntegerField", "SmallIntegerField"}


def rows_update(model: type[models.Model], rows: Sequence[dict], fields: Sequence[str]) -> None:
    """Set `fields` of each row (a dict with "id" and the fields) in one statement."""
    if not rows:
        return
    meta = model._meta
    sets, params, arrays, names, types = [], [], [], [], []
    for field in [meta.pk] + [meta.get_field(f) for f in fields]:
        values = [r["id" if field is meta.pk else field.name] for r in rows]
        first = values[0]
        if field is not meta.pk and all(v == first and type(v) is type(first) for v in values):
            sets.append(f'"{field.column}" = %s')
            params.append(field.get_db_prep_value(first, connection))
            continue
        if field is not meta.pk:
            sets.append(f'"{field.column}" = v."{field.column}"')
        if field.get_internal_type() in INTEGER_COLUMNS and all(v is None or type(v) is int for v in values):
            arrays.append("{" + ",".join("NULL" if v is None else str(v) for v in values) + "}")
        else:
            arrays.append([field.get_db_prep_value(v, connection) for v in values])
        names.append(f'"{field.column}"')
        types.append(meta.pk.rel_db_type(connection) if field is meta.pk else field.cast_db_type(connection))
    sql = (
        f'UPDATE "{meta.db_table}" AS t SET {", ".join(sets)} FROM unnest('
        + ", ".join(f"%s::{t}[]" for t in types)
        + f') AS v({", ".join(names)}) WHERE t."{meta.pk.column}" = v."{meta.pk.column}"'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params + arrays)
