"""Hot values (botapp.cache.HotValue): what runbot reads on every update comes from the process's
own copy, else from the shared cache (Redis), else from the database; a change made in this process
shows at once, one made in another process within HOT_LOCAL_TTL."""

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp import cache as hot
from botapp.models import BotSettings, ForceSubChannel
from botapp.services.invites import FORCE_SUB_KEY, force_sub_channels
from tests.factories import ForceSubChannelFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def later(monkeypatch):
    """Moves this process's monotonic clock (the local copies' expiry) forward."""
    offset = [0.0]
    real = hot.time.monotonic
    monkeypatch.setattr(hot.time, "monotonic", lambda: real() + offset[0])

    def advance(seconds):
        offset[0] += seconds

    return advance


def queries(fn):
    with CaptureQueriesContext(connection) as ctx:
        value = fn()
    return value, len(ctx.captured_queries)


def test_read_once_then_from_the_process_then_from_redis(later):
    ForceSubChannelFactory(title="News")
    assert [c.title for c in queries(force_sub_channels)[0]] == ["News"]
    channels, n = queries(force_sub_channels)
    assert n == 0 and channels[0].title == "News" and not channels[0]._state.adding
    # Another process (a connection of its own to the same Redis) finds them in the shared cache.
    assert [v["title"] for v in caches.create_connection("default").get(FORCE_SUB_KEY)] == ["News"]
    later(hot.HOT_LOCAL_TTL + 0.1)
    assert queries(force_sub_channels)[1] == 0  # the local copy expired: Redis had them


def test_another_processs_change_shows_within_the_local_ttl(later):
    ForceSubChannelFactory(title="News")
    force_sub_channels()
    # Another process changes the channel: its signal forgets the shared entry; ours is untouched.
    ForceSubChannel.objects.update(title="Renamed")
    caches.create_connection("default").delete(FORCE_SUB_KEY)
    assert force_sub_channels()[0].title == "News"  # this process's copy, for up to a second
    later(hot.HOT_LOCAL_TTL + 0.1)
    assert force_sub_channels()[0].title == "Renamed"


def test_a_change_in_this_process_shows_at_once():
    channel = ForceSubChannelFactory(title="News")
    force_sub_channels()
    channel.enabled = False
    channel.save()
    assert force_sub_channels() == []
    ForceSubChannelFactory(title="Other")
    assert [c.title for c in force_sub_channels()] == ["Other"]
    ForceSubChannel.objects.get(title="Other").delete()
    assert force_sub_channels() == []

    conf = BotSettings.load()
    conf.welcome_text = "Changed"
    conf.save()
    assert BotSettings.load().welcome_text == "Changed"
