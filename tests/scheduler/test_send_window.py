"""The send window (quiet hours, Bot settings): sequence steps and broadcasts due outside it wait
for its opening; runbot's replies are never held. Tests run at 10:00 in TIME_ZONE (the window's
zone when none is set)."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from botapp import clock
from botapp.models import BotSettings, SequenceMessage
from botapp.services.broadcasts import broadcast_start
from botapp.services.send_window import SendWindow
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, SequenceFactory, met_user

pytestmark = pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored


def window(conf, start, end, tz=""):
    conf.send_window_start, conf.send_window_end, conf.send_window_tz = start, end, tz
    conf.full_clean()
    conf.save()


def run(gateway, job="send_sequence_messages"):
    return job_run(job, trigger="test", gateway=gateway)


def local(moment):
    return timezone.localtime(moment).strftime("%H:%M")


@pytest.fixture
def move_to():
    """move_to(h, m, s, day=0) moves the clock to that local time of the test's day (`day` days
    on), to the second (tests start at 10:00 of it)."""
    midnight = clock.today_start()

    def move(hours, minutes=0, seconds=0, *, day=0):
        clock.clock_advance(midnight + timedelta(days=day, hours=hours, minutes=minutes, seconds=seconds) - clock.now())

    return move


def texts(telegram, user_id):
    return [m.text for m in telegram.bot_messages(user_id)]


def test_a_step_due_at_23_30_with_an_08_to_22_window_goes_at_08_00(chat, alice, telegram, gateway, conf, move_to):
    window(conf, time(8), time(22))
    SequenceFactory().steps.create(delay_seconds=13 * 3600 + 1800, text="Good evening?")  # 10:00 + 13.5 h
    chat(alice, "/start")

    move_to(23, 30, 1)
    held = run(gateway)
    assert (held.processed, held.detail.startswith("held: outside the send window until")) == (0, True)
    move_to(7, 59, 59, day=1)
    assert run(gateway).processed == 0
    assert "Good evening?" not in texts(telegram, alice.id)
    move_to(8, day=1)
    assert run(gateway).processed == 1

    assert texts(telegram, alice.id)[-1] == "Good evening?"
    assert local(SequenceMessage.objects.get().sent_at) == "08:00"


def test_a_window_crossing_midnight_sends_at_night_and_holds_by_day(chat, alice, telegram, gateway, conf, move_to):
    window(conf, time(22), time(6))
    SequenceFactory().steps.create(delay_seconds=3600, text="Night owl")
    chat(alice, "/start")

    move_to(11, 0, 1)  # due, and closed
    assert run(gateway).processed == 0
    move_to(21, 59, 59)
    assert run(gateway).processed == 0
    move_to(22)
    assert run(gateway).processed == 1
    assert local(SequenceMessage.objects.get().sent_at) == "22:00"

    zone = ZoneInfo("Europe/Berlin")
    night = SendWindow(time(22), time(6), zone)
    at = lambda h, m=0: datetime(2026, 3, 2, h, m, tzinfo=zone)  # noqa: E731
    assert [night.is_open(at(h, m)) for h, m in ((23, 0), (5, 59), (6, 0), (12, 0), (22, 0))] == [
        True,
        True,
        False,
        False,
        True,
    ]
    assert night.opens_at(at(6)) == at(22).astimezone(UTC)
    assert night.opens_at(at(23)) == at(23)


def test_a_broadcast_started_outside_the_window_waits_and_goes_when_it_opens(telegram, gateway, conf, sender_wakeups, move_to):
    window(conf, time(12), time(22))
    user = met_user(telegram)
    broadcast = BroadcastFactory(text="Lunch deal")
    assert broadcast_start(broadcast=broadcast) == 1

    assert run(gateway, "send_broadcasts").processed == 0  # 10:00
    assert texts(telegram, user.telegram_id) == []
    move_to(11, 59, 59)
    assert run(gateway, "send_broadcasts").processed == 0
    move_to(12)
    assert run(gateway, "send_broadcasts").processed == 1

    assert texts(telegram, user.telegram_id) == ["Lunch deal"]
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.sent) == ("done", 1)


def test_runbot_replies_are_not_held(chat, alice, telegram, conf):
    window(conf, time(12), time(22))  # closed at 10:00
    chat(alice, "/start")
    chat(alice, "/help")
    assert texts(telegram, alice.id) == [
        "Hello Alice! I deliver files shared through my links.",
        BotSettings.load().help_text,
    ]


def test_a_window_needs_two_different_times_and_a_real_time_zone(conf):
    with pytest.raises(ValidationError) as same:
        window(conf, time(8), time(8))
    assert "same time" in str(same.value)
    with pytest.raises(ValidationError) as zone:
        window(conf, time(8), time(22), "Mars/Olympus")
    assert "not a time zone name" in str(zone.value)
    window(conf, time(8), time(22), "America/New_York")  # fine
    assert SendWindow(time(8), None, ZoneInfo("UTC")).always  # half a window (the sandbox sets one at a time): none
