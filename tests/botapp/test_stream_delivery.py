"""The ▶️ Stream / ⬇️ Download buttons on delivered files: only after the file's gates, only
when switched on (globally, per file, or for premium users), signed for the user who got them."""

from datetime import timedelta

import pytest

from botapp.models import BotSettings, PendingDeletion, TelegramUser
from botapp.services.files import file_store
from botapp.services.premium import premium_grant
from botapp.services.stream_links import LinkState, stream_token_check
from inmemory_telegram.state import Media
from tests.conftest import STORAGE
from tests.factories import ForceSubChannelFactory

pytestmark = pytest.mark.django_db

CHANNEL = -1002000000001


@pytest.fixture
def streaming(conf, settings):
    settings.STREAM_PUBLIC_URL = "https://files.example.com"
    conf.stream_links = BotSettings.StreamLinks.ON
    conf.save()
    return conf


@pytest.fixture
def video(telegram, db):
    return file_store(source_chat_id=STORAGE, message_ids=[telegram.post(STORAGE, "Clip", media=Media("video", "clip.mp4"))])


def url_buttons(event):
    return [[(b.text, b.url) for b in row] for row in event.buttons]


def checked(url):
    return stream_token_check(
        token=url.split("/watch/", 1)[1] if "/watch/" in url else url.split("/f/", 1)[1].split("/")[0].split("?")[0]
    )


def test_a_delivered_file_carries_signed_stream_and_download_buttons_for_its_user(chat, alice, streaming, video):
    copy = chat(alice, f"/start {video.share_id}")[0]
    assert copy.media == Media("video", "clip.mp4")  # sent anew: a forward cannot carry buttons
    [[(stream_label, watch), (download_label, download)]] = url_buttons(copy)
    assert (stream_label, download_label) == ("▶️ Stream", "⬇️ Download")
    assert watch.startswith("https://files.example.com/watch/") and download.startswith("https://files.example.com/f/")
    for url in (watch, download):
        check = checked(url)
        assert (check.state, check.stored.pk, check.message_id, check.user_id) == (
            LinkState.OK,
            video.pk,
            video.message_ids[0],
            alice.id,
        )


def test_no_buttons_when_streaming_is_off_or_there_is_no_streaming_origin(chat, alice, streaming, video, settings):
    video.stream_links = "off"
    video.save()
    assert chat(alice, f"/start {video.share_id}")[0].buttons == ()
    video.stream_links = ""
    video.save()
    settings.STREAM_PUBLIC_URL = ""
    assert chat(alice, f"/start {video.share_id}")[0].buttons == ()


def test_premium_only_links_go_to_premium_users_alone(chat, alice, streaming, video):
    streaming.stream_links = BotSettings.StreamLinks.PREMIUM
    streaming.save()
    assert chat(alice, f"/start {video.share_id}")[0].buttons == ()
    premium_grant(user=TelegramUser.objects.get(telegram_id=alice.id), duration=timedelta(days=1))
    assert len(url_buttons(chat(alice, f"/start {video.share_id}")[0])[0]) == 2


def test_a_file_switched_on_by_itself_gets_links_while_settings_are_off(chat, alice, conf, settings, video):
    settings.STREAM_PUBLIC_URL = "https://files.example.com"
    video.stream_links = "on"
    video.save()
    assert len(url_buttons(chat(alice, f"/start {video.share_id}")[0])[0]) == 2


def test_no_links_before_the_force_subscribe_gate_is_passed(chat, alice, streaming, video, telegram):
    telegram.create_channel(CHANNEL, title="News")
    ForceSubChannelFactory(chat_id=CHANNEL, title="News", invite_link="https://t.me/+news")
    events = chat(alice, f"/start {video.share_id}")
    assert [e.action for e in events] == ["send"] and events[0].text.startswith("Please join")
    assert not any("files.example.com" in (b.url or "") for e in events for row in e.buttons for b in row)
    telegram.join(CHANNEL, alice.id)
    assert len(url_buttons(chat(alice, f"/start {video.share_id}")[0])[0]) == 2


def test_a_batch_gets_its_links_in_a_message_of_their_own_deleted_with_the_files(chat, alice, streaming, stored):
    events = chat(alice, f"/start {stored.share_id}")
    assert [e.action for e in events] == ["copy", "copy", "send", "send"]
    links = events[2]
    assert links.text.startswith("▶️ Stream or ⬇️ download in a browser (links work for 1 day")
    rows = url_buttons(links)
    assert [[label for label, _ in row] for row in rows] == [["▶️ Stream 1", "⬇️ Download 1"], ["▶️ Stream 2", "⬇️ Download 2"]]
    assert [checked(row[0][1]).message_id for row in rows] == stored.message_ids
    assert links.message_ids[0] in PendingDeletion.objects.get().message_ids
