from datetime import timedelta

import pytest

from botapp import clock
from botapp.telegram.fake import FakeTelegram
from botapp.telegram.gateway import TgUser
from botapp.telegram.router import Router

ADMIN = 1000
STORAGE = -1001000000001


@pytest.fixture(autouse=True)
def _clock_and_cache():
    from django.core.cache import cache

    clock.clock_reset()
    # Tests run at 10:00 in the operator's time zone, whatever the hour really is, so that adding
    # an hour or two never crosses midnight (daily limits and stats reset there).
    clock.clock_advance(clock.today_start() + timedelta(days=1, hours=10) - clock.now())
    cache.clear()
    yield
    clock.clock_reset()


@pytest.fixture
def fake():
    telegram = FakeTelegram(username="CourierBot")
    telegram.create_channel(STORAGE)
    return telegram


@pytest.fixture
def router(fake, db):
    return Router(fake, admin_ids=frozenset({ADMIN}))


@pytest.fixture
def alice():
    return TgUser(id=1001, first_name="Alice", username="alice", language_code="en")


@pytest.fixture
def say(fake, router):
    """say(user, text): the user sends `text`; returns the bot messages sent in reply."""

    def send(user: TgUser, text: str):
        before = len(fake.events)
        router.handle_message(fake.user_sends(user, text))
        return fake.events[before:]

    return send


@pytest.fixture
def shortener():
    from botapp.services.shortener import MemoryShortener

    return MemoryShortener()


@pytest.fixture
def bot(fake, db, shortener):
    """The router as runbot builds it: admins, a storage channel, a shortener."""
    return Router(fake, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener)


@pytest.fixture
def conf(db):
    from botapp.models import BotSettings

    settings = BotSettings.load()
    settings.bot_username = "CourierBot"
    settings.save()
    return settings


@pytest.fixture
def stored(fake, db):
    """A two-message file in the storage channel: a document and a note."""
    from botapp.services.files import file_store
    from botapp.telegram.gateway import Media

    ids = [fake.post(STORAGE, "Report", media=Media("document", "report.pdf")), fake.post(STORAGE, "Read me")]
    return file_store(source_chat_id=STORAGE, message_ids=ids, title="Report")


@pytest.fixture
def chat(fake, bot):
    """chat(user, text) sends as the user through `bot`; chat.tap(user, label) taps a button.
    Both return the events (bot actions) that followed."""

    class Chat:
        def __call__(self, user, text):
            before = len(fake.events)
            bot.handle_message(fake.user_sends(user, text))
            return fake.events[before:]

        def tap(self, user, label):
            before = len(fake.events)
            msg, button = fake.find_button(user.id, label)
            if button.callback_data:
                bot.handle_callback(fake.callback_query(user, msg, button.callback_data))
            else:
                url = bot.shortener.follow(button.url) or button.url
                self(user, "/start " + url.split("start=", 1)[1])
            return fake.events[before:]

    return Chat()
