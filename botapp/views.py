import logging

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpResponseNotFound, HttpResponseRedirect, JsonResponse
from django.views.decorators.http import require_GET

from botapp.services.outgoing import click_record

log = logging.getLogger(__name__)


def health(request):
    """For load balancers and uptime checks: "ok" or "error" per dependency, and 503 unless the
    database answers (the web process cannot work without it). Redis down leaves the admin usable
    but stops broadcasts, so it shows without failing the check. No internals: the reason goes to
    the log, not to whoever asks."""
    checks = {"database": _probe("database", _database_ok), "redis": _probe("redis", _redis_ok)}
    status = 200 if checks["database"] == "ok" else 503
    return JsonResponse({"status": "ok" if status == 200 else "error", **checks}, status=status)


def _probe(name: str, check) -> str:
    try:
        check()
    except Exception:  # any failure of the dependency means "not healthy"
        log.exception("health: %s is not answering", name)
        return "error"
    return "ok"


def _database_ok() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis_ok() -> None:
    redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1, retry=None).ping()


@require_GET
def go(request, token: str):
    """A tracked button: record the click, then send the user on to the link."""
    target = click_record(token=token)
    if target is None:
        return HttpResponseNotFound("This link is not valid.")
    return HttpResponseRedirect(target)
