"""A lookup by a unique column, compiled once: for the queries runbot makes on every update.

`Model.objects.filter(col=value).first()` builds and compiles its SQL again on every call; for a
one-row lookup that is most of the CPU (several times the round trip itself). `row_by` keeps what
the ORM compiled for the first call (its SQL, the columns and the value converters, JSONField's
included) and only binds the new value, so it returns what `.first()` would, for a fraction of
the cost.
"""

from __future__ import annotations

import functools
import select
from importlib import metadata
from typing import TypeVar

from django.db import connections, models, router
from psycopg import pq

# The Django version the internals below were read against (tests/botapp/test_db.py fails on any
# other, listing RECHECK): `BaseDatabaseWrapper.health_check_enabled` / `health_check_done` (set
# by close_if_health_check_failed, read by ensure_connection), `Model._meta` and `from_db`.
DJANGO_CHECKED = "5.2.19"
RECHECK = (
    "django/db/backends/base/base.py: health_check_enabled, health_check_done, close_if_health_check_failed, "
    "ensure_connection (connections_quiet_trusted)",
    "django/db/models/base.py: Model.from_db; django/db/models/options.py: concrete_fields, pk (row_by, row_insert, row_update)",
)


def django_version() -> str:
    return metadata.version("Django")


M = TypeVar("M", bound=models.Model)


@functools.cache
def _compiled(model: type[models.Model], field: str, alias: str):
    if not model._meta.get_field(field).unique:
        raise ValueError(f"{model.__name__}.{field} is not unique: row_by returns one row")
    query = model._default_manager.filter(**{field: 0})[:1].query  # 0: a stand-in for the value
    compiler = query.get_compiler(using=alias)
    sql, params = compiler.as_sql()
    if len(params) != 1:
        raise ValueError(f"{model.__name__}.{field}: expected one parameter, the ORM made {params!r}")
    columns = [col for col, _, _ in compiler.select]
    names = [col.target.attname for col in columns]
    converters = compiler.get_converters(columns)
    return sql, names, list(converters.items())


def row_by(model: type[M], field: str, value) -> M | None:
    """The row of `model` whose unique `field` equals `value`, or None."""
    alias = router.db_for_read(model)
    sql, names, converters = _compiled(model, field, alias)
    connection = connections[alias]
    param = model._meta.get_field(field).get_db_prep_value(value, connection, prepared=False)
    with connection.cursor() as cursor:
        cursor.execute(sql, [param])
        row = cursor.fetchone()
    if row is None:
        return None
    if converters:
        row = list(row)
        for i, (functions, expression) in converters:
            for convert in functions:
                row[i] = convert(row[i], expression, connection)
    return model.from_db(alias, names, row)


@functools.cache
def _insert_sql(model: type[models.Model], alias: str):
    meta = model._meta
    if meta.parents or meta.pk not in meta.concrete_fields:
        raise ValueError(f"{model.__name__}: row_insert is for one table with its own primary key")
    fields = [f for f in meta.concrete_fields if f is not meta.pk]
    quote = connections[alias].ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {quote(meta.pk.column)}"
    )
    return sql, fields


def row_insert(obj: M) -> M:
    """`obj.save()` of a new row whose primary key the database gives, as one INSERT compiled
    once (`Model.objects.create` compiles it again on every call: more CPU than the round trip);
    in the caller's transaction when there is one. Sends no save signals: for models nothing
    listens to. Returns `obj`, saved (its primary key set)."""
    model = type(obj)
    alias = router.db_for_write(model)
    sql, fields = _insert_sql(model, alias)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(sql, [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])
        obj.pk = cursor.fetchone()[0]
    obj._state.adding, obj._state.db = False, alias
    return obj


@functools.cache
def _update_sql(model: type[models.Model], alias: str, names: tuple[str, ...], where: tuple[str, ...]):
    meta = model._meta
    quote = connections[alias].ops.quote_name
    fields = [meta.get_field(name) for name in names]
    conditions = [meta.pk, *(meta.get_field(name) for name in where)]
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
        f"WHERE {' AND '.join(f'{quote(f.column)} = %s' for f in conditions)}"
    )
    return sql, fields, conditions


def row_update(model: type[models.Model], pk, *, where: dict | None = None, **values) -> int:
    """`model.objects.filter(pk=pk, **where).update(**values)` for plain values and equalities, as
    one statement compiled once (see `row_insert`). Returns the rows updated (0 or 1)."""
    where = where or {}
    alias = router.db_for_write(model)
    sql, fields, conditions = _update_sql(model, alias, tuple(values), tuple(where))
    connection = connections[alias]
    params = [f.get_db_prep_save(values[f.name], connection) for f in fields]
    params += [f.get_db_prep_value(value, connection) for f, value in zip(conditions, [pk, *where.values()], strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _by_ids(model: type[models.Model], ids, statement):
    """Run `statement(connection, quote, table, where)` -> (sql, params) with the ids as one array
    literal after its params."""
    ids = list(ids)
    if not ids:
        return 0
    connection = connections[router.db_for_write(model)]
    quote, meta = connection.ops.quote_name, model._meta
    sql, params = statement(connection, quote, quote(meta.db_table), f"{quote(meta.pk.column)} = ANY(%s::bigint[])")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, "{" + ",".join(str(int(i)) for i in ids) + "}"])
        return cursor.rowcount


def ids_update(model: type[models.Model], ids, **values) -> int:
    """`model.objects.filter(pk__in=ids).update(**values)` (plain values only), as one statement
    with the ids as one array: for a sweep's batch of 500 ids, the ORM's IN list of 500 parameters
    cost more CPU (Django compiling it, psycopg splitting the query) than the database did."""

    def statement(connection, quote, table, where):
        fields = [model._meta.get_field(name) for name in values]
        sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
        return f"UPDATE {table} SET {sets} WHERE {where}", [f.get_db_prep_save(values[f.name], connection) for f in fields]

    return _by_ids(model, ids, statement)


def ids_delete(model: type[models.Model], ids) -> int:
    """`model.objects.filter(pk__in=ids).delete()` for a model nothing references and no signal
    watches, as one statement with the ids as one array (see `ids_update`)."""
    return _by_ids(model, ids, lambda connection, quote, table, where: (f"DELETE FROM {table} WHERE {where}", []))


def connections_quiet_trusted() -> None:
    """Django's CONN_HEALTH_CHECKS asks PostgreSQL "SELECT 1" before the first statement of every
    request, and runbot's every update is one (close_old_connections): a round trip per update,
    a ninth statement beside /start's eight. What ends a connection the database side (a backend
    terminated, PostgreSQL shut down or restarted, an idle timeout, a pooler restarted) first
    makes its socket readable: the server's FATAL message, or the connection's end. So an open,
    idle connection whose socket has nothing to read is taken as checked; one with anything to
    read gets Django's check (and is replaced if it fails). Call after close_old_connections()."""
    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        if raw is None or conn.health_check_done or not conn.health_check_enabled or conn.vendor != "postgresql":
            continue
        if raw.closed or raw.info.transaction_status != pq.TransactionStatus.IDLE:
            continue  # Django's own check decides
        poller = select.poll()  # not select.select: it refuses descriptors past 1023
        poller.register(raw.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        if not poller.poll(0):
            conn.health_check_done = True
