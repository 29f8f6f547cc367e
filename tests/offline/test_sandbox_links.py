"""Sandbox transcripts: share links on storage-channel posts and expiring invite links."""

import io

import pytest

from botapp.models import BotSettings, ForceSubChannel
from offline.sandbox import Sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway, conf, stored):
    bot.pump.process(expect=len(stored.message_ids), posts=True)  # runbot heard of the file's posts (links off)
    return Sandbox(telegram=telegram, bot=bot, worker=gateway, out=io.StringIO())


def transcript(box, *lines):
    before = box.out.tell()
    results = [box.feed(line) for line in lines]
    return results, box.out.getvalue()[before:].splitlines()


def test_a_post_gets_its_share_button_or_a_reply(box):
    results, out = transcript(box, "set channel_post_links button", "post Chapter 2")
    assert results == [True, True]
    assert out[0] == ".. Bot settings: channel_post_links saved"
    assert out[1].startswith(".. storage channel #3: Chapter 2")
    assert out[2] == '-> -1001000000001 #3 edit "Chapter 2" [🔁 Share]'
    share_id = out[3].split("'/start ")[1].rstrip("'")

    _, out = transcript(box, "set channel_post_links reply", "post Chapter 3", f"1001: /start {share_id}")
    assert out[2].startswith('-> -1001000000001 #5 send (reply to #4) "🔗 https://t.me/CourierBot?start=')
    assert any(line.startswith("-> 1001 ") and 'copy "Chapter 2"' in line for line in out)


def test_a_setting_the_form_would_refuse_is_refused(box):
    results, out = transcript(box, "set channel_post_links sideways", "set no_such_field 1", "set legacy_channel_id 5")
    assert results == [False, False, False]
    assert out[0] == ".. Bot settings: channel_post_links: Select a valid choice. sideways is not one of the available choices."
    assert out[1].startswith(".. Bot settings: no_such_field: Bot settings have no 'no_such_field': ")
    assert out[2] == (
        ".. Bot settings: legacy_channel_id: A channel id looks like -1001234567890: from -1997852516352 to "
        "-1000000000001 (got 5; forward a post of the channel to @userinfobot to read its id)."
    )
    assert BotSettings.load().channel_post_links == "off"


def test_expiring_invite_links_in_the_sandbox(box, stored):
    results, out = transcript(
        box,
        "forcesub News 30m",
        f"1001: /start {stored.share_id}",
        f"1002: /start {stored.share_id}",
        "1001 tap Join News",
        "1001 tap Try again",
        "wait 31m",
        "1002 tap Join News",
    )
    assert all(results)
    assert out[0] == ".. force-subscribe channel News (-1002000000001): invite links expiring after 30 min"
    link = ForceSubChannel.objects.get().current_link
    assert f".. user 1001 opens {link}: joined the channel" in out
    assert any(line.startswith("-> 1001 ") and 'copy document "Report"' in line for line in out)
    assert out[-1] == f".. user 1002 opens {link}: Telegram says this invite link has expired"


def test_join_request_links_in_the_sandbox(box, stored):
    results, out = transcript(box, "forcesub Club 1h requests", f"1003: /start {stored.share_id}", "1003 tap Join Club")
    assert all(results)
    assert out[-1].endswith("asked to join (the bot hears of it)")
    _, out = transcript(box, "1003 tap Try again")
    assert any('copy document "Report"' in line for line in out)


def test_a_fixed_invite_link_joins_too(box, stored):
    results, out = transcript(box, "forcesub News", f"1001: /start {stored.share_id}", "1001 tap Join News", "1001 tap Try again")
    assert all(results)
    assert out[0] == ".. force-subscribe channel News (-1002000000001): a fixed invite link"
    assert ".. user 1001 opens https://t.me/+news: joined the channel" in out
    assert any(line.startswith("-> 1001 ") and 'copy document "Report"' in line for line in out)


def test_a_switch_takes_yes_or_no_and_nothing_else(box, stored):
    results, out = transcript(
        box,
        "set verification_enabled yes",
        "set verification_enabled maybe",
        f"link {stored.share_id} skip_verification perhaps",
        f"link {stored.share_id} protect_content sometimes",
    )
    assert results == [True, False, False, False]
    assert out[1] == ".. Bot settings: verification_enabled: verification_enabled is yes or no, not 'maybe'"
    assert out[2].endswith(": skip_verification is yes or no, not 'perhaps'")
    assert out[3].endswith(": protect_content is yes or no (or default), not 'sometimes'")
    assert BotSettings.load().verification_enabled is True
