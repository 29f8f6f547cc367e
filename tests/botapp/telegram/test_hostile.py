"""What a long-lived connection to Telegram meets, through a worker's real client (kurigram's
Session, our container sender in botapp/telegram/kurigram.py) and the in-memory Telegram: a
rotated server salt refused for a whole container or for each message in it, a client clock Telegram
refuses (bad_msg_notification 16/17), a session that is not up. Each is answered at once, and every
message is delivered once."""

import time

import pytest
from pyrogram.session import Session

from botapp.services.users import user_access_hash
from botapp.telegram.gateway import SendItem, Sent, TgUser, TransientError
from offline.telegram.clients import offline_gateway
from tests.botapp.telegram.conftest import CountingLimiter

pytestmark = pytest.mark.django_db

USERS = [TgUser(id=3000 + i, first_name=f"U{i}") for i in range(20)]


@pytest.fixture
def users(chat):
    for user in USERS:
        chat(user, "/help")
    return USERS


@pytest.fixture
def worker(telegram, users, monkeypatch):
    # kurigram waits WAIT_TIMEOUT for an answer before asking again on its own: long here, so a
    # refusal left unanswered would show as a call made twice or a test that hangs, never pass.
    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 60)
    gw = offline_gateway(telegram, peers=user_access_hash, limiter=CountingLimiter(), sleep=lambda s: None)
    # A group not written within ADMITTED_FOR of its admission asks the limiter again (retry.py,
    # 4; tested in test_send_many.py). On a busy machine that happens here too, and the counts of
    # admissions below would count it: these tests count only the asks Telegram's faults cause.
    gw.admitted_for = 3600.0
    gw.send_text(users[0].id, "warm")  # the text is parsed once: the batch below goes as one container
    yield gw
    gw.stop()


def received(telegram, text):
    return sorted(m.chat_id for m in telegram.box.values() if m.text == text)


@pytest.mark.parametrize("refusal", ["container", "items"])
def test_a_rotated_salt_refusing_a_container_sends_it_again_at_once_each_message_once(telegram, worker, users, refusal):
    telegram.rotate_salt(refusal=refusal)
    containers, refusals = telegram.containers, len(telegram.refusals)
    results = worker.send_many([SendItem(u.id, "warm") for u in users])
    assert all(isinstance(r, Sent) for r in results)
    assert received(telegram, "warm") == sorted([users[0].id] * 2 + [u.id for u in users[1:]])
    expected = 1 if refusal == "container" else len(users)
    assert telegram.refusals[refusals:] == ["bad_server_salt"] * expected
    # The refused container and the one sent again with the new salt: no message fell back to
    # kurigram's one-by-one retry after its WAIT_TIMEOUT.
    assert telegram.containers == containers + 1


def test_a_client_clock_telegram_refuses_is_resynced_and_the_message_sent_once(telegram, worker, users):
    worker.client._server_time_offset = -600  # ten minutes slow: msg ids "too low" (16)
    worker.client.session.msg_factory._last_msg_id = 0  # as a client started with the slow clock
    worker.send_text(users[1].id, "on time")
    assert received(telegram, "on time") == [users[1].id]
    assert "bad_msg_notification 16" in telegram.refusals
    assert abs(worker.client._server_time_offset) < 5

    # Two minutes fast: "too high" (17), msg ids restart lower. (Over 300 s fast, kurigram itself
    # discards the server's packets as too old and restarts the session, which resyncs the clock.)
    worker.client._server_time_offset = 120
    worker.send_many([SendItem(u.id, "fast clock") for u in users[:5]])
    assert received(telegram, "fast clock") == sorted(u.id for u in users[:5])
    assert "bad_msg_notification 17" in telegram.refusals


def test_a_session_that_is_not_up_sends_nothing_and_says_it_is_transient(telegram, worker, users, monkeypatch):
    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.2)
    worker.client.session.is_started.clear()  # reconnecting, as after a dropped connection
    with pytest.raises(TransientError):
        worker.send_text(users[2].id, "not yet")
    results = worker.send_many([SendItem(users[3].id, "not yet")])
    assert isinstance(results[0], TransientError)
    worker.client.session.is_started.set()
    assert received(telegram, "not yet") == []


def test_service_messages_at_odd_moments_change_nothing(telegram, worker, users):
    """new_session_created (with the salt) and msgs_ack before every answer."""
    telegram.hostile_start(salt_every=0, flood_every=0, service_every=1)
    calls = len(telegram.calls)
    results = worker.send_many([SendItem(u.id, "served") for u in users])
    did = telegram.hostile_stop()
    assert all(isinstance(r, Sent) for r in results) and did["services"] >= 1
    assert received(telegram, "served") == sorted(u.id for u in users)
    assert len(telegram.calls) - calls == len(users)  # nothing asked twice


def test_answers_split_late_and_last_first_are_each_matched_to_their_message(telegram, worker, users):
    telegram.hostile_start(salt_every=0, flood_every=0, split_every=1)
    calls = len(telegram.calls)
    results = worker.send_many([SendItem(u.id, "split") for u in users])
    did = telegram.hostile_stop()
    assert did["splits"] >= 1
    assert [r.chat_id for r in results] == [u.id for u in users]  # each its own answer
    assert received(telegram, "split") == sorted(u.id for u in users)
    assert len(telegram.calls) - calls == len(users)


def drop_next_container(telegram, when: str) -> int:
    """The connection drops around the next container only, `when` (DROP_WHEN), as one outage does;
    the containers after it go through. Returns the hostile mode's count of drops once it has."""
    from inmemory_telegram.faults import DROP_WHEN

    once = 1_000_000  # no second drop in a test
    telegram.hostile_start(salt_every=0, flood_every=0, drop_every=once)
    telegram.hostile.containers, telegram.hostile.drops = once - 1, DROP_WHEN.index(when)
    return DROP_WHEN.index(when) + 1


def test_a_connection_dropped_around_a_container_delivers_each_message_once_without_a_long_stall(telegram, worker, users):
    """Before the container is processed: all sent again, delivered once. Halfway: what was
    processed comes back as RANDOM_ID_DUPLICATE (outcome unknown: it did arrive), the rest is
    delivered (asked again with the same random_id: AlreadySent). After: all arrived, all
    AlreadySent. No wait for WAIT_TIMEOUT (60 s here). Each asking again is admitted by the
    limiter, like any send."""
    outcomes = {}
    for when in ("before", "during", "after"):
        dropped = drop_next_container(telegram, when)
        started, slots = time.monotonic(), len(worker.limiter.slots)
        results = worker.send_many([SendItem(u.id, f"dropped {when}") for u in users])
        outcomes[when] = [type(r).__name__ for r in results]
        assert time.monotonic() - started < 30, when
        assert received(telegram, f"dropped {when}") == sorted(u.id for u in users), when  # once each
        assert telegram.hostile_stop()["drops"] == dropped, when
        # admitted twice each: sent, then asked again
        assert sorted(worker.limiter.slots[slots:]) == sorted([u.id for u in users] * 2), when
    half = len(users) // 2
    assert outcomes["before"] == ["Sent"] * len(users)
    assert outcomes["during"] == ["AlreadySent"] * half + ["Sent"] * (len(users) - half)
    assert outcomes["after"] == ["AlreadySent"] * len(users)


def test_internal_errors_on_a_send_are_asked_again_with_the_same_random_id_never_a_refusal(telegram, worker, users):
    """Telegram's own trouble may or may not have delivered the message: asked again with the same
    random_id, it is delivered now (-503 before processing) or refused as a duplicate (500 after
    delivering it: AlreadySent, it was delivered; never a second copy, never a final failure)."""
    telegram.hostile_start(salt_every=0, flood_every=0, internal_every=2)  # every other send: not the asking again
    worker.send_many([SendItem(users[3].id, "first")])
    delivered = worker.send_many([SendItem(users[4].id, "internal")])  # 500 INTERNAL after delivering it
    timed_out = worker.send_many([SendItem(users[5].id, "timeout")])  # -503 Timeout before processing it
    assert telegram.hostile_stop()["internals"] == 2
    assert [type(r).__name__ for r in delivered + timed_out] == ["AlreadySent", "Sent"]
    assert received(telegram, "internal") == [users[4].id] and received(telegram, "timeout") == [users[5].id]
