"""Prepared posts (a step, a broadcast or the welcome copied from the posts channel) and callback
buttons (`Text | tap:key`), as a Telegram user and an operator see them."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from pyrogram import raw

from botapp import clock
from botapp.models import BotSettings, ButtonClick, SequenceMessage, TelegramUser
from botapp.models.buttons import buttons_parse
from botapp.telegram.console import console_gateway_use
from botapp.telegram.gateway import TgUser
from botapp.telegram.limits import CALLBACK_DATA_BYTES, callback_data_length
from inmemory_telegram.state import Media
from scheduler.jobs.registry import job_run
from tests.conftest import ADMIN
from tests.factories import ButtonClickFactory, SequenceFactory

pytestmark = pytest.mark.django_db

POSTS = -1001000000077
BOB = TgUser(id=2002, first_name="Bob")
JOINED = "✅ I joined | tap:joined | toast: Thanks for joining! | then: 🔎 Verify | https://t.me/verifybot"


@pytest.fixture
def posts(telegram, conf):
    """The posts channel, set in Bot settings, with a formatted photo post."""
    telegram.create_channel(POSTS, title="Prepared posts")
    conf.posts_channel_id = POSTS
    conf.save()
    bold = raw.types.MessageEntityBold(offset=0, length=10)
    return telegram.post(POSTS, "Launch day: read on", media=Media("photo", "launch.jpg"), entities=[bold])


@pytest.fixture
def console(gateway):
    """The console's Telegram session is the test's worker gateway (on the in-memory Telegram)."""
    console_gateway_use(gateway)
    yield gateway
    console_gateway_use(None)


def run(gateway):
    return job_run("send_sequence_messages", trigger="test", gateway=gateway)


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_step_copied_from_a_channel_post_reaches_the_user_with_its_media_formatting_and_buttons(
    chat, alice, telegram, gateway, posts
):
    step = SequenceFactory().steps.create(
        delay_seconds=60, post_id=posts, post_chat_id=POSTS, buttons=f"Read more | https://example.com/launch\n{JOINED}"
    )
    chat(alice, "/start")
    clock.clock_advance(timedelta(minutes=2))
    run(gateway)

    got = telegram.bot_messages(alice.id)[-1]
    assert (got.text, got.media) == ("Launch day: read on", Media("photo", "launch.jpg"))
    assert [(type(e).__name__, e.offset, e.length) for e in got.entities] == [("MessageEntityBold", 0, 10)]
    (link,), (tap,) = got.buttons
    assert (link.text, link.url) == ("Read more", "https://example.com/launch")
    assert tap.text == "✅ I joined" and tap.callback_data.startswith(f"tap:s{step.pk}.1.0:")
    assert callback_data_length(tap.callback_data) <= CALLBACK_DATA_BYTES
    assert SequenceMessage.objects.get().status == "sent"


@pytest.mark.django_db(transaction=True)
def test_a_step_whose_post_was_deleted_fails_with_the_reason_and_nothing_else(chat, alice, telegram, gateway, posts):
    SequenceFactory().steps.create(delay_seconds=60, post_id=posts, post_chat_id=POSTS)
    chat(alice, "/start")
    telegram.delete_post(POSTS, posts)
    clock.clock_advance(timedelta(minutes=2))
    run(gateway)

    row = SequenceMessage.objects.get()
    assert row.status == "failed" and row.error
    assert [m.text for m in telegram.bot_messages(alice.id)] == ["Hello Alice! I deliver files shared through my links."]


def step_form(**fields):
    return {"delay_seconds": 60, "text": "", "media_kind": "", "media": "", "condition": "always"} | fields


def test_a_post_the_channel_does_not_have_is_a_form_error_and_nothing_is_saved(admin_client, plain_http, posts, console):
    sequence = SequenceFactory()
    page = admin_client.post(reverse("admin:botapp_sequencestep_add"), step_form(sequence=sequence.pk, post_id=999))
    assert page.context["adminform"].form.errors["post_id"] == [
        "The posts channel has no post 999 (deleted, or not posted yet): open the post in the channel and copy the "
        "number at the end of its link (t.me/c/…/999)."
    ]
    assert not sequence.steps.exists()

    page = admin_client.post(
        reverse("admin:botapp_sequencestep_add"), step_form(sequence=sequence.pk, post_id=posts, text="Also this")
    )
    assert "leave text and media empty" in page.context["adminform"].form.errors["post_id"][0]

    saved = admin_client.post(reverse("admin:botapp_sequencestep_add"), step_form(sequence=sequence.pk, post_id=posts))
    assert saved.status_code == 302
    step = sequence.steps.get()
    assert (step.post_id, step.post_chat_id) == (posts, POSTS)
    page = admin_client.get(reverse("admin:botapp_sequencestep_change", args=[step.pk])).content.decode()
    assert f"Post {posts} of the posts channel" in page and "<b>Launch day</b>: read on" in page and "photo" in page


def test_a_post_without_a_posts_channel_is_a_form_error(admin_client, plain_http, conf, console):
    sequence = SequenceFactory()
    page = admin_client.post(reverse("admin:botapp_sequencestep_add"), step_form(sequence=sequence.pk, post_id=5))
    assert page.context["adminform"].form.errors["post_id"] == [
        "Set the posts channel in Bot settings first: a post is named by its message id there."
    ]
    assert not sequence.steps.exists()


def test_the_welcome_can_be_a_post_with_buttons(chat, alice, telegram, posts, conf):
    conf.welcome_post_id, conf.welcome_buttons = posts, JOINED
    conf.save()
    chat(alice, "/start")

    (welcome,) = telegram.bot_messages(alice.id)
    assert (welcome.text, welcome.media) == ("Launch day: read on", Media("photo", "launch.jpg"))
    assert [b.text for row in welcome.buttons for b in row] == ["✅ I joined"]


def test_a_welcome_post_deleted_since_falls_back_to_the_welcome_text(chat, alice, telegram, posts, conf):
    conf.welcome_post_id = posts
    conf.save()
    telegram.delete_post(POSTS, posts)
    assert [e.text for e in chat(alice, "/start")] == ["Hello Alice! I deliver files shared through my links."]


def test_a_tap_records_the_click_once_answers_its_toast_and_turns_into_its_next_button(chat, alice, telegram, bot, conf):
    conf.welcome_buttons = JOINED
    conf.save()
    chat(alice, "/start")
    welcome, button = telegram.find_button(alice.id, "✅ I joined")

    events = chat.tap(alice, "✅ I joined")

    assert [(e.action, e.text) for e in events if e.action == "answer"] == [("answer", "Thanks for joining!")]
    assert [b for row in telegram.message(alice.id, welcome.id).buttons for b in row][0].url == "https://t.me/verifybot"
    assert telegram.message(alice.id, welcome.id).text == welcome.text  # only the button changed
    telegram.tap(alice, welcome.id, button.callback_data)  # a second tap of the same button (a slow client)
    bot.pump.process()
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert list(ButtonClick.objects.filter(user=user).values_list("button", flat=True)) == ["joined"]


def test_a_forged_or_borrowed_callback_is_refused_and_records_nothing(chat, alice, telegram, bot, conf):
    conf.welcome_buttons = JOINED
    conf.save()
    chat(alice, "/start")
    chat(BOB, "/start")
    welcome, _ = telegram.find_button(alice.id, "✅ I joined")
    _, bobs = telegram.find_button(BOB.id, "✅ I joined")

    for data in ("tap:w.0.0:AAAAAAAAAAAAAAAAAAAAAA", bobs.callback_data, "tap:s999.0.0:x", "tap:w.0.0.t.t:abc"):
        before = len(telegram.events)
        telegram.tap(alice, welcome.id, data)
        bot.pump.process()
        assert [(e.action, e.text) for e in telegram.events[before:]] == [("answer", "This button is no longer available.")]
    assert not ButtonClick.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_only_if_not_tapped_skips_a_user_who_tapped_the_callback_button(chat, alice, telegram, gateway, conf):
    sequence = SequenceFactory()
    sequence.steps.create(delay_seconds=60, text="Did you join?", buttons=JOINED)
    sequence.steps.create(delay_seconds=600, text="Still not joined?", condition="not_clicked", condition_button="joined")
    chat(alice, "/start")
    chat(BOB, "/start")
    clock.clock_advance(timedelta(minutes=2))
    run(gateway)
    chat.tap(alice, "✅ I joined")
    clock.clock_advance(timedelta(minutes=10))
    run(gateway)

    assert [m.text for m in telegram.bot_messages(alice.id)][1:] == ["Did you join?"]
    assert [m.text for m in telegram.bot_messages(BOB.id)][1:] == ["Did you join?", "Still not joined?"]
    assert SequenceMessage.objects.get(user__telegram_id=alice.id, status="skipped").error == "clicked joined"


def test_a_tap_reply_is_sent_on_the_first_tap_only(chat, alice, telegram, conf):
    conf.welcome_buttons = "🎁 Bonus | tap:bonus | alert: Here it comes | reply: Your code: <b>WELCOME10</b>"
    conf.save()
    chat(alice, "/start")
    first = chat.tap(alice, "🎁 Bonus")
    second = chat.tap(alice, "🎁 Bonus")

    assert [(e.action, e.text, e.alert) for e in first] == [
        ("answer", "Here it comes", True),
        ("send", "Your code: WELCOME10", False),
    ]
    assert [(e.action, e.text) for e in second] == [("answer", "Here it comes")]


def test_stats_counts_every_tap_per_button_key_and_their_total(chat, alice, conf):
    """The drip bot's /stats counted clicks per button type and their total (shared/seeds/002), not
    the users who clicked: every tap counts, and the clicks an import carried."""
    conf.welcome_buttons = "🎁 Bonus | tap:bonus || 📘 Docs | tap:docs"
    conf.save()
    chat(alice, "/start")
    chat(BOB, "/start")
    for user, label in ((alice, "🎁 Bonus"), (alice, "🎁 Bonus"), (alice, "🎁 Bonus"), (BOB, "🎁 Bonus"), (BOB, "📘 Docs")):
        chat.tap(user, label)
    ButtonClickFactory(button="join_channel", count=2)  # imported: two rows of the old button_clicks

    text = chat(TgUser(id=ADMIN, first_name="Op"), "/stats")[0].text

    assert "Button clicks: 7 (bonus 4, join_channel 2, docs 1)" in text.splitlines()
    assert [(c.button, c.count) for c in ButtonClick.objects.filter(user__telegram_id=alice.id)] == [("bonus", 3)]


def test_a_member_only_tap_asks_telegram_and_counts_once_the_user_has_joined(chat, alice, telegram, conf):
    telegram.create_channel(-1003232273065, title="Signals")
    conf.welcome_buttons = "✅ Verify | tap:verify | member: -1003232273065 | toast: Verified | then: Done | tap:done"
    conf.save()
    chat(alice, "/start")

    assert [(e.action, e.text, e.alert) for e in chat.tap(alice, "✅ Verify")] == [
        ("answer", "You have not joined the channel yet: join it, then tap again.", True)
    ]
    assert not ButtonClick.objects.exists()
    telegram.join(-1003232273065, alice.id)
    assert [(e.action, e.text or "") for e in chat.tap(alice, "✅ Verify") if e.action == "answer"] == [("answer", "Verified")]
    assert telegram.find_button(alice.id, "Done")  # and it turned
    assert list(ButtonClick.objects.values_list("button", flat=True)) == ["verify"]


@pytest.mark.parametrize("value", ["42", "@channel", ""])
def test_a_member_option_that_is_not_a_channel_id_is_refused(value):
    with pytest.raises(ValidationError) as refused:
        buttons_parse(text=f"Verify | tap:verify | member: {value}")
    assert "member: " in refused.value.messages[0] and "-1001234567890" in refused.value.messages[0]


def test_the_grammar_refuses_what_telegram_would_and_counts_in_utf16():
    with pytest.raises(ValidationError) as bad:
        buttons_parse(text="Hi | tap:Bad Key\nHi | tap:ok | toast: a | alert: b\nHi | tap:ok | " + "toast: " + "😀" * 101)
    assert bad.value.messages == [
        "Line 1: a tap key uses a-z, 0-9, _ and - only (got Bad Key).",
        "Line 2: a tap answers with a toast or an alert, not both.",
        "Line 3: a toast or alert is at most 200 characters as Telegram counts them (an emoji counts 2); this one has 202.",
    ]
    assert buttons_parse(text="Hi | tap:ok | toast: " + "😀" * 100)[0][0].answer == "😀" * 100
    with pytest.raises(ValidationError):
        buttons_parse(text="A | tap:a" + " | then: A | tap:a" * 6)  # deeper than THEN_DEPTH: its data would not fit


def test_a_broadcast_of_a_post_is_a_copy_with_its_buttons(admin_client, plain_http, posts, console, telegram, gateway):
    from botapp.models import Broadcast
    from botapp.services.broadcasts import BroadcastMessage

    data = {"title": "Launch", "post_id": posts, "text": "", "media_kind": "", "media": "", "buttons": JOINED}
    assert admin_client.post(reverse("admin:botapp_broadcast_add"), data).status_code == 302
    broadcast = Broadcast.objects.get()
    assert (broadcast.copy_chat_id, broadcast.copy_message_ids) == (POSTS, [posts])
    page = admin_client.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    assert "<b>Launch day</b>: read on" in page

    gateway.peers_remember(telegram.users_meet([3003]))
    sent = BroadcastMessage.of(broadcast).send(gateway, 3003, user_id=1)
    got = telegram.message(3003, sent.message_id)
    assert got.media == Media("photo", "launch.jpg") and got.buttons[0][0].callback_data.startswith(f"tap:b{broadcast.pk}.0.0:")
    bad = admin_client.post(reverse("admin:botapp_broadcast_add"), data | {"post_id": 4242})
    assert "has no post 4242" in bad.context["adminform"].form.errors["post_id"][0]
    assert BotSettings.load().posts_channel_id == POSTS
