"""Settings of the streaming process (`manage.py stream`, config/asgi_stream.py): the project's,
with the stream origin's own addresses (botapp/stream/urls.py: nothing of the console) and only the
middleware that origin needs (no sessions, no log-in, no CSRF: its links are signed)."""

from urllib.parse import urlsplit

from config.settings import *  # noqa: F403
from config.settings import ALLOWED_HOSTS, STREAM_PUBLIC_URL

ROOT_URLCONF = "botapp.stream.urls"
# Only the apps whose models and templates the stream origin uses: none of the console's (its
# admin, theme, API, log-in guards), whose modules would all be imported (the admin's autodiscovery)
# into every streaming process's memory for nothing.
CONSOLE_APPS = {
    "unfold", "unfold.contrib.filters", "django.contrib.admin", "django.contrib.sessions", "django.contrib.messages",
    "django.contrib.staticfiles", "axes", "django_otp", "django_otp.plugins.otp_totp", "rest_framework",
    "drf_spectacular", "drf_spectacular_sidecar",
}  # fmt: skip
INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in CONSOLE_APPS]  # noqa: F405
MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]
if STREAM_PUBLIC_URL and urlsplit(STREAM_PUBLIC_URL).hostname:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, urlsplit(STREAM_PUBLIC_URL).hostname]
# Django's async views reach the database from a thread of each request's own (asgiref's
# ThreadSensitiveContext): a connection kept past its request would stay open in a thread that is
# gone, one per request, until PostgreSQL refuses more. So each request closes its own, and the
# closing gives it back to a pool (psycopg_pool, Django's "pool" option), where the next request
# takes it: a link check costs a query, not a new PostgreSQL connection (its log-in and set-up).
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405 - the pool keeps them instead
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {  # noqa: F405
    "min_size": 1,
    "max_size": env.int("STREAM_DB_POOL_MAX", default=10),  # noqa: F405
    "timeout": 10,  # seconds a request waits for a free connection before its 500
}
