"""Telegram counts lengths in UTF-16 code units (an emoji is 2), after its HTML is parsed: every
entry point (the admin's forms, the API, the sandbox's `set`) measures texts, captions and button
labels so, with one function (botapp.telegram.limits.utf16_length)."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from botapp.models import BotSettings, Broadcast
from botapp.models.buttons import buttons_parse
from botapp.services.captions import caption_cut, visible_length
from botapp.telegram.limits import CAPTION_LENGTH, TEXT_LENGTH, callback_data_length, utf16_length
from offline.sandbox import setting_edit

pytestmark = pytest.mark.django_db

EMOJI = "😀"  # U+1F600: one code point, two UTF-16 units
TOO_LONG_TEXT = EMOJI * 3000  # 3,000 code points, 6,000 units: over TEXT_LENGTH (4096)


def test_lengths_are_utf16_units_and_callback_data_is_utf8_bytes():
    assert utf16_length(EMOJI) == 2 and utf16_length("é") == 1 and utf16_length("a" * 10) == 10
    assert utf16_length(TOO_LONG_TEXT) == 6000 > TEXT_LENGTH > len(TOO_LONG_TEXT)
    assert callback_data_length("é" * 32) == 64 and callback_data_length(EMOJI) == 4
    assert visible_length(text=f"<b>{EMOJI}</b> &lt;") == 4


def test_the_previouscaption_cut_counts_emoji_as_two():
    cut = caption_cut(text=EMOJI * 600, limit=CAPTION_LENGTH)  # 1,200 units
    assert utf16_length(cut) <= CAPTION_LENGTH and cut.endswith("…") and cut.count(EMOJI) == 511


def test_the_admin_composer_refuses_3000_emoji_as_a_text_over_4096(admin_client, settings, plain_http):
    data = {"title": "Sale", "text": TOO_LONG_TEXT, "media_kind": "", "media": "", "buttons": ""}
    response = admin_client.post(reverse("admin:botapp_broadcast_add"), data)
    (error,) = response.context["adminform"].form.errors["text"]
    assert error.startswith("A message is at most 4096 characters as Telegram counts them") and "has 6000" in error
    assert not Broadcast.objects.exists()


def test_a_button_label_of_33_emoji_is_refused_in_the_grammar_and_in_bot_settings():
    label = EMOJI * 33  # 66 units: over BUTTON_TEXT_LENGTH (64)
    with pytest.raises(ValidationError, match="this one has 66"):
        buttons_parse(text=f"{label} | https://example.com")
    assert "this one has 66" in setting_edit(field="premium_button_text", value=label)
    assert setting_edit(field="premium_button_text", value=EMOJI * 32) == ""


def test_bot_settings_texts_are_measured_with_their_longest_placeholders():
    assert "has 6000" in setting_edit(field="welcome_text", value=TOO_LONG_TEXT)
    assert "has 6000" in setting_edit(field="deleted_notice_text", value=TOO_LONG_TEXT)
    near = "x" * 4090 + "{first_name}"  # 4,090 + a 64-character name
    assert "with 64-character names" in setting_edit(field="help_text", value=near)
    assert BotSettings.load().help_text != near
