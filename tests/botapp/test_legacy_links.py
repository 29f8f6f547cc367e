"""Links made by the file-store bot an operator moved from keep working (services/legacy.py)."""

import base64

import pytest

from botapp.models import StoredFile
from botapp.telegram.gateway import Media
from tests.conftest import STORAGE
from tests.factories import ForceSubChannelFactory

pytestmark = pytest.mark.django_db

BAD_LINK = "This link is not valid. Please check that you copied all of it."
OLD_CHANNEL = -1001777000123  # the old bot's storage channel (CHANNEL_ID in its config)


def old_bot_encode(string):
    """As CodeXBotz's helper_func.encode: URL-safe base64 of the ASCII string, padding stripped."""
    string_bytes = string.encode("ascii")
    base64_bytes = base64.urlsafe_b64encode(string_bytes)
    base64_string = base64_bytes.decode("ascii").strip("=")
    return base64_string


def old_single_link(message_id, channel_id):
    # channel_post.py / link_generator.py: converted_id = message.id * abs(client.db_channel.id)
    return old_bot_encode(f"get-{message_id * abs(channel_id)}")


def old_batch_link(first_id, last_id, channel_id):
    # /batch: f"get-{f_msg_id * abs(client.db_channel.id)}-{s_msg_id * abs(client.db_channel.id)}"
    return old_bot_encode(f"get-{first_id * abs(channel_id)}-{last_id * abs(channel_id)}")


@pytest.fixture
def old_channel(telegram, conf):
    telegram.create_channel(OLD_CHANNEL, title="Old storage")
    ids = [
        telegram.post(OLD_CHANNEL, "Episode 1", media=Media("video", "ep1.mp4")),
        telegram.post(OLD_CHANNEL, "Episode 2", media=Media("video", "ep2.mp4")),
        telegram.post(OLD_CHANNEL, "Episode 3", media=Media("video", "ep3.mp4")),
    ]
    conf.legacy_channel_id = OLD_CHANNEL
    conf.save()
    return ids


def copied(events):
    return [e.text for e in events if e.action == "copy"]


def test_a_legacy_single_link_delivers_its_message_with_auto_delete(chat, alice, old_channel, telegram):
    payload = old_single_link(old_channel[1], OLD_CHANNEL)

    events = chat(alice, f"/start {payload}")

    assert copied(events) == ["Episode 2"]
    assert events[-1].text.startswith("⏳ These files will be deleted in 30 min")
    stored = StoredFile.objects.get()
    assert (stored.source_chat_id, stored.message_ids) == (OLD_CHANNEL, [old_channel[1]])


def test_a_legacy_range_link_delivers_the_range_in_the_old_bots_order(chat, alice, old_channel):
    first, _, last = old_channel
    assert copied(chat(alice, f"/start {old_batch_link(first, last, OLD_CHANNEL)}")) == ["Episode 1", "Episode 2", "Episode 3"]
    # Made first-to-last backwards, the old bot sent the range counting down.
    assert copied(chat(alice, f"/start {old_batch_link(last, first, OLD_CHANNEL)}")) == ["Episode 3", "Episode 2", "Episode 1"]


def test_the_same_link_again_reuses_its_stored_file(chat, alice, old_channel):
    payload = old_batch_link(old_channel[0], old_channel[1], OLD_CHANNEL)
    chat(alice, f"/start {payload}")
    chat(alice, f"/start {payload}")
    assert StoredFile.objects.count() == 1


def test_legacy_links_pass_the_same_gates_as_courier_links(chat, alice, old_channel, telegram):
    news = -1002000000077
    telegram.create_channel(news, title="News")
    ForceSubChannelFactory(chat_id=news, title="News", invite_link="https://t.me/+news")

    events = chat(alice, f"/start {old_single_link(old_channel[2], OLD_CHANNEL)}")
    assert copied(events) == []
    assert events[-1].text == "Please join our channel first, then tap Try again."

    telegram.join(news, alice.id)
    assert copied(chat.tap(alice, "🔄 Try again")) == ["Episode 3"]


def test_legacy_links_wait_for_verification_like_any_link(chat, alice, old_channel, conf, telegram, shortener):
    conf.verification_enabled = True
    conf.save()
    events = chat(alice, f"/start {old_single_link(old_channel[0], OLD_CHANNEL)}")
    assert copied(events) == []
    assert telegram.find_button(alice.id, "✅ Verify") is not None


@pytest.mark.parametrize(
    "make",
    [
        lambda ids: old_single_link(ids[0], -1001999999999),  # made for another channel
        lambda ids: old_bot_encode(f"get-{ids[0] * abs(OLD_CHANNEL) + 1}"),  # not a multiple of the channel id
        lambda ids: old_bot_encode("get-0"),
        lambda ids: old_batch_link(1, 500, OLD_CHANNEL),  # more than a link may hold (200)
        lambda ids: old_bot_encode("get-12-x"),  # not a number: it is then just an unknown share id
    ],
)
def test_legacy_links_that_do_not_fit_the_channel_are_not_valid(chat, alice, old_channel, make):
    events = chat(alice, f"/start {make(old_channel)}")
    assert [e.text for e in events] in (
        [BAD_LINK],
        ["This link does not exist or its files were removed."],
    )
    assert not StoredFile.objects.exists()


def test_without_a_legacy_channel_in_settings_an_old_link_is_not_valid(chat, alice, conf, telegram):
    message_id = telegram.post(STORAGE, "Old post")
    events = chat(alice, f"/start {old_single_link(message_id, STORAGE)}")
    assert [e.text for e in events] == [BAD_LINK]
    assert not StoredFile.objects.exists()


def test_a_legacy_link_to_a_removed_message_says_so(chat, alice, old_channel):
    events = chat(alice, f"/start {old_single_link(999, OLD_CHANNEL)}")
    assert [e.text for e in events] == ["Sorry, these files are no longer available."]
