"""Settings of the streaming process (`manage.py stream`, config/asgi_stream.py): the project's,
with the stream origin's own addresses (botapp/stream/urls.py: nothing of the console) and only the
middleware that origin needs (no sessions, no log-in, no CSRF: its links are signed)."""

from urllib.parse import urlsplit

from config.settings import *  # noqa: F403
from config.settings import ALLOWED_HOSTS, STREAM_PUBLIC_URL

ROOT_URLCONF = "botapp.stream.urls"
MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]
if STREAM_PUBLIC_URL and urlsplit(STREAM_PUBLIC_URL).hostname:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, urlsplit(STREAM_PUBLIC_URL).hostname]
# Django's async views reach the database from a thread of each request's own (asgiref's
# ThreadSensitiveContext): a connection kept past its request would stay open in a thread that is
# gone, one per request, until PostgreSQL refuses more. Each request closes its own.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
