"""Only Telegram's errors are domain errors: every RPC error kurigram knows (and any it does not)
maps to one without raising, a 420 Telegram may invent tomorrow is a FloodWait of its seconds or a
back-off, and an exception that is not Telegram's (ours, or kurigram's) reaches the caller as it
is: never recorded as Telegram refusing a send, never losing what was already sent."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyrogram import errors, raw
from pyrogram.errors.exceptions.all import exceptions

from botapp.services.users import user_access_hash
from botapp.telegram import request
from botapp.telegram.gateway import BotUnauthorized, FloodWait, SendItem, Sent, TelegramError, TransientError
from botapp.telegram.request import error_to_domain
from offline.telegram.clients import offline_gateway
from tests.botapp.telegram.conftest import CountingLimiter

pytestmark = pytest.mark.django_db

DOMAIN = (TelegramError, BotUnauthorized)


def raised(code: int, message: str) -> errors.RPCError:
    """What kurigram raises for Telegram's `rpc_error code message` answer to a send."""
    try:
        errors.RPCError.raise_it(raw.types.RpcError(error_code=code, error_message=message), raw.functions.messages.SendMessage)
    except errors.RPCError as exc:
        return exc
    raise AssertionError("raise_it returned")


def every_known_error():
    for code, names in exceptions.items():
        for name in names:
            if name != "_":
                yield code, name.replace("_X", "_7")


@pytest.fixture(autouse=True)
def _no_unknown_errors_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # kurigram appends each unknown error to ./unknown_errors.txt


def test_every_error_kurigram_knows_maps_to_a_domain_error_without_raising():
    known = list(every_known_error())
    assert len(known) > 900  # kurigram's table, whole
    for code, name in known:
        for send in (False, True):
            assert isinstance(error_to_domain(raised(code, name), send=send), DOMAIN), (code, name)


@settings(max_examples=300, deadline=None)
@given(code=st.integers(min_value=-600, max_value=600), name=st.text(min_size=0, max_size=40))
def test_any_error_telegram_could_send_maps_without_raising(code, name):
    assert isinstance(error_to_domain(raised(code, name), send=True), DOMAIN)


@pytest.mark.parametrize(
    "message, expected",
    [
        ("FLOOD_WAIT_7", FloodWait(seconds=7)),
        ("FLOOD_PREMIUM_WAIT_9", FloodWait(seconds=9)),
        ("FLOOD_NEWKIND_WAIT_12", FloodWait(seconds=12)),  # a name kurigram's table does not have
        ("FROZEN_METHOD_INVALID", TransientError("")),  # no seconds: a back-off, never FloodWait(1)
        ("FLOOD_WAIT_0", TransientError("")),
    ],
)
def test_a_420_is_a_flood_wait_of_its_seconds_or_a_back_off(message, expected):
    domain = error_to_domain(raised(420, message))
    assert type(domain) is type(expected)
    if isinstance(expected, FloodWait):
        assert domain.seconds == expected.seconds


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), TypeError("t"), AttributeError("a"), RuntimeError("r")])
def test_an_exception_that_is_not_telegrams_is_no_domain_error(exc):
    assert error_to_domain(exc, send=True) is None


def test_the_transport_failing_is_transient_and_a_lost_answer_unknown_for_a_send():
    assert isinstance(error_to_domain(ConnectionResetError("reset")), TransientError)
    assert type(error_to_domain(TimeoutError("no answer"), send=True)).__name__ == "OutcomeUnknown"
    assert isinstance(error_to_domain(TimeoutError("no answer"), send=False), TransientError)


# --- through the real client and the in-memory Telegram ---------------------------------------------


@pytest.fixture
def worker(telegram, met):
    slept = []
    gw = offline_gateway(telegram, peers=user_access_hash, limiter=CountingLimiter(), sleep=slept.append)
    gw.slept = slept
    yield gw
    gw.stop()


def test_a_new_420_with_seconds_pauses_the_limiter_and_the_send_goes_through(telegram, worker, met):
    telegram.fail_next("FLOOD_NEWKIND_WAIT_12", code=420, methods={"messages.SendMessage"})
    worker.send_text(met.id, "hello")
    assert worker.limiter.pauses == [12]
    assert [m.text for m in telegram.bot_messages(met.id)][-1] == "hello"


def test_a_420_without_seconds_backs_off_and_pauses_no_one(telegram, worker, met):
    telegram.fail_next("FROZEN_METHOD_INVALID", code=420, methods={"messages.SendMessage"})
    worker.send_text(met.id, "hello")
    assert worker.limiter.pauses == [] and len(worker.slept) == 1
    telegram.fail_next("FROZEN_METHOD_INVALID", code=420, methods={"messages.SendMessage"}, times=10)
    with pytest.raises(TransientError):
        worker.send_text(met.id, "again")


def test_a_batch_meeting_a_new_420_sends_every_item_once(telegram, worker, met, bob_met):
    telegram.fail_next("FROZEN_METHOD_INVALID", code=420, methods={"messages.SendMessage"}, chat_id=bob_met.id)
    results = worker.send_many([SendItem(met.id, "one"), SendItem(bob_met.id, "two")])
    assert all(isinstance(r, Sent) for r in results)
    assert [m.text for m in telegram.bot_messages(bob_met.id)].count("two") == 1


@pytest.fixture
def bob_met(chat):
    from botapp.telegram.gateway import TgUser

    bob = TgUser(id=2002, first_name="Bob")
    chat(bob, "/help")
    return bob


def test_an_unexpected_exception_is_raised_as_it_is_not_as_a_refusal(telegram, worker, met, monkeypatch):
    def broken(answer):
        raise KeyError("a field kurigram renamed")

    monkeypatch.setattr(request, "sent_ids", broken)
    with pytest.raises(KeyError):
        worker.send_text(met.id, "hello")


def test_a_bug_building_one_item_sends_the_others_and_hands_that_one_back_unsent(telegram, worker, met, bob_met, monkeypatch):
    worker.send_text(met.id, "warm")  # the parsed text and keyboard are cached: the items are prebuilt
    real = worker._prebuilt

    def prebuilt(item, peer):
        if item.chat_id == bob_met.id:
            raise AttributeError("a private attribute kurigram renamed")
        return real(item, peer)

    monkeypatch.setattr(worker, "_prebuilt", prebuilt)
    before = len(telegram.bot_messages(bob_met.id))
    results = worker.send_many([SendItem(met.id, "warm"), SendItem(bob_met.id, "warm"), SendItem(met.id, "warm")])
    assert isinstance(results[0], Sent) and isinstance(results[2], Sent)
    assert isinstance(results[1], AttributeError)  # not a TelegramError: the sweep hands the row back
    assert len(telegram.bot_messages(bob_met.id)) == before
