"""System checks (`manage.py check`, and every command that runs them): Courier's SQL is written for
PostgreSQL (arrays, `unnest`, `DISTINCT ON`, `SKIP LOCKED`), in production, tests and the sandbox alike."""

from django.core.checks import Error, register
from django.db import connections

from botapp.config import secret_key_problem


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


@register()
def secret_key_is_set(app_configs=None, **kwargs):
    """With DEBUG=0 an empty SECRET_KEY passes Django's own checks and fails at the first signing
    (a login, a tracked button): refuse to start instead, naming the variable."""
    problem = secret_key_problem()
    return [Error(problem, id="botapp.E002")] if problem else []
