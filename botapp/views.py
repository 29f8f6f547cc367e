import hmac
import logging
import math
import os

import redis
from django.conf import settings
from django.contrib import admin
from django.db import connection
from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily

from botapp import clock
from botapp.addresses import client_ip
from botapp.login_throttle import Lock, login_lock
from botapp.models import BotSettings
from botapp.services.backlog import backlog_read
from botapp.services.outgoing import ClickLinkExpired, click_record

log = logging.getLogger(__name__)


def health(request):
    """For load balancers and uptime checks: "ok" or "error" per dependency, and 503 unless the
    database answers (the web process cannot work without it). Redis down leaves the admin and the
    API usable (the API's rate limit goes uncounted) but stops broadcasts and the limiter: the
    status says "degraded" and `degraded` names what, without failing the check. No internals:
    the reason goes to the log, not to whoever asks."""
    checks = {"database": _probe("database", _database_ok), "redis": _probe("redis", _redis_ok)}
    status = 200 if checks["database"] == "ok" else 503
    degraded = [name for name, state in checks.items() if state != "ok"]
    overall = "error" if status != 200 else "degraded" if degraded else "ok"
    body = {"status": overall, **checks} | ({"degraded": degraded} if overall == "degraded" else {})
    return JsonResponse(body, status=status)


def server_error(request):
    """The 500 page (config/urls.py handler500): JSON under /api/, where every answer is JSON."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error: it was logged. Try again later."}, status=500)
    return defaults.server_error(request)


def permission_denied(request, exception=None):
    """The 403 page (config/urls.py handler403): the console's frame with why and what to do
    (the refusal's own words when it has some), JSON under /api/ as every answer there."""
    reason = str(exception or "")
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason or "You do not have permission to do this."}, status=403)
    context = {**admin.site.each_context(request), "reason": reason}  # the console's frame, the operator's menu
    return render(request, "403.html", context, status=403)


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
    """A tracked button: record the click, then send the user on to the link. An http(s) link is a
    redirect; a tg:// link (Django will not redirect to another scheme) is a page that opens it at
    once and offers it to tap, should the browser want a tap before opening an app. An expired or
    forged link gets a page saying so, with the way back to the bot."""
    try:
        target = click_record(token=token)
    except ClickLinkExpired:
        return _click_page(request, "expired", status=410)
    if target is None:
        return _click_page(request, "invalid", status=404)
    if target.lower().startswith("tg://"):
        return _click_page(request, "open", target=target)
    return HttpResponseRedirect(target)


def _click_page(request, state: str, *, target: str = "", status: int = 200):
    username = BotSettings.load().bot_username
    context = {"state": state, "target": target, "days": settings.CLICK_LINK_DAYS, "bot": username}
    return render(request, "click_link.html", context, status=status)


def login_locked_out(request, response=None, credentials=None):
    """django-axes' answer to a locked-out log-in: the login page the admin just rendered, its
    error replaced by the reason and when log-in opens again (HTTP 429, with Retry-After). Any
    login template works, themed or not, as long as it shows the form's errors."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    lock = login_lock(username=username, ip_address=getattr(request, "axes_ip_address", None))
    message = _lockout_message(lock)
    form = getattr(response, "context_data", None) and response.context_data.get("form")
    if form is None or not hasattr(form, "add_error"):
        locked = render(request, "login_locked.html", {"message": message}, status=429)
    else:
        form.errors.clear()
        form.add_error(None, message)
        locked = TemplateResponse(request, response.template_name, response.context_data, status=429).render()
    wait = (lock.until - timezone.now()).total_seconds() if lock else settings.AXES_COOLOFF_TIME.total_seconds()
    locked["Retry-After"] = str(max(1, math.ceil(wait)))
    return locked


def _lockout_message(lock: Lock | None) -> str:
    if lock is None:
        when = f"for {int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)} minutes"
    else:
        until = timezone.localtime(lock.until)
        day = "" if until.date() == timezone.localdate() else f"{until:%d %b} "
        when = f"until {day}{until:%H:%M} ({until.tzname()})"
    if lock is not None and lock.by_address:
        return (
            f"Too many failed log-ins from your address: log-in is locked {when} for every user name. "
            "Attempts until then are refused, even with the right password. "
            "An administrator can lift the lock sooner."
        )
    return (
        f"Too many failed log-ins with this user name from your address: log-in is locked {when}. "
        "Attempts until then are refused, even with the right password. "
        "An administrator can lift the lock sooner."
    )


def metrics(request):
    """Prometheus' text format: what every process counted (multiprocess mode, botapp/metrics.py)
    and the work waiting in the database. Off (404) unless METRICS_TOKEN or METRICS_ALLOWED_IPS is
    set; then a request needs `Authorization: Bearer <METRICS_TOKEN>` or an allowed address."""
    token, addresses = settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS
    if not (token or addresses):
        return HttpResponse("Not found\n", status=404, content_type="text/plain")
    given = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
    if not ((token and hmac.compare_digest(given, token)) or (addresses and client_ip(request) in addresses)):
        return HttpResponse("Unauthorized\n", status=401, content_type="text/plain", headers={"WWW-Authenticate": "Bearer"})
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        log.error("/metrics is enabled but PROMETHEUS_MULTIPROC_DIR is not set: the processes' counts cannot be added up")
        return HttpResponse("PROMETHEUS_MULTIPROC_DIR is not set\n", status=503, content_type="text/plain")

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(_BacklogCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class _BacklogCollector:
    """The database's queues, read at scrape time (botapp/services/backlog.py)."""

    def collect(self):
        rows = GaugeMetricFamily("courier_backlog_rows", "Rows due now and not done, by queue", labels=["queue"])
        late = GaugeMetricFamily(
            "courier_backlog_oldest_late_seconds", "How long the oldest row due has been waiting, by queue", labels=["queue"]
        )
        for b in backlog_read(now=clock.now()):
            rows.add_metric([b.queue], b.rows)
            late.add_metric([b.queue], b.late_seconds)
        yield rows
        yield late
