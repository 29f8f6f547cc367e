"""The in-memory Telegram behaves like Telegram where our code depends on it."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.telegram.gateway import Button, ChatNotFound, FloodWait, Media, MessageNotFound, TgUser, UserBlocked, UserDeactivated
from tests.conftest import STORAGE


def test_message_ids_count_up_per_chat(fake):
    assert fake.send_text(1, "a").message_id == 1
    assert fake.send_text(1, "b").message_id == 2
    assert fake.send_text(2, "c").message_id == 1


def test_blocked_and_deactivated_users_cannot_be_sent_to(fake):
    fake.block(1)
    fake.deactivate(2)
    with pytest.raises(UserBlocked):
        fake.send_text(1, "hi")
    with pytest.raises(UserDeactivated):
        fake.send_text(2, "hi")
    fake.user_sends(TgUser(id=1), "/start")  # writing to the bot unblocks it (and is message #1)
    assert fake.send_text(1, "hi").message_id == 2


def test_injected_flood_wait_hits_the_next_matching_call(fake):
    fake.fail_next(FloodWait(seconds=7), methods=["send_text"])
    assert fake.delete_messages(1, [1]) == 0  # other methods pass
    with pytest.raises(FloodWait) as caught:
        fake.send_text(1, "hi")
    assert caught.value.seconds == 7
    fake.send_text(1, "hi")


def test_rate_enforcement_raises_flood_wait(fake):
    fake.enforce_rates = True
    fake.send_text(1, "one")
    with pytest.raises(FloodWait):
        fake.send_text(1, "two")  # a second message to the same chat within a second


def test_bots_cannot_delete_after_48_hours(fake):
    old = fake.send_text(1, "old").message_id
    clock.clock_advance(timedelta(hours=48, minutes=1))
    new = fake.send_text(1, "new").message_id

    assert fake.delete_messages(1, [old, new, 99]) == 1
    assert not fake.message(1, old).deleted
    assert fake.message(1, new).deleted


def test_deletes_are_chunked_to_100_ids(fake):
    ids = [fake.send_text(1, f"m{i}").message_id for i in range(250)]
    fake.calls.clear()
    assert fake.delete_messages(1, ids) == 250
    assert fake.calls == ["delete_messages"] * 3


def test_copy_replaces_caption_of_media_only(fake):
    doc = fake.post(STORAGE, "orig", media=Media("document", "f.pdf"))
    note = fake.post(STORAGE, "just text")
    sent = fake.copy_messages(1, STORAGE, [doc, note], caption="new")
    copies = [fake.message(1, s.message_id) for s in sent]
    assert [(c.text, c.media) for c in copies] == [("new", Media("document", "f.pdf")), ("just text", None)]
    with pytest.raises(MessageNotFound):
        fake.copy_messages(1, STORAGE, [999])


def test_membership_and_unknown_channels(fake):
    fake.create_channel(-100500, members=[1])
    assert fake.is_member(-100500, 1)
    assert not fake.is_member(-100500, 2)
    with pytest.raises(ChatNotFound):
        fake.is_member(-100999, 1)


def test_find_button_takes_the_newest_live_message(fake):
    fake.send_text(1, "first", buttons=[[Button("Go", callback_data="go:1")]])
    second = fake.send_text(1, "second", buttons=[[Button("Go", callback_data="go:2")]])
    _, button = fake.find_button(1, "Go")
    assert button.callback_data == "go:2"
    fake.delete_messages(1, [second.message_id])
    _, button = fake.find_button(1, "Go")
    assert button.callback_data == "go:1"


def test_buttons_are_found_by_their_words_without_emoji(fake):
    fake.send_text(
        1,
        "m",
        buttons=[[Button("ℹ️ How to verify", url="https://example.com"), Button("♻️ Get files again", url="https://t.me/x")]],
    )
    assert fake.find_button(1, "how to verify")[1].text == "ℹ️ How to verify"
    assert fake.find_button(1, "Get files again")[1].text == "♻️ Get files again"
    assert fake.find_button(1, "again") is None
