"""A call asked alone (runbot's replies and plain sends, an album, a pin, a deletion): when Telegram
leaves it unanswered (no answer in time, 500 INTERNAL, -503 Timeout) it is asked again with the same
bytes, so the same random_id, each time once the shared limiter admits it again, as a batch's item
is (retry.py, place 3); never by kurigram's own retries, which no limiter sees. So is a request
kurigram's own methods build inside such a call (a text with callback buttons: kurigram.asked_through)."""

import pytest

from botapp.services.users import user_access_hash
from botapp.telegram import retry
from botapp.telegram.gateway import AlreadySent, Media, OutcomeUnknown, Sent, TgUser
from offline.telegram.clients import offline_gateway

pytestmark = pytest.mark.django_db


class CountingLimiter:
    """Admits at once and records each admission: (chat, count)."""

    count_max = 100

    def __init__(self):
        self.admitted = []

    def acquire(self, chat_id=None, *, count=1, paid=False):
        self.admitted.append((chat_id, count))
        return 0.0

    def acquire_many(self, chat_ids):
        self.admitted.extend((c, 1) for c in chat_ids)
        return len(chat_ids)

    def pause(self, seconds, *, chat_id=None, paid=False):
        return seconds


@pytest.fixture
def user(chat):
    found = TgUser(id=7300, first_name="Single")
    chat(found, "/help")
    return found


@pytest.fixture
def runbot(telegram, user, monkeypatch):
    """A gateway as runbot's: it takes updates, and its calls go one by one."""
    monkeypatch.setattr(retry, "ASK_AGAIN_WAIT", 0.0)  # kurigram's RETRY_DELAY: no second needed here
    limiter = CountingLimiter()
    gw = offline_gateway(telegram, name="runbot", no_updates=False, peers=user_access_hash, limiter=limiter)
    gw.counting = limiter
    yield gw
    gw.stop()


@pytest.mark.parametrize(("error", "code"), [("INTERNAL", 500), ("Timeout", -503)])
def test_a_reply_telegram_left_unanswered_is_asked_again_through_the_limiter(telegram, runbot, user, error, code):
    telegram.fail_next(error, methods={"messages.SendMessage"}, chat_id=user.id, times=2, code=code)

    sent = runbot.send_text(user.id, "hello once", key="reply-1")

    assert isinstance(sent, Sent)
    assert runbot.counting.admitted == [(user.id, 1)] * 3  # the first ask and both asked again: each admitted
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["hello once"]


def test_a_reply_never_answered_is_of_unknown_outcome_after_as_many_asks_as_kurigram_makes(telegram, runbot, user):
    telegram.fail_next("INTERNAL", methods={"messages.SendMessage"}, chat_id=user.id, times=1000, code=500)

    with pytest.raises(OutcomeUnknown) as raised:
        runbot.send_text(user.id, "maybe", key="reply-2")

    assert raised.value.repeatable  # keyed: a later run sends it again with the same random_id
    assert runbot.counting.admitted == [(user.id, 1)] * retry.ASK_AGAIN_MAX


def test_a_lost_answer_is_asked_again_once_admitted_and_telegram_refuses_the_copy(telegram, runbot, user, monkeypatch):
    from pyrogram.session import Session

    from inmemory_telegram.faults import LOSE_ANSWER

    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"}, chat_id=user.id)

    with pytest.raises(AlreadySent):  # the same bytes: the first had arrived
        runbot.send_text(user.id, "lost answer", key="reply-3")

    assert runbot.counting.admitted == [(user.id, 1)] * 2
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["lost answer"]


def test_an_album_left_unanswered_is_asked_again_for_all_its_messages(telegram, runbot, user):
    photos = [Media("photo", telegram.file_id("photo", f"p{n}")) for n in range(3)]
    telegram.fail_next("INTERNAL", methods={"messages.SendMultiMedia"}, chat_id=user.id, times=1, code=500)

    sent = runbot.send_album(user.id, photos, caption="three", key="album-1")

    assert len(sent) == 3
    assert runbot.counting.admitted == [(user.id, 3)] * 2  # the album's three messages, admitted again
    assert len(telegram.bot_messages(user.id)) == 1 + 3


@pytest.mark.parametrize(("error", "code"), [("INTERNAL", 500), ("Timeout", -503)])
def test_a_reply_kurigram_builds_left_unanswered_is_asked_again_through_the_limiter(telegram, runbot, user, error, code):
    """A text with callback buttons goes through kurigram's send_message (runbot keeps the parsed
    message): its request is asked by the request layer too, not by kurigram's retries."""
    from botapp.telegram.gateway import Button

    telegram.fail_next(error, methods={"messages.SendMessage"}, chat_id=user.id, times=2, code=code)

    sent = runbot.send_text(user.id, "tap once", buttons=[[Button("Go", callback_data="go")]], key="reply-kb")

    assert isinstance(sent, Sent)
    assert runbot.counting.admitted == [(user.id, 1)] * 3
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["tap once"]
