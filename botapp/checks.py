"""System checks (`manage.py check`, and every command that runs them): Courier's SQL is written for
PostgreSQL (arrays, `unnest`, `DISTINCT ON`, `SKIP LOCKED`), in production, tests and the sandbox alike."""

from django.core.checks import Error, register
from django.db import connections


@register("database")
def database_is_postgresql(app_configs=None, databases=None, **kwargs):
    """Another engine would fail later, on the first sweep or broadcast; say so now."""
    return [
        Error(
            f"DATABASES[{alias!r}] uses {connections[alias].vendor}; Courier needs PostgreSQL.",
            hint="Set DATABASE_URL=postgres://user@host:5432/courier (see .env.example).",
            id="botapp.E001",
        )
        for alias in connections
        if connections[alias].vendor != "postgresql"
    ]
