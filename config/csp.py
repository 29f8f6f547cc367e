"""The Content-Security-Policy header on every response (Django 5.2 has no CSP support of its own;
a few lines here instead of a dependency). The policy is settings.CONTENT_SECURITY_POLICY."""

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    """Adds the policy to each response that does not carry one already."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY:
            response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response
