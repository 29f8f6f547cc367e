"""Share links on storage-channel posts: a post made straight in the storage channel gets its link."""

from urllib.parse import parse_qs, unquote, urlparse

import pytest

from botapp.models import BotSettings, StoredFile
from inmemory_telegram.state import Media
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def links(conf):
    def switch(mode):
        conf.channel_post_links = mode
        conf.save()
        return conf

    return switch


def post(telegram, bot, text, **kwargs):
    """An admin posts in the storage channel; runbot hears of it and answers. Returns the message
    id and the bot's actions."""
    before = len(telegram.events)
    message_id = telegram.post(STORAGE, text, **kwargs)
    bot.pump.process(posts=True)
    return message_id, telegram.events[before:]


def payload_of(share_url):
    link = parse_qs(urlparse(share_url).query)["url"][0]
    assert unquote(link).startswith("https://t.me/CourierBot?start=")
    return parse_qs(urlparse(link).query)["start"][0]


def test_a_post_gets_a_share_button_that_leads_to_its_files(chat, alice, bot, telegram, links):
    links(BotSettings.ChannelPostLinks.BUTTON)

    message_id, events = post(telegram, bot, "Chapter 1", media=Media("document", "ch1.pdf"))

    assert [(e.action, e.chat_id, e.message_ids) for e in events] == [("edit", STORAGE, [message_id])]
    (button,) = telegram.message(STORAGE, message_id).buttons[0]
    assert button.text == "🔁 Share" and button.url.startswith("https://t.me/share/url?url=")
    payload = payload_of(button.url)
    stored = StoredFile.objects.get(share_id=payload)
    assert (stored.source_chat_id, stored.message_ids, stored.title) == (STORAGE, [message_id], "Chapter 1")

    delivered = chat(alice, f"/start {payload}")
    assert [(e.action, e.text, e.media) for e in delivered if e.action == "copy"] == [
        ("copy", "Chapter 1", Media("document", "ch1.pdf"))
    ]


def test_a_post_the_bot_may_not_edit_gets_a_reply_instead(bot, telegram, links):
    links(BotSettings.ChannelPostLinks.BUTTON)
    telegram.channels[STORAGE_RAW].bot_can_edit = False

    message_id, events = post(telegram, bot, "Chapter 2")

    assert telegram.message(STORAGE, message_id).buttons == ()
    (reply,) = [e for e in events if e.action == "send"]
    assert reply.chat_id == STORAGE and reply.reply_to == message_id
    assert reply.text == f"🔗 https://t.me/CourierBot?start={StoredFile.objects.get().share_id}"


def test_reply_mode_answers_the_post_with_its_link(bot, telegram, links):
    links(BotSettings.ChannelPostLinks.REPLY)
    message_id, events = post(telegram, bot, "Chapter 3")
    assert [(e.action, e.reply_to) for e in events] == [("send", message_id)]
    assert telegram.message(STORAGE, message_id).buttons == ()
    assert payload_of(events[0].buttons[0][0].url) == StoredFile.objects.get().share_id


def test_off_by_default_a_post_is_left_alone(bot, telegram, conf):
    _, events = post(telegram, bot, "Chapter 4")
    assert events == []
    assert not StoredFile.objects.exists()


def test_posts_in_other_channels_are_not_linked(bot, telegram, links):
    links(BotSettings.ChannelPostLinks.BUTTON)
    other = -1002000000555
    telegram.create_channel(other, title="Other")
    telegram.post(other, "elsewhere")
    telegram.post(STORAGE, "here")
    bot.pump.process(posts=True)
    assert list(StoredFile.objects.values_list("title", flat=True)) == ["here"]


def test_posts_made_while_runbot_was_down_get_their_links_at_start(telegram, conf, links, tmp_path, shortener):
    from botapp.bot.router import Router
    from botapp.services.users import user_access_hash
    from offline.telegram.clients import MemoryPositions, OfflineBot

    links(BotSettings.ChannelPostLinks.BUTTON)

    positions = MemoryPositions()  # runbot's stored position, from one run to the next

    def start():
        return OfflineBot(
            telegram,
            lambda gw: Router(gw, admin_ids=frozenset(), storage_channel_id=STORAGE, shortener=shortener),
            peers=user_access_hash,
            workdir=tmp_path,
            positions=positions,
        )

    first = start()
    seen = telegram.post(STORAGE, "seen live")
    first.pump.process(posts=True)
    first.stop()

    missed = telegram.post(STORAGE, "posted while down")  # nobody is listening
    again = start()  # runbot asks for the channel's difference from its stored position (getChannelDifference)
    try:
        again.pump.process(posts=True)
    finally:
        again.stop()
    assert telegram.message(STORAGE, missed).buttons[0][0].text == "🔁 Share"
    assert sorted(StoredFile.objects.values_list("message_ids", flat=True)) == [[seen], [missed]]  # each once


STORAGE_RAW = -1_000_000_000_000 - STORAGE
