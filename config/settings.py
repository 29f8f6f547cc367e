"""Courier settings. Everything an operator changes comes from the environment (12-factor);
see .env.example for every variable. Nothing here talks to the network at import time."""

import sys
from datetime import timedelta
from pathlib import Path

import environ
from django.urls import reverse_lazy

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# Empty in production means "not configured": Django refuses to start anything that needs it
# and names SECRET_KEY. Development (DEBUG=1) gets a throwaway key.
SECRET_KEY = env("SECRET_KEY", default="dev-only-insecure-key-do-not-use-in-production" if DEBUG else "")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# The public https address of the web process (e.g. https://courier.example.com): tracked buttons
# send users through PUBLIC_URL/go/... Empty: buttons cannot be tracked.
# BASE_URL: the scheduled-message system's name for it (botapp/config.py ENV_ALIASES; doctor names it).
PUBLIC_URL = env("PUBLIC_URL", default="") or env("BASE_URL", default="")
# A tracked button's redirect works this many days after its message was sent; later it shows a
# page saying so and records nothing.
CLICK_LINK_DAYS = env.int("CLICK_LINK_DAYS", default=30)
# --- Stream and download links (botapp/stream/, `manage.py stream`; docs/operating.md). The public
# address of the streaming process, an origin of its own (e.g. https://files.example.com): never the
# console's, so a stored file can never run as a page of the console. Empty: no stream links.
STREAM_PUBLIC_URL = env("STREAM_PUBLIC_URL", default="")
# Streams open at once (GET of the bytes; the player page and HEAD take none): per user a link was
# given to, per client address, and in all (every streaming process together, counted in Redis).
STREAM_MAX_PER_USER = env.int("STREAM_MAX_PER_USER", default=3)
STREAM_MAX_PER_ADDRESS = env.int("STREAM_MAX_PER_ADDRESS", default=6)
STREAM_MAX_TOTAL = env.int("STREAM_MAX_TOTAL", default=200)
# More bot tokens for the streaming process to read files with (comma-separated), each bot an admin
# of the storage channel; each stream goes to the least loaded. BOT_TOKEN's bot always reads too.
STREAM_BOT_TOKENS = env.list("STREAM_BOT_TOKENS", default=[])
# MiB of file parts one streaming process reads ahead for its streams, all together: each stream
# always reads its next part (1 MiB at most), and up to 5 more ahead while this lasts. A process's
# memory for parts is then at most about 1 MiB per open stream plus this.
STREAM_READ_AHEAD_MB = env.int("STREAM_READ_AHEAD_MB", default=128)

INSTALLED_APPS = [
    # The console's theme (django-unfold): before django.contrib.admin, whose templates it replaces.
    "unfold",
    "unfold.contrib.filters",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "botapp",
    "scheduler",
    "api",
]  # and `offline` where it is used: OFFLINE_TOOLING, below

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",  # request.user.is_verified(): the session passed its TOTP code
    "botapp.admin.two_factor.TwoFactorMiddleware",  # the code page before the console, for accounts with 2FA
    "botapp.middleware.AuditContextMiddleware",  # who and where, for the audit trail (after the user is known)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: turns a lock-out into its page
]

# --- Login throttling (django-axes): LOGIN_FAILURE_LIMIT failed log-ins with one user name from one
# address lock that pair out for LOGIN_COOLOFF_MINUTES (counted from the lock-out: attempts while
# locked, the right password included, are refused and do not extend it), and
# LOGIN_ADDRESS_FAILURE_LIMIT failed log-ins from one address, whatever the user names, lock that
# address (password spraying: botapp/login_throttle.py). Attempts are kept in the
# database, so every gunicorn worker and every web process sees the same count (a per-process
# cache would give each worker its own limit). The lock-out answer is the admin's login page with
# the reason (botapp/views.py). Unlock early: python manage.py axes_reset_username NAME.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Where a log-in without ?next= lands: the console's home (unfold's login form posts no `next`, and
# Django's default, /accounts/profile/, does not exist here).
LOGIN_REDIRECT_URL = "admin:index"
AXES_HANDLER = "botapp.login_throttle.LoginThrottle"  # axes' database handler and the address lock
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
# Several operators behind one office address have room for their typos: four times a name's limit.
LOGIN_ADDRESS_FAILURE_LIMIT = env.int("LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_COOLOFF_MINUTES", default=30))
# One user name from one address: a stranger elsewhere cannot lock an operator out by guessing (the
# address lock holds only that address).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a typo now and then never adds up to a lock-out
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "botapp.views.login_locked_out"
AXES_CLIENT_IP_CALLABLE = "botapp.addresses.client_ip"
AXES_VERBOSE = False  # no banner from every process at start; failures and lock-outs are still logged
# --- Two-factor log-in (django-otp, TOTP; botapp/admin/two_factor.py): optional for every console
# account, set up at /account/two-factor/; with TOTP_REQUIRED_FOR_SUPERUSERS, required of superusers.
TOTP_REQUIRED_FOR_SUPERUSERS = env.bool("TOTP_REQUIRED_FOR_SUPERUSERS", default=False)
OTP_TOTP_ISSUER = "Courier"  # the name authenticator apps show beside the account
# Reverse proxies in front of gunicorn that append the client's address to X-Forwarded-For (nginx:
# proxy_add_x_forwarded_for). 0: the connection's own address. Behind a proxy, leaving it 0 makes
# every visitor the proxy's address, and one user name's lock-out everyone's.
PROXY_COUNT = env.int("PROXY_COUNT", default=0)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PostgreSQL only (botapp/checks.py): the hot SQL uses arrays, unnest, DISTINCT ON and SKIP LOCKED.
DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/courier")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")

# --- Cache: Django's RedisCache on REDIS_URL, shared by every process. runbot reads Bot settings
# from it on every /start (BotSettings.save() invalidates it). Keys start with CACHE_KEY_PREFIX,
# so several deployments can share one Redis. CACHE_URL=locmemcache:// keeps the cache inside the
# process (the one-process sandbox, which needs no Redis).
CACHE_URL = env("CACHE_URL", default="") or REDIS_URL
CACHE_KEY_PREFIX = env("CACHE_KEY_PREFIX", default="") or "courier"
if CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {
        "default": {
            "BACKEND": "botapp.cache.SharedClientRedisCache",  # Django's, one client per pool
            "LOCATION": CACHE_URL,
            # A Redis that accepts connections and never answers costs a call 1.5 s, like the
            # limiter's (redis-py's default is 5 s): its users then fall back to the database.
            "OPTIONS": {"socket_timeout": 1.5, "socket_connect_timeout": 1.5},
        }
    }
else:
    CACHES = {"default": env.cache_url_config(CACHE_URL)}
CACHES["default"].update(KEY_PREFIX=CACHE_KEY_PREFIX, TIMEOUT=300)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = "config.formats"  # the console's short dates (2026-05-01 14:30)

# Files kept by the default storage: attachments uploaded through the API, until (and after) the
# sender has uploaded them to Telegram. A local folder (MEDIA_ROOT), which only processes of this
# host can read; or, when S3_BUCKET is set, an S3-compatible bucket (django-storages) that every
# process on every host reads: AWS S3, MinIO, Cloudflare R2, Backblaze B2, ... (S3_ENDPOINT_URL
# for any but AWS). docs/operating.md, "Media".
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))
S3_BUCKET = env("S3_BUCKET", default="")
S3_ENDPOINT_URL = env("S3_ENDPOINT_URL", default="")
S3_REGION = env("S3_REGION", default="")
S3_ACCESS_KEY_ID = env("S3_ACCESS_KEY_ID", default="")
S3_SECRET_ACCESS_KEY = env("S3_SECRET_ACCESS_KEY", default="")
S3_PREFIX = env("S3_PREFIX", default="media")  # a folder of the bucket, so that one bucket can serve several

# Django's two upload handlers, each also keeping the name the client gave (config/uploads.py).
FILE_UPLOAD_HANDLERS = ["config.uploads.GivenNameMemoryUploadHandler", "config.uploads.GivenNameTemporaryUploadHandler"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    if not S3_BUCKET
    else {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": S3_BUCKET,
            "endpoint_url": S3_ENDPOINT_URL or None,
            "region_name": S3_REGION or None,
            # Empty: boto3's own chain (AWS_* variables, an instance role, ~/.aws).
            "access_key": S3_ACCESS_KEY_ID or None,
            "secret_key": S3_SECRET_ACCESS_KEY or None,
            "location": S3_PREFIX,
            "default_acl": None,  # private: files are read by our processes, never served from the bucket
            "file_overwrite": False,  # two uploads with one name keep both
        },
    },
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- HTTP API (/api/v1/, api/): Bearer tokens per client, scopes, a rate per client counted in the
# shared cache (Redis). Nothing is anonymous.
API_RATE = env("API_RATE", default="120/min")
# Where the scheduled-message API's clients (shared/seeds/003) find all its paths, its root `/`
# included (`/` itself is the console's): docs/api.md#moved-in-clients. Empty: its root nowhere.
LEGACY_API_PREFIX = env("LEGACY_API_PREFIX", default="legacy")
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.authentication.BearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.authentication.HasScope"],
    "DEFAULT_THROTTLE_CLASSES": ["api.authentication.ClientRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.errors.JSONParser"],
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Courier API",
    "DESCRIPTION": "Scheduled messages, users, files, broadcasts and scheduler statistics. "
    "Every request carries Authorization: Bearer <token> (python manage.py apiclient_create NAME).",
    "VERSION": "1",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "BroadcastStatusEnum": "botapp.models.Broadcast.Status",
        "ResultStatusEnum": "botapp.models.BroadcastDelivery.Status",
        "UserStateEnum": "botapp.models.TelegramUser.State",
    },
    # Swagger UI from the installed package, not from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
}

# --- Production hardening: with DEBUG=0, `python manage.py check --deploy` reports only W021 (HSTS
# preload), a commitment the operator opts into with SECURE_HSTS_PRELOAD=1; then it is clean. ---
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^health/$", r"^metrics$"]  # probes from inside the network, plain http
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

# --- Content-Security-Policy (config/csp.py), on every response. Everything comes from this origin
# (static files, htmx's requests, Swagger UI from its installed package). The console (django-unfold)
# needs two allowances: Alpine.js evaluates its x-data/x-on expressions with Function(), which is
# 'unsafe-eval' (unfold ships Alpine's standard build, not its CSP build), and its templates and ours
# use style attributes ('unsafe-inline' for styles only). No inline script is allowed. tests/browser
# fails on any violation the browser reports. ---
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

# LOG_FORMAT=json: one JSON object per line (timestamp, level, logger, message, and the traceback
# of an exception), for log shippers (journald, Loki, Elasticsearch ...); plain lines otherwise.
LOG_FORMAT = env("LOG_FORMAT", default="plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger", "process": "pid"},
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json" if LOG_FORMAT == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"pyrogram": {"level": "WARNING"}},
}

# --- Telegram. Validated by `runbot` (botapp/config.py), which names every bad variable. ---
BOT_TOKEN = env("BOT_TOKEN", default="")
API_ID = env("API_ID", default="")
API_HASH = env("API_HASH", default="")
ADMIN_IDS = env("ADMIN_IDS", default="")
STORAGE_CHANNEL_ID = env("STORAGE_CHANNEL_ID", default="")
# A channel whose posts starting with the marker (Bot settings) are broadcast to every active user.
BROADCAST_CHANNEL_ID = env("BROADCAST_CHANNEL_ID", default="")
TELEGRAM_SESSION_DIR = Path(env("TELEGRAM_SESSION_DIR", default=str(VAR_DIR / "sessions")))
# Workers use the in-memory Telegram instead (to watch the job pipeline without a bot), and the offline
# tooling is installed (OFFLINE_TOOLING, below). Never in production.
TELEGRAM_OFFLINE = env.bool("TELEGRAM_OFFLINE", default=False)
# Where `manage.py telegram_server` (the in-memory Telegram) listens; offline runbot and workers connect here.
TELEGRAM_OFFLINE_SOCKET = Path(env("TELEGRAM_OFFLINE_SOCKET", default=str(VAR_DIR / "telegram.sock")))
# What builds an offline client's connection and storage (the tooling's; production never imports it).
TELEGRAM_OFFLINE_CONNECTION = "offline.telegram.connection.offline_client_options"
# The offline tooling (the sandbox and the in-memory Telegram: `manage.py sandbox`, `manage.py
# telegram_server`) is an installed app only where it is used: with TELEGRAM_OFFLINE, in a
# manage.py running one of its commands, and under pytest. Production's processes never load it.
OFFLINE_COMMANDS = ("sandbox", "telegram_server")
_command = sys.argv[1] if len(sys.argv) > 1 else ""  # manage.py's (gunicorn's and celery's are no command)
OFFLINE_TOOLING = TELEGRAM_OFFLINE or _command in OFFLINE_COMMANDS or "pytest" in sys.modules
if OFFLINE_TOOLING:
    INSTALLED_APPS.append("offline")

# --- Celery: JSON only; schedules live in the database (django-celery-beat). ---
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_ENABLE_UTC = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=300)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=360)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# "Run now" and "Start sending" answer quickly when Redis is down (they say so; beat catches up).
CELERY_BROKER_CONNECTION_TIMEOUT = env.float("CELERY_BROKER_CONNECTION_TIMEOUT", default=2.0)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
DJANGO_CELERY_BEAT_TZ_AWARE = True

# --- Background jobs ---
# The bot, each worker and beat record a heartbeat this often; one silent for three intervals is
# shown as stopped on the dashboard and the jobs page.
HEARTBEAT_SECONDS = env.float("HEARTBEAT_SECONDS", default=15.0)
TOKEN_RETENTION_DAYS = env.int("TOKEN_RETENTION_DAYS", default=7)

# --- Telegram send limits, shared by every process through Redis (botapp/telegram/limiter.py) ---
TELEGRAM_RATE = env.float("TELEGRAM_RATE", default=30.0)
# Pace this fraction of the rate, evenly; and admit each call only if no span of TELEGRAM_RATE_SPAN
# seconds holds more than the rate itself. Telegram counts any second when requests arrive; the
# span's extra 40 ms covers the network's jitter and a sender that wakes late (docs/design.md).
# The pace stays under rate / span (0.96 of it) so the windows rarely have to hold a call back.
TELEGRAM_RATE_HEADROOM = env.float("TELEGRAM_RATE_HEADROOM", default=0.96)
TELEGRAM_RATE_SPAN = env.float("TELEGRAM_RATE_SPAN", default=1.04)
# Sends a worker keeps in flight at once; None: as many as the rate needs while each waits for
# its answer (scheduler/jobs/sweep.py, `sends_in_flight`). Not an operator's setting: the sandbox
# sets 1, so sends due together go out in their claim's order and its transcripts repeat.
SENDS_IN_FLIGHT: int | None = None
TELEGRAM_PAID_BROADCASTS = env.bool("TELEGRAM_PAID_BROADCASTS", default=False)
TELEGRAM_PAID_RATE = env.float("TELEGRAM_PAID_RATE", default=1000.0)
TELEGRAM_PAID_RATE_HEADROOM = env.float("TELEGRAM_PAID_RATE_HEADROOM", default=0.96)
# With paid broadcasts on, the free 30/s are admitted over this longer span: a worker's 1000/s on
# one connection and runbot's replies on another reach Telegram interleaved, and a reply counted a
# little after its arrival stays in Telegram's second longer than in ours; when a burst of file
# answers keeps the free budget full, TELEGRAM_RATE_SPAN's room was not enough (docs/benchmarks.md).
TELEGRAM_FREE_RATE_SPAN = env.float("TELEGRAM_FREE_RATE_SPAN", default=1.12)
# A send whose outcome is unknown (a worker killed mid-call, an answer lost) is sent again with the
# same random_id, which Telegram refuses to deliver twice, for this many seconds after its first
# attempt; later it is recorded `interrupted`. How long Telegram remembers a random_id is not
# documented: ten minutes is inferred (docs/reliability.md), and the in-memory Telegram remembers
# no longer (inmemory_telegram/core.py RANDOM_ID_MEMORY).
TELEGRAM_RANDOM_ID_WINDOW = env.int("TELEGRAM_RANDOM_ID_WINDOW", default=600)
# A FloodWait up to this long is waited out and the call retried; a longer one is reported.
TELEGRAM_MAX_FLOOD_WAIT = env.int("TELEGRAM_MAX_FLOOD_WAIT", default=60)
# Job runs older than this are pruned nightly (each job's latest run is always kept).
JOB_RUN_RETENTION_DAYS = env.int("JOB_RUN_RETENTION_DAYS", default=30)
# Per-user rows of finished broadcasts, settled sequence messages and button clicks are pruned
# nightly this long after they settled (broadcasts keep their totals).
DELIVERY_RETENTION_DAYS = env.int("DELIVERY_RETENTION_DAYS", default=30)


# --- The operator console (django-unfold): its navigation, by task; the home dashboard. ---
def _nav(title, icon, link, permission=None):
    item = {"title": title, "icon": icon, "link": reverse_lazy(link)}
    if permission:
        item["permission"] = permission
    return item


UNFOLD = {
    "SITE_TITLE": "Courier",
    "SITE_HEADER": "Courier",
    "SITE_SUBHEADER": "Operator console",
    "SITE_SYMBOL": "send",
    # "View site" opens the bot in Telegram (the admin is the only site); hidden until runbot has
    # learnt the bot's username.
    "SITE_URL": "botapp.admin.site.site_url",
    "SITE_FAVICONS": [{"rel": "icon", "type": "image/svg+xml", "href": "botapp.admin.site.favicon_url"}],
    "SHOW_VIEW_ON_SITE": False,
    "STYLES": ["botapp.admin.site.console_styles"],
    # Static files only: the Content-Security-Policy allows no inline script (Copy buttons; the composer).
    "SCRIPTS": ["botapp.admin.site.console_script_url", "botapp.admin.site.composer_script"],
    "DASHBOARD_CALLBACK": "scheduler.dashboard.dashboard_callback",
    "SIDEBAR": {
        "show_search": True,
        # Models registered without a place below (another app's) stay reachable from here.
        "show_all_applications": True,
        "navigation": [
            {"title": "Overview", "items": [_nav("Dashboard", "dashboard", "admin:index")]},
            {
                "title": "Content",
                "separator": True,
                "items": [
                    _nav("Stored files", "folder", "admin:botapp_storedfile_changelist"),
                    _nav("Bot settings", "tune", "admin:botapp_botsettings_changelist"),
                    _nav("Posts commands", "feed", "admin:botapp_postscommand_changelist"),
                ],
            },
            {
                "title": "Audience",
                "separator": True,
                "items": [
                    _nav("Telegram users", "group", "admin:botapp_telegramuser_changelist"),
                    _nav("Button clicks", "ads_click", "admin:botapp_buttonclick_changelist"),
                    _nav("Daily stats", "bar_chart", "admin:botapp_dailystat_changelist"),
                    _nav("Premium plans", "workspace_premium", "admin:botapp_premiumplan_changelist"),
                    _nav("User bans", "block", "admin:botapp_userban_changelist"),
                    _nav("Referrals", "share", "admin:botapp_referral_changelist"),
                    _nav("Redeem codes", "redeem", "admin:botapp_redeemcode_changelist"),
                ],
            },
            {
                "title": "Access",
                "separator": True,
                "items": [
                    _nav("Allowed users", "verified_user", "admin:botapp_alloweduser_changelist"),
                    _nav("Force-subscribe channels", "campaign", "admin:botapp_forcesubchannel_changelist"),
                    _nav("Verification tokens", "key", "admin:botapp_verificationtoken_changelist"),
                    _nav("Daily token counts", "pin", "admin:botapp_dailytokencount_changelist"),
                    _nav("Join requests", "how_to_reg", "admin:botapp_channeljoinrequest_changelist"),
                    _nav("Verification log", "receipt_long", "admin:botapp_notice_changelist"),
                ],
            },
            {
                "title": "Broadcasts & sequences",
                "separator": True,
                "items": [
                    _nav("Broadcasts", "send", "admin:botapp_broadcast_changelist"),
                    _nav("Sequences", "schedule_send", "admin:botapp_sequence_changelist"),
                    _nav("Sequence steps", "format_list_numbered", "admin:botapp_sequencestep_changelist"),
                    _nav("Broadcast deliveries", "mark_email_read", "admin:botapp_broadcastdelivery_changelist"),
                    _nav("Sequence messages", "outgoing_mail", "admin:botapp_sequencemessage_changelist"),
                    _nav("Moved-in subscribers", "contacts", "admin:botapp_subscriber_changelist"),
                    _nav("Moved-in messages", "schedule", "admin:botapp_subscribermessage_changelist"),
                ],
            },
            {
                "title": "System",
                "separator": True,
                "collapsible": True,
                "items": [
                    _nav("Background jobs", "memory", "admin:scheduler_backgroundjob_changelist"),
                    _nav("Job runs", "history", "admin:scheduler_jobrun_changelist"),
                    _nav("Schedules", "event_repeat", "admin:django_celery_beat_periodictask_changelist"),
                    _nav("Crontabs", "calendar_month", "admin:django_celery_beat_crontabschedule_changelist"),
                    _nav("Intervals", "timer", "admin:django_celery_beat_intervalschedule_changelist"),
                    _nav("Pending deletions", "auto_delete", "admin:botapp_pendingdeletion_changelist"),
                    _nav("Pending batches", "pending_actions", "admin:botapp_pendingbatch_changelist"),
                    _nav("Admin commands", "terminal", "admin:botapp_admincommand_changelist"),
                    _nav("Audit trail", "policy", "admin:botapp_auditentry_changelist"),
                    _nav("API clients", "api", "admin:api_apiclient_changelist"),
                    _nav("Operators", "admin_panel_settings", "admin:auth_user_changelist"),
                    _nav("Two-factor log-in", "phonelink_lock", "totp_setup"),
                ],
            },
        ],
    },
}


# --- Error reports (config/error_reports.py): Sentry, or any server speaking its protocol, when
# SENTRY_DSN is set; nothing is sent anywhere when it is empty. Secrets and user texts are scrubbed.
SENTRY_DSN = env("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env("SENTRY_ENVIRONMENT", default="production")
SENTRY_RELEASE = env("SENTRY_RELEASE", default="")
# The extra under which a report made while runbot handled an update carries that update's texts
# (botapp/telegram/updates.py sets it), for error_reports.scrub to take each out of the report
# before it leaves. A name both sides read here, so neither imports the other.
ERROR_REPORTS_TEXTS_EXTRA = "texts to hide"
if SENTRY_DSN:
    from config.error_reports import error_reports_init

    error_reports_init(dsn=SENTRY_DSN, environment=SENTRY_ENVIRONMENT, release=SENTRY_RELEASE)

# --- Metrics at /metrics (botapp/metrics.py), off unless one of these is set: a scraper sends
# `Authorization: Bearer METRICS_TOKEN`, or comes from an address of METRICS_ALLOWED_IPS (behind a
# proxy, as PROXY_COUNT tells). Every process also needs PROMETHEUS_MULTIPROC_DIR (prometheus_client's
# own variable): one folder, emptied before the processes start, where each writes its counts.
METRICS_TOKEN = env("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
