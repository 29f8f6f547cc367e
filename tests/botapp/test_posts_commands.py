"""Posts commands: the drip bot's /results (shared/seeds/002), the latest posts of a channel that
mention a word, cached for a set time, as a Telegram user and an operator see them."""

from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.bot.router import UNKNOWN
from botapp.models import KeptChannelPost, PostsCommand
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db

SIGNALS = -1003232270001
TITLE = "Latest results"


@pytest.fixture
def results(telegram, db):
    """/results: the latest 2 posts of the signals channel (the bot an admin there) that mention
    "position", kept an hour. Made before runbot starts: it hears the commands' channels then."""
    telegram.create_channel(SIGNALS, title="Signals")
    return PostsCommand.objects.create(name="results", channel_id=SIGNALS, word="position", count=2, cache_minutes=60)


def post(telegram, bot, text, chat_id=SIGNALS):
    message_id = telegram.post(chat_id, text)
    bot.pump.process(posts=True)
    return message_id


def link(message_id):
    return f"https://t.me/c/3232270001/{message_id}"


def answer_of(chat, user, command="/results"):
    (reply,) = chat(user, command)
    return reply.text


def test_results_lists_the_latest_matching_posts_newest_first_and_keeps_the_answer_its_time(results, chat, alice, bot, telegram):
    post(telegram, bot, "EURUSD position opened at 1.0850")
    post(telegram, bot, "Good morning, traders")
    second = post(telegram, bot, "Position closed: +40 pips")
    third = post(telegram, bot, "GBPUSD POSITION opened")

    assert answer_of(chat, alice) == f"{TITLE}\n• GBPUSD POSITION opened »\n• Position closed: +40 pips »"
    reply = telegram.bot_messages(alice.id)[-1]
    assert [e.url for e in reply.entities if hasattr(e, "url")] == [link(third), link(second)]

    post(telegram, bot, "USDJPY position opened")
    clock.clock_advance(timedelta(minutes=59))
    assert answer_of(chat, alice) == f"{TITLE}\n• GBPUSD POSITION opened »\n• Position closed: +40 pips »"
    clock.clock_advance(timedelta(minutes=2))
    assert answer_of(chat, alice) == f"{TITLE}\n• USDJPY position opened »\n• GBPUSD POSITION opened »"
    assert KeptChannelPost.objects.filter(chat_id=SIGNALS).count() == 5


def test_results_with_nothing_matching_says_so_and_other_channels_posts_are_not_kept(results, chat, alice, bot, telegram):
    post(telegram, bot, "position in the storage channel", chat_id=STORAGE)
    assert answer_of(chat, alice) == f"{TITLE}\nNothing to show yet."
    assert not KeptChannelPost.objects.exists()


def test_a_changed_or_disabled_command_answers_anew_at_once(results, chat, alice, bot, telegram):
    post(telegram, bot, "position one")
    post(telegram, bot, "position two")
    assert answer_of(chat, alice).count("•") == 2
    results.count = 1
    results.title = "Last signal"
    results.save()
    assert answer_of(chat, alice) == "Last signal\n• position two »"
    results.enabled = False
    results.save()
    assert answer_of(chat, alice) == UNKNOWN


@pytest.fixture
def latest(telegram, db):
    """/latest: the 20 latest posts of the signals channel, any word, never cached."""
    telegram.create_channel(SIGNALS, title="Signals")
    return PostsCommand.objects.create(name="latest", channel_id=SIGNALS, count=20, cache_minutes=0)


def test_long_posts_are_cut_so_that_the_answer_fits_one_message(latest, chat, alice, bot, telegram):
    for n in range(25):
        post(telegram, bot, f"{n} " + "📈 long signal text " * 60)

    text = answer_of(chat, alice, "/latest")

    assert text.count("•") == 20 and text.count("…") == 20
    assert text.splitlines()[1].startswith("• 24 📈")


def test_the_operator_defines_a_command_on_its_page_and_bad_values_are_form_errors(admin_client, plain_http):
    url = reverse("admin:botapp_postscommand_add")
    data = {"name": "/Results", "channel_id": "42", "word": "position", "count": "50", "cache_minutes": "60",
            "title": TITLE, "empty_text": "Nothing yet.", "enabled": "on"}  # fmt: skip
    errors = admin_client.post(url, data).context["adminform"].form.errors
    assert set(errors) == {"name", "channel_id", "count"}
    response = admin_client.post(url, data | {"name": "results", "channel_id": str(SIGNALS), "count": "5"})
    assert response.status_code == 302
    assert PostsCommand.objects.get().name == "results"
