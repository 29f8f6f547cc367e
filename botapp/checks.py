"""System checks (`manage.py check`, and every command that runs them): Courier's SQL is written for
PostgreSQL (arrays, `unnest`, `DISTINCT ON`, `SKIP LOCKED`), in production, tests and the sandbox alike."""

from django.conf import settings
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


@register()
def telegram_limits_are_sane(app_configs=None, **kwargs):
    """The send limits every process shares: a headroom over 1 or a span under a second lets more
    through than Telegram allows (FloodWaits for every sender); a rate of 0 sends nothing."""
    problems = []
    for name in ("TELEGRAM_RATE", "TELEGRAM_PAID_RATE"):
        if not getattr(settings, name) > 0:
            problems.append(f"{name} must be above 0 (messages per second Telegram allows).")
    for name in ("TELEGRAM_RATE_HEADROOM", "TELEGRAM_PAID_RATE_HEADROOM"):
        if not 0 < getattr(settings, name) <= 1:
            problems.append(f"{name} must be above 0 and at most 1 (the fraction of the rate paced).")
    if not 1 <= settings.TELEGRAM_RATE_SPAN <= 2:
        problems.append("TELEGRAM_RATE_SPAN must be from 1 to 2 seconds (Telegram counts any second).")
    if not 1 <= settings.TELEGRAM_FREE_RATE_SPAN <= 2:
        problems.append("TELEGRAM_FREE_RATE_SPAN must be from 1 to 2 seconds (Telegram counts any second).")
    return [Error(problem, id="botapp.E003") for problem in problems]
