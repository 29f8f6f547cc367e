"""`Authorization: Bearer <token>`, scopes, and the per-client rate limit."""

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from redis import RedisError
from rest_framework import authentication, exceptions, permissions, throttling

from api.clients import apiclient_authenticate
from api.models import ApiClient
from botapp.cache import cache_answered, cache_failed, cache_usable


class BearerAuthentication(authentication.BaseAuthentication):
    """A wrong, revoked or malformed token is 401; no header leaves the request anonymous, which
    every view refuses with 401 (the `WWW-Authenticate` header below makes DRF answer 401, not 403)."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise exceptions.AuthenticationFailed("Send Authorization: Bearer <token>.")
        client = apiclient_authenticate(token=token.strip())
        if client is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        return client, client

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class HasScope(permissions.BasePermission):
    """Reading takes the read scope, anything else the write scope. Staff signed in to the admin
    with the API permission may read the schema and the docs (SchemaAccess)."""

    message = "This token lacks the scope for this request."

    def has_permission(self, request, view):
        client = request.auth
        if not isinstance(client, ApiClient):
            return False
        needed = ApiClient.Scope.READ if request.method in permissions.SAFE_METHODS else ApiClient.Scope.WRITE
        if needed not in client.scope_set:
            self.message = f"This token lacks the {needed} scope."
            return False
        return True


class SchemaAccess(permissions.BasePermission):
    """The schema and the docs: a client with the read scope, or staff signed in to the admin whose
    account may see the API's clients (the API permission: "Can view API client"). A staff account
    without it gets 403: the schema maps every endpoint, which is no business of, say, an operator
    who only moderates users."""

    PERMISSION = "api.view_apiclient"

    def has_permission(self, request, view):
        if isinstance(request.auth, ApiClient):
            return ApiClient.Scope.READ in request.auth.scope_set
        user = request.user
        return bool(user and user.is_active and user.is_staff and user.has_perm(self.PERMISSION))


class ClientRateThrottle(throttling.SimpleRateThrottle):
    """Requests per client, counted in the shared cache (Redis), so every web process counts
    together: the client's own `rate`, or API_RATE. Over it: 429 with Retry-After."""

    scope = "client"

    def __init__(self):
        pass  # the rate depends on the client: parsed in allow_request

    def allow_request(self, request, view):
        client = request.auth
        if not isinstance(client, ApiClient):
            return True
        self.rate = client.rate or settings.API_RATE
        self.num_requests, self.duration = self.parse_rate(self.rate)
        # The API keeps working without Redis: requests go uncounted while the cache is unreachable
        # (botapp.cache: not asked again for a while after a failure); /health/ says it is degraded.
        if not cache_usable():
            return True
        try:
            allowed = super().allow_request(request, view)
        except RedisError as exc:
            cache_failed(exc, f"API rate limit of client {client.pk} not counted")
            return True
        cache_answered()
        return allowed

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class BearerScheme(OpenApiAuthenticationExtension):
    """How the schema names the authentication: an HTTP bearer token."""

    target_class = "api.authentication.BearerAuthentication"
    name = "bearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A client's token: manage.py apiclient_create NAME"}
