"""Who is asking: a request's client address, behind the proxies the operator runs. Its own module
so that the streaming process (botapp/stream/) reads it without the console's views and log-in
guards."""

from __future__ import annotations

from django.conf import settings


def client_ip(request) -> str | None:
    """The visitor's address (login throttling, the audit trail, per-address stream limits): with
    PROXY_COUNT proxies in front of the server, the address the outermost of them appended to
    X-Forwarded-For (the PROXY_COUNT-th from the right; what a client wrote to the left of it is
    not trusted); otherwise the connection's own."""
    if settings.PROXY_COUNT:
        hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
        if len(hops) >= settings.PROXY_COUNT:
            return hops[-settings.PROXY_COUNT]
    return request.META.get("REMOTE_ADDR")
