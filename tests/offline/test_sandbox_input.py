"""The sandbox reads whatever a person types: every line gets an answer, none crashes it."""

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botapp.bot.router import SORRY
from botapp.telegram.gateway import TgUser, UserBlocked
from offline.sandbox import Sandbox, duration_parse

pytestmark = pytest.mark.django_db

LINES = st.one_of(
    st.text(max_size=60),
    st.builds(lambda u, t: f"{u}: {t}", st.integers(0, 10**21), st.text(max_size=40)),
    st.builds(lambda u: f"{u} blocks", st.integers(0, 10**21)),
    st.builds(
        lambda n, unit: f"1000 sends document a.pdf[{n}{unit}] x",
        st.integers(0, 10**16),
        st.sampled_from(["B", "KB", "MB", "GB"]),
    ),
    st.builds(lambda u, t: f"{u} tap {t}", st.integers(0, 10**6), st.text(max_size=20)),
    st.builds(lambda n, unit: f"wait {n}{unit}", st.integers(0, 10**15), st.sampled_from("smhd")),
)


@pytest.fixture
def box(telegram, bot, gateway):
    return Sandbox(telegram=telegram, bot=bot, worker=gateway, out=io.StringIO())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=LINES)
def test_any_line_is_answered_and_never_crashes(box, line):
    before = box.out.tell()
    box.feed(line)
    written = box.out.getvalue()[before:]
    assert SORRY not in written
    if line.strip() and not line.strip().startswith("#"):
        assert written, f"no answer to {line!r}"


def test_durations():
    from datetime import timedelta

    assert duration_parse("1h30m") == timedelta(hours=1, minutes=30)
    assert duration_parse("2d 5s") == timedelta(days=2, seconds=5)


def test_a_tap_without_a_matching_button_says_so(box):
    assert not box.feed("1001 tap Nothing here")  # piped input then exits 1
    assert "has no message with a button 'Nothing here'" in box.out.getvalue()


def test_numbers_beyond_telegrams_say_so_and_the_sandbox_goes_on(box, telegram):
    assert not box.feed("99999999999999999999: /start")
    assert not box.feed("1000 sends document a.pdf[99999999999999GB] big")
    assert not box.feed("1000 sends document a.pdf[4001MB] big")
    out = box.out.getvalue()
    assert ".. Telegram user ids have at most 52 bits (up to 4,503,599,627,370,495)" in out
    assert out.count(".. Telegram takes files of at most 4,000 MB (a Premium user's limit)") == 2
    assert box.feed("1000 sends document a.pdf[4000MB] biggest")  # the limit itself goes
    assert box.feed("1000 replies: /broadcast")  # what crashed the sandbox after a huge file before
    assert "too far" not in box.out.getvalue()


def test_blocks(box, gateway, chat, telegram, bot):
    chat(TgUser(id=1001, first_name="A"), "/start")
    box.feed("1001 blocks")
    assert "user 1001 blocked the bot" in box.out.getvalue()
    with pytest.raises(UserBlocked):
        gateway.send_text(1001, "hi")
    # Writing again unblocks, as in Telegram: runbot gets two updates (the bot restarted, then the
    # message), parsed one after the other, so both are waited for (waiting for one, the message
    # was sometimes not queued yet, and its reply not yet sent).
    before = len(telegram.events)
    telegram.user_sends(TgUser(id=1001, first_name="A"), "/start")
    bot.pump.process(expect=2)
    assert telegram.events[before:]


def test_admins_store_files_in_the_sandbox(box, telegram):
    from botapp.models import StoredFile

    box.feed("post Chapter 1")
    box.feed("post Chapter 2")
    box.feed("1000: /batch")
    box.feed("1000 forwards #1")
    assert box.feed("1000 forwards #2")
    assert StoredFile.objects.get().message_ids == [1, 2]

    box.feed("1000 sends photo cat.jpg A cat")
    cat = StoredFile.objects.latest("id")
    assert telegram.message(cat.source_chat_id, cat.message_ids[0]).text == "A cat"

    assert not box.feed("1000 forwards #99")
    assert "no message #99" in box.out.getvalue()
    box.feed("1000 tap Open link")  # the admin opens the new link: the bot delivers it
    delivered = [m for m in telegram.bot_messages(1000) if m.media is not None]
    assert [m.media.file for m in delivered] == ["cat.jpg"]


def test_waiting_runs_the_jobs_that_fell_due_through_the_scheduler(box, telegram, stored, conf, chat, alice):
    conf.auto_delete_minutes = 30
    conf.save()
    chat(alice, f"/start {stored.share_id}")
    delivered = [m.id for m in telegram.bot_messages(alice.id)]
    assert len(delivered) == 3  # the two files and the notice

    box.feed("wait 31m")
    out = box.out.getvalue()
    notes = [line for line in out.splitlines() if line.startswith(".. jobs run:")]
    assert notes == [
        ".. jobs run: send_broadcasts, prepare_broadcasts, reap_expired_claims, flush_counters, delete_due_messages, end_premium_plans, "
        "send_sequence_messages, backfill_backups, send_notices"  # backfill: hourly at :20, which 10:00 + 31 minutes crosses
    ]
    assert ".. job delete_due_messages: 1 processed, 0 failed (1 batch(es))" in out
    assert f"-> {alice.id} delete {' '.join(f'#{i}' for i in delivered[:2])}" in out


def test_a_long_wait_sends_each_onboarding_step_at_its_second_in_order(box, telegram, chat, alice):
    """Within one wait, due work wakes its job at its due time (as scheduler/wakeup.py has a
    worker do), not at beat's next minute: each step goes out at its second, in order."""
    from datetime import timedelta

    from botapp.models import SequenceMessage
    from tests.factories import SequenceFactory

    sequence = SequenceFactory(name="Onboarding")
    sequence.steps.create(delay_seconds=640, text="Welcome")
    sequence.steps.create(delay_seconds=3620, text="Still there?")
    chat(alice, "/start")
    assert box.feed("wait 2h")
    assert [m.text for m in telegram.bot_messages(alice.id)][1:] == ["Welcome", "Still there?"]
    for due_at, sent_at in SequenceMessage.objects.values_list("due_at", "sent_at"):
        assert timedelta(0) <= sent_at - due_at < timedelta(seconds=1)
    out = box.out.getvalue()
    woken = [line.rsplit("work due at ", 1)[1].rstrip(")") for line in out.splitlines() if "send_sequence_messages wakes" in line]
    dues = SequenceMessage.objects.order_by("due_at").values_list("due_at", flat=True)
    assert woken == [f"{due:%H:%M:%S}" for due in dues]  # once per step: at its due time
    assert out.count(".. job send_sequence_messages: 1 processed") == 2
