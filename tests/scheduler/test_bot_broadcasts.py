"""Broadcasts started from Telegram: an admin's /broadcast (or /pbroadcast) reply, and marked posts
in the broadcast source channel. Sandbox transcripts through runbot's client; the workers' sender
(`send_broadcasts`, woken as the scheduler would wake it) runs on a worker's gateway; messages are
counted on the in-memory Telegram."""

import pytest

from botapp.bot.router import Router
from botapp.models import AdminCommand, Broadcast, BroadcastDelivery, TelegramUser
from offline.telegram.clients import OfflineBot
from tests.conftest import ADMIN, STORAGE, WAKE_UP
from tests.transcripts import said, sandbox

# The sender's pool threads read the users runbot stored, and broadcasts are queued on commit.
pytestmark = pytest.mark.django_db(transaction=True)

USERS = (1001, 1002, 1003)


@pytest.fixture
def box(telegram, bot, gateway, conf, sender_wakeups):
    return sandbox(telegram, bot, gateway)


@pytest.fixture
def audience(box):
    """Three users and the admin wrote /start; a fourth user stopped messages."""
    said(box, *(f"{u}: /start" for u in USERS), f"{ADMIN}: /start", "1004: /start", "1004: /stop")
    return [*USERS, ADMIN]


def test_broadcast_as_a_reply_asks_with_the_count_then_the_sender_copies_it(box, telegram, audience, sender_wakeups):
    out = said(box, "1000: Big news today", "1000 replies: /broadcast")
    assert out.texts(ADMIN)[-1] == "Send this message to 4 active users?"
    assert out.buttons(ADMIN)[-1] == ["✅ Send", "❌ Cancel"]
    assert all(out.to(u) == [] for u in USERS)  # nothing goes before Send
    draft = Broadcast.objects.get()
    assert (draft.status, draft.origin, draft.total) == ("draft", "command", 0)

    calls = len(telegram.calls)
    out = said(box, "1000 tap Send")
    assert sender_wakeups == [WAKE_UP]  # the scheduler was asked to wake a worker
    assert "job send_broadcasts: 4 processed, 0 failed (1 batch(es))" in out  # the sandbox ran it at once
    for user in audience:
        copies = [m for m in telegram.bot_messages(user) if m.text == "Big news today"]
        assert len(copies) == 1 and copies[0].forward_from is None, user  # no "forwarded from" header
    assert telegram.bot_messages(1004)[-1].text != "Big news today"
    assert telegram.count("messages.ForwardMessages", since=calls) == 4  # one call per user

    broadcast = Broadcast.objects.get()
    assert (broadcast.status, broadcast.total, broadcast.sent) == ("done", 4, 4)
    progress = [r for r in out.to(ADMIN, "edit")]
    assert progress[0]["text"].startswith(f"📤 Broadcast #{broadcast.pk}: 0 of 4 users")
    assert progress[-1]["text"] == (
        f"✅ Broadcast #{broadcast.pk} finished: 4 of 4 users got it.\nDelivered 4, blocked 0, failed 0, skipped 0."
    )
    assert "buttons" not in progress[-1]
    assert list(AdminCommand.objects.order_by("id").values_list("command", "ok")) == [
        ("broadcast", True),
        ("broadcast:send", True),
    ]


def test_pbroadcast_pins_each_delivered_message_silently(box, telegram, audience):
    said(box, "1000: Pinned rules", "1000 replies: /pbroadcast")
    calls = len(telegram.calls)
    out = said(box, "1000 tap Send")
    assert telegram.count("messages.UpdatePinnedMessage", since=calls) == 4
    for user in audience:
        (copy,) = [m for m in telegram.bot_messages(user) if m.text == "Pinned rules" and m.forward_from is None]
        assert copy.pinned
        (service,) = [m for m in telegram.messages(user) if m.service and m.reply_to == copy.id]
        assert service.silent  # pinned without a notification
        assert {"chat": user, "action": "pin", "message_ids": [copy.id], "text": ""} in out
    assert Broadcast.objects.get().pin


def test_an_album_is_broadcast_as_an_album(box, telegram, audience):
    said(box, "1000 sends album photo:a.jpg video:b.mp4 Two views")
    out = said(box, "1000 replies: /broadcast")
    assert out.texts(ADMIN)[-1] == "Send this album (2 items) to 4 active users?"
    said(box, "1000 tap Send")
    for user in USERS:
        album = [m for m in telegram.bot_messages(user) if m.media is not None]
        assert [m.media.file for m in album] == ["a.jpg", "b.mp4"]
        assert album[0].grouped_id is not None and album[0].grouped_id == album[1].grouped_id
        assert album[0].text == "Two views"


def test_cancel_sends_nothing(box, telegram, audience, sender_wakeups):
    said(box, "1000: Never mind", "1000 replies: /broadcast")
    out = said(box, "1000 tap Cancel")
    assert out.texts(ADMIN, "edit") == ["Broadcast cancelled: nothing was sent."]
    assert Broadcast.objects.get().status == "cancelled" and not BroadcastDelivery.objects.exists()
    assert sender_wakeups == []
    assert not box.feed("1000 tap Send")  # the button is gone from the edited message
    assert "has no message with a button" in box.out.getvalue().splitlines()[-1]


def test_the_progress_message_can_stop_a_running_broadcast(box, telegram, audience):
    said(box, "1000: Slow news", "1000 replies: /broadcast")
    msg, send = telegram.find_button(ADMIN, "✅ Send")
    telegram.tap(box.user(ADMIN), msg.id, send.callback_data)  # tapped, and no worker has run yet
    box.bot.pump.process()
    box.queued.clear()
    out = said(box, "1000 tap Cancel")
    broadcast = Broadcast.objects.get()
    assert broadcast.status == "cancelled"
    assert out.texts(ADMIN, "edit")[-1].startswith(f"⛔ Broadcast #{broadcast.pk} cancelled after 0 of 4 users.")


@pytest.fixture
def source_bot(telegram, db, shortener):
    """runbot with the storage channel as its broadcast source (BROADCAST_CHANNEL_ID)."""
    from botapp.services.users import user_access_hash

    offline = OfflineBot(
        telegram,
        lambda gw: Router(
            gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener, broadcast_channel_id=STORAGE
        ),
        peers=user_access_hash,
    )
    yield offline
    offline.stop()


@pytest.fixture
def channel_box(telegram, source_bot, gateway, conf, sender_wakeups):
    box = sandbox(telegram, source_bot, gateway)
    said(box, *(f"{u}: /start" for u in USERS), "1004: /start", "1004: /stop")
    return box


def test_post_chat_in_the_source_channel_reaches_every_active_user(channel_box, telegram):
    out = said(channel_box, "post /chat Hello")
    for user in USERS:
        assert out.texts(user) == ["Hello"]
    assert out.to(1004) == []
    broadcast = Broadcast.objects.get()
    assert (broadcast.origin, broadcast.status, broadcast.sent, broadcast.copy_chat_id, broadcast.copy_message_ids) == (
        "channel",
        "done",
        3,
        STORAGE,
        [1],
    )


def test_a_channel_post_keeps_its_text_as_written_and_its_media_and_gets_the_button(channel_box, telegram, conf):
    conf.channel_post_button = "Join us | https://t.me/+news"
    conf.save()
    # Typed, not formatted: the brackets are text (formatting arrives as entities, which
    # tests/botapp/telegram/test_entities.py follows into the HTML that is sent).
    telegram.post(STORAGE, "/chat <b>Sale</b> ends today & tomorrow")
    source_bot_pump(channel_box)
    message = telegram.bot_messages(1001)[-1]
    assert message.text == "<b>Sale</b> ends today & tomorrow" and not message.entities
    assert [[b.text for b in row] for row in message.buttons] == [["Join us"]]

    from inmemory_telegram.state import Media

    telegram.post(STORAGE, "/chat New cover", media=Media("photo", "cover.jpg"))
    source_bot_pump(channel_box)
    message = telegram.bot_messages(1002)[-1]
    assert (message.media, message.text) == (Media("photo", "cover.jpg"), "New cover")


def test_a_channel_post_reaches_users_with_its_brackets_and_ampersands(channel_box, telegram):
    out = said(channel_box, "post /chat Price < 5 & see <notes> here", "post /chat <b>unclosed")
    for user in USERS:
        assert out.texts(user) == ["Price < 5 & see <notes> here", "<b>unclosed"]
        assert not telegram.bot_messages(user)[-1].entities  # not bold: nobody made it bold


def source_bot_pump(box):
    box.bot.pump.process(posts=True)
    box.send_queued()


def test_posts_without_the_marker_or_with_nothing_after_it_are_not_broadcast(channel_box, telegram, conf):
    out = said(channel_box, "post Chapter 1", "post /chatter is not the marker", "post /chat")
    assert not Broadcast.objects.exists() and all(out.to(u) == [] for u in USERS)
    conf.channel_post_marker = "#news"
    conf.save()
    said(channel_box, "post #news Marker from Bot settings")
    assert telegram.bot_messages(1003)[-1].text == "Marker from Bot settings"
    assert TelegramUser.objects.get(telegram_id=1004).state == "stopped"


def test_pin_in_chat_in_the_admin_pins_each_delivered_message(telegram, gateway, admin_client, plain_http, sender_wakeups):
    from django.urls import reverse

    from botapp.services.broadcasts import broadcast_start
    from scheduler.jobs.registry import job_run
    from tests.factories import met_user

    users = [met_user(telegram) for _ in range(3)]
    response = admin_client.post(
        reverse("admin:botapp_broadcast_add"),
        {"title": "Rules", "text": "Read the <b>rules</b>", "media_kind": "", "media": "", "buttons": "", "pin": "on"},
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    broadcast = Broadcast.objects.get()
    assert broadcast.pin and broadcast.origin == "admin"
    broadcast_start(broadcast=broadcast)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    for user in users:
        (message,) = [m for m in telegram.bot_messages(user.telegram_id) if not m.service]
        assert message.pinned and message.text == "Read the rules"
    assert telegram.count("messages.UpdatePinnedMessage") == 3
