"""What the gateway tests share: a user runbot has met, and a limiter that counts."""

import pytest


class CountingLimiter:
    """Stands in for the Redis limiter: grants every slot at once and counts slots taken and pauses
    asked for (the limiter itself is tested against Redis in test_limiter.py)."""

    def __init__(self):
        self.slots = []
        self.pauses = []

    count_max = 100

    def acquire(self, chat_id=None, *, count=1, paid=False):
        self.slots.append(chat_id)
        return 0.0

    def acquire_many(self, chat_ids):
        self.slots.extend(chat_ids)
        return len(chat_ids)

    def pause(self, seconds, *, chat_id=None, paid=False):
        self.pauses.append(seconds)
        return seconds


@pytest.fixture
def met(chat, alice):
    """Alice has written to the bot: runbot stored her access hash."""
    chat(alice, "/help")
    return alice
