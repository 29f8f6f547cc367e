"""Error reports to Sentry (or any server speaking its protocol, such as GlitchTip), when SENTRY_DSN
is set; nothing at all when it is not.

Every process reports: the web (Django integration), Celery workers and beat (Celery integration),
runbot and management commands (logging: an ERROR logged with an exception becomes an event). A job
run's report carries the job's name (tag `job`, scheduler/jobs/registry.py), an update's the kind
and ids of the update (runbot's UpdatePump), never its text.

What leaves the host is scrubbed (`scrub`): local variables and log lines are not sent at all (a
handler's locals hold what users wrote); the values of secret settings, anything shaped like a bot token and a
shortener's `api=` key are replaced wherever they appear; fields that hold what users wrote or who
they are (text, caption, names) are blanked.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import sentry_sdk
from django.conf import settings
from sentry_sdk.integrations.celery import CeleryIntegration
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.integrations.logging import LoggingIntegration

FILTERED = "[Filtered]"
# Settings whose values never leave the host, wherever they turn up (a message, a URL, a log line).
SECRET_SETTINGS = (
    "SECRET_KEY",
    "BOT_TOKEN",
    "API_HASH",
    "METRICS_TOKEN",
    "S3_SECRET_ACCESS_KEY",
    "S3_ACCESS_KEY_ID",
    "SENTRY_DSN",
)
BOT_TOKEN_SHAPE = re.compile(r"\b\d{5,}:[A-Za-z0-9_-]{30,}\b")
API_KEY_PARAM = re.compile(r"(?i)\b(api|api_key|key|token)=[^&\s'\"()<>]+")
# Keys whose values are what a user wrote or who they are.
USER_FIELDS = {"text", "caption", "html", "first_name", "last_name", "username", "message_text", "welcome_text"}


def error_reports_init(*, dsn: str, environment: str, release: str = "", transport: Any = None) -> None:
    """Report errors of this process to `dsn`. `transport`: where events go instead of the network
    (tests)."""
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        release=release or None,
        # An ERROR logged with an exception becomes an event; log lines are not kept as breadcrumbs
        # (a library's debug lines may quote what users wrote).
        integrations=[DjangoIntegration(), CeleryIntegration(), LoggingIntegration(level=None, event_level=logging.ERROR)],
        data_collection={
            "user_info": False,  # no operator names or addresses from requests
            "http_bodies": [],  # API bodies hold message texts
            "stack_frame_variables": False,  # a handler's locals hold what users wrote
            "database_query_data": False,  # query parameters hold them too
            "queues": False,  # task arguments
        },
        traces_sample_rate=0.0,  # errors only: performance goes to /metrics
        before_send=scrub,
        before_breadcrumb=lambda crumb, hint: _clean(crumb, _secrets()),
        max_value_length=2048,
        transport=transport,
    )


def scrub(event: dict, hint: dict | None = None) -> dict:
    """The event with every secret value, token-shaped string and user-written field replaced, and
    the texts of the update it happened in (runbot's UpdatePump names them under the extra
    ERROR_REPORTS_TEXTS_EXTRA)."""
    extra = (event.get("extra") or {}).pop(settings.ERROR_REPORTS_TEXTS_EXTRA, None)
    hidden = [t for t in extra or [] if isinstance(t, str) and t.strip()]
    return _clean(event, sorted(_secrets() + hidden, key=len, reverse=True))


def _secrets() -> list[str]:
    values = []
    for name in SECRET_SETTINGS:
        try:
            value = str(getattr(settings, name, "") or "")
        except Exception:  # noqa: BLE001 - Django refuses an empty SECRET_KEY: nothing to hide then
            continue
        if len(value) >= 8:  # a short value would blank ordinary words
            values.append(value)
    return sorted(values, key=len, reverse=True)


def _clean(value: Any, secrets: list[str], key: str = "") -> Any:
    if key in USER_FIELDS and value:
        return FILTERED
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, FILTERED)
        value = BOT_TOKEN_SHAPE.sub(FILTERED, value)
        return API_KEY_PARAM.sub(lambda m: f"{m.group(1)}={FILTERED}", value)
    if isinstance(value, dict):
        return {k: _clean(v, secrets, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, secrets) for v in value]
    return value
