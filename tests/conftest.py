import os
from datetime import timedelta

import pytest
from django.conf import settings as django_settings

from botapp import clock
from botapp.bot.router import Router
from botapp.telegram.gateway import TgUser
from inmemory_telegram.server import TelegramServer
from offline.telegram.clients import OfflineBot, offline_gateway
from scheduler.wakeup import wakeup_notes_forget
from tests.processes import redis_url_of_worker

ADMIN = 1000
STORAGE = -1001000000001

# The cache (Redis) is shared with anything else using the test Redis database, such as another
# engineer's test run: this run keeps its keys (cached settings, counters) under a prefix of its own.
# Set before anything touches the cache; subprocesses started by tests inherit it.
os.environ["CACHE_KEY_PREFIX"] = f"{django_settings.CACHE_KEY_PREFIX}-test{os.getpid()}"
django_settings.CACHES["default"]["KEY_PREFIX"] = os.environ["CACHE_KEY_PREFIX"]
# Under pytest-xdist (`make test` runs the suite in worker processes gw0, gw1, ...), each worker
# has a test database of its own (pytest-django adds the suffix _gw0, ...) and, set here before
# anything connects, a Redis database of its own: the Celery workers that tests start take tasks
# from the broker's queue there (the browser tests' worker purges it at start), and a test empties
# its Redis database (Redis restarted): each only for its own worker's tests. Subprocesses inherit it.
SUITE_REDIS_URL = django_settings.REDIS_URL  # TEST_REDIS_URL, as make test passed it
if XDIST_WORKER := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = django_settings.REDIS_URL = redis_url_of_worker(SUITE_REDIS_URL, XDIST_WORKER)
    if django_settings.CELERY_BROKER_URL == SUITE_REDIS_URL:  # derived from REDIS_URL (not set on its own)
        django_settings.CELERY_BROKER_URL = django_settings.REDIS_URL
    if django_settings.CACHES["default"].get("LOCATION") == SUITE_REDIS_URL:
        django_settings.CACHES["default"]["LOCATION"] = django_settings.REDIS_URL
# Users made by tests (admin_client's superuser) get a fast hash: Django's default, PBKDF2, is slow on purpose.
django_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def cache_clear():
    """Forget this run's cached values and counters (only this run's: clear() would empty the whole
    Redis database, other runs' keys and the limiter's included)."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    from botapp.cache import HotValue, cache_answered

    HotValue.forget_local_all()  # this process's copies of hot values (bot settings, steps, channels)
    cache_answered()  # a test whose cache failed leaves the next one a working cache
    cache = caches["default"]  # not django.core.cache.cache: a proxy, never an instance of RedisCache
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(f"{cache.key_prefix}:*"))
    if keys:
        client.delete(*keys)
    wakeup_notes_forget()  # what this process noted of the wake-up keys just deleted


@pytest.fixture(autouse=True)
def _clock_and_cache():
    clock.clock_reset()
    # Tests run at 10:00 in the operator's time zone, whatever the hour really is, so that adding
    # an hour or two never crosses midnight (daily limits and stats reset there).
    clock.clock_advance(clock.today_start() + timedelta(days=1, hours=10) - clock.now())
    cache_clear()
    yield
    cache_clear()
    clock.clock_reset()


@pytest.fixture
def plain_http(settings):
    """Django's test client speaks plain HTTP: production's redirect to HTTPS (SECURE_SSL_REDIRECT)
    is off for the test that asks for this."""
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def telegram():
    """The in-memory Telegram (a server kurigram's real client talks to), with a storage channel.
    Rates are enforced only where a test turns them on: tests send faster than a limiter would."""
    server = TelegramServer(now=clock.now, username="CourierBot", enforce_rates=False)
    server.create_channel(STORAGE, title="Storage")
    return server


class RateClock:
    """The in-memory Telegram's clock of rate limits, stopped: `advance(seconds)` lets that much
    time pass for its limits, without a test sleeping for it."""

    def __init__(self, telegram):
        import time

        self.now = time.monotonic()
        telegram.rate_clock = lambda: self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def rate_clock(telegram):
    return RateClock(telegram)


@pytest.fixture
def gateway(telegram):
    """A worker's PyrogramGateway on the in-memory Telegram (its own session, no updates)."""
    from botapp.services.users import user_access_hash, user_access_hashes_fill

    gw = offline_gateway(telegram, peers=user_access_hash, peers_learnt=user_access_hashes_fill)
    yield gw
    gw.stop()


@pytest.fixture
def sender_wakeups(monkeypatch):
    """No worker runs here: each wake-up of the broadcast sender (the scheduler's answer to
    botapp's `broadcast_queued`) is recorded (apply_async's arguments), not published."""
    from scheduler.tasks import TASKS

    woken = []
    monkeypatch.setattr(TASKS["send_broadcasts"], "apply_async", lambda *args, **kwargs: woken.append((args, kwargs)))
    return woken


WAKE_UP = ((), {"kwargs": {"trigger": "start"}, "retry": False})  # how the sender is woken


@pytest.fixture
def shortener():
    from offline.shortener import MemoryShortener

    return MemoryShortener()


@pytest.fixture
def bot(telegram, db, shortener):
    """runbot on the in-memory Telegram: kurigram's client with updates, the pump and the router
    (admins, a storage channel, a shortener)."""
    from botapp.services.users import user_access_hash, user_access_hashes_fill

    offline = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener),
        peers=user_access_hash,
        peers_learnt=user_access_hashes_fill,
    )
    yield offline
    offline.stop()


@pytest.fixture
def router(bot):
    return bot.router


@pytest.fixture
def alice():
    return TgUser(id=1001, first_name="Alice", username="alice", language_code="en")


@pytest.fixture
def conf(db):
    from botapp.models import BotSettings

    settings = BotSettings.load()
    settings.bot_username = "CourierBot"
    settings.save()
    return settings


@pytest.fixture
def stored(telegram, db):
    """A two-message file in the storage channel: a document and a note."""
    from botapp.services.files import file_store
    from botapp.telegram.gateway import Media

    ids = [telegram.post(STORAGE, "Report", media=Media("document", "report.pdf")), telegram.post(STORAGE, "Read me")]
    return file_store(source_chat_id=STORAGE, message_ids=ids, title="Report")


@pytest.fixture
def chat(telegram, bot):
    """chat(user, text) sends as the user; runbot's client receives the update and the router
    answers. chat.tap(user, label) taps a button. Each returns the bot's actions that followed."""

    class Chat:
        def __call__(self, user, text="", **kwargs):
            before = len(telegram.events)
            telegram.user_sends(user, text, **kwargs)
            bot.pump.process()
            return telegram.events[before:]

        def tap(self, user, label):
            before = len(telegram.events)
            msg, button = telegram.find_button(user.id, label)
            if button.callback_data:
                telegram.tap(user, msg.id, button.callback_data)
                bot.pump.process()
            else:
                url = bot.router.shortener.follow(button.url) or button.url
                self(user, "/start " + url.split("start=", 1)[1])
            return telegram.events[before:]

    return Chat()


@pytest.fixture
def prefix(request):
    """A Redis key prefix of this test's own (for a limiter of its own), removed afterwards."""
    import time

    import redis
    from django.conf import settings

    name = f"courier:test:{request.node.name}:{time.time_ns()}"
    yield name
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(f"{name}*"):
        client.delete(key)


def answers_unreadable_once(monkeypatch) -> list:
    """The gateway's reading of Telegram's answers to sends raises once (a bug of ours, as a
    kurigram upgrade changing their shape could cause), after Telegram delivered them. Returns
    the list the struck answer is put in."""
    from botapp.telegram import request

    real, struck = request.sent_ids, []

    def sent_ids(answer):
        if not struck:
            struck.append(answer)
            raise KeyError("an answer of a shape never seen")
        return real(answer)

    monkeypatch.setattr(request, "sent_ids", sent_ids)
    return struck
