import pytest

from botapp import clock
from botapp.telegram.fake import FakeTelegram
from botapp.telegram.gateway import TgUser
from botapp.telegram.router import Router

ADMIN = 1000
STORAGE = -1001000000001


@pytest.fixture(autouse=True)
def _clock():
    clock.clock_reset()
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
