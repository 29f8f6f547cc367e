"""runbot under the hostile Telegram: every user who writes gets one answer, whatever the
connection meets (service messages, 500/-503, unknown 420s, rotated salts, split answers)."""

import pytest

from botapp.telegram.gateway import TgUser

pytestmark = pytest.mark.django_db

MODES = {
    "service messages": {"service_every": 1},
    "500 and -503": {"internal_every": 3},
    "unknown 420s": {"flood_every": 3},
    "salt rotations": {"salt_every": 3},
    "split answers and drops": {"split_every": 1, "drop_every": 2},
}


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_each_user_who_writes_gets_one_answer(telegram, chat, mode):
    telegram.hostile_start(**{"salt_every": 0, "flood_every": 0, **mode})
    users = [TgUser(id=9100 + i, first_name="W") for i in range(12)]
    for user in users:
        chat(user, "/help")
    did = telegram.hostile_stop()
    assert any(did.values()) or "split_every" in mode  # runbot sends no containers to split or drop
    got = telegram.received()
    assert [got.get(u.id, 0) for u in users] == [1] * len(users), (did, got)
