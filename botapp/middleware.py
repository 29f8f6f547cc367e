"""Who acts in a web request, for the audit trail (botapp/services/audit.py): the operator signed in
to the console, or the API client whose token authenticated the request, and the client's address
(as login throttling reads it: PROXY_COUNT). The user is asked when an entry is written, since the
API authenticates inside its views, after this middleware ran."""

from botapp.addresses import client_ip
from botapp.models import AuditEntry
from botapp.services.audit import AuditContext, audit_context


def request_actor(request) -> tuple[str, str]:
    """(who, via) for a request: an API client reads as api:<name>."""
    user = getattr(request, "user", None)
    via = AuditEntry.Via.API if request.path.startswith("/api/") else AuditEntry.Via.CONSOLE
    if user is None or not getattr(user, "is_authenticated", False):
        return "anonymous", via
    if hasattr(user, "get_username"):
        return user.get_username(), via
    return f"api:{user}", AuditEntry.Via.API  # an ApiClient (api/models.py), never a console user


class AuditContextMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        context = AuditContext(actor=lambda: request_actor(request), address=client_ip(request))
        with audit_context(context=context):
            return self.get_response(request)
