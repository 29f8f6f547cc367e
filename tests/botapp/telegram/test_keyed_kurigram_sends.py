"""Sends kurigram builds itself (a file by URL, runbot's texts with callback buttons, the copies
only kurigram's Message.copy reproduces: a link preview, a poll, a sticker) carry the random_ids of
Courier's key, as the sends Courier builds do (kurigram.keyed_random_ids): the same send asked
twice is delivered once, the second refused as a repeat (AlreadySent)."""

import pytest

from botapp.services.users import user_access_hash
from botapp.telegram.gateway import AlreadySent, Button, Media, Sent, TgUser
from offline.telegram.clients import offline_gateway
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(chat):
    found = TgUser(id=7400, first_name="Keyed")
    chat(found, "/help")
    return found


def test_a_file_by_url_with_a_key_is_delivered_once_however_often_it_is_sent(telegram, gateway, user):
    media = Media("photo", "https://example.com/cat.jpg")

    first = gateway.send_media(user.id, media, caption="cat", key="url-1")
    with pytest.raises(AlreadySent):
        gateway.send_media(user.id, media, caption="cat", key="url-1")

    assert isinstance(first, Sent)
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["cat"]
    gateway.send_media(user.id, media, caption="cat", key="url-2")  # another key: another message
    assert len(telegram.bot_messages(user.id)) == 3


def test_runbots_text_with_callback_buttons_with_a_key_is_delivered_once(telegram, user):
    runbot = offline_gateway(telegram, name="runbot", no_updates=False, peers=user_access_hash)
    try:
        buttons = [[Button("Again", callback_data="again")]]
        runbot.send_text(user.id, "tap me", buttons=buttons, key="cb-1")
        with pytest.raises(AlreadySent):
            runbot.send_text(user.id, "tap me", buttons=buttons, key="cb-1")
    finally:
        runbot.stop()
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["tap me"]


def test_a_copy_kurigram_builds_carries_the_keys_random_ids(telegram, gateway, user):
    """The path of the copies only kurigram reproduces (polls, stickers, link previews; the
    in-memory Telegram models none of them), driven with a text post."""
    post = telegram.post(STORAGE, "a post")
    (source,) = gateway._fetch(STORAGE, [post])

    def copy():
        return gateway._call(gateway._kurigram_copy, source, user.id, None, None, False, "copy-1", chat_id=user.id, send=True)

    copy()
    with pytest.raises(AlreadySent):
        copy()
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["a post"]


def test_kurigrams_own_random_ids_outside_a_keyed_send(telegram, gateway, user):
    media = Media("photo", "https://example.com/dog.jpg")
    gateway.send_media(user.id, media, caption="dog")
    gateway.send_media(user.id, media, caption="dog")  # no key: two sends, two messages
    assert [m.text for m in telegram.bot_messages(user.id)[1:]] == ["dog", "dog"]
