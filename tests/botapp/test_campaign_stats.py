"""Statistics an operator reads of the onboarding sequences: per step sent / skipped / failed /
pending, per button the users who clicked it, per campaign payload the users and how many
finished; in /stats (admins) and on the sequence's admin page, with a fixed number of queries."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from botapp import clock
from botapp.models import SequenceMessage
from botapp.services.campaign_stats import campaign_stats
from botapp.telegram.gateway import TgUser
from botapp.telegram.limits import TEXT_LENGTH, utf16_length
from scheduler.jobs.registry import job_run
from tests.conftest import ADMIN
from tests.factories import ButtonClickFactory, SequenceFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db

OPERATOR = TgUser(id=ADMIN, first_name="Op")


def enrolled(step, status, *, payload="", user=None):
    user = user or TelegramUserFactory(start_payload=payload)
    SequenceMessage.objects.create(user=user, step=step, chat_id=user.telegram_id, due_at=clock.now(), status=status)
    return user


@pytest.fixture
def campaigns(settings):
    """ "Onboarding" for every new user (2 steps, a tracked link and a tap button), "Spring" for
    the spring payload: users in every state of the life cycle."""
    settings.PUBLIC_URL = "https://courier.example"  # tracked links need it
    onboarding = SequenceFactory(name="Onboarding")
    first = onboarding.steps.create(
        delay_seconds=60, text="Hi", buttons="Join | https://t.me/+news | joined\n🎁 Bonus | tap:bonus || Docs | tap:docs"
    )
    last = onboarding.steps.create(delay_seconds=3600, text="Still there?", condition="not_clicked", condition_button="bonus")
    done = [enrolled(first, "sent", payload="ads") for _ in range(3)]
    enrolled(last, "sent", user=done[0])
    enrolled(last, "skipped", user=done[1])  # skipped past the last step: finished too
    enrolled(last, "pending", user=done[2])
    enrolled(first, "failed")
    enrolled(first, "interrupted")
    enrolled(first, "pending")
    ButtonClickFactory(user=done[0], button="bonus")
    ButtonClickFactory(user=done[1], button="bonus")
    ButtonClickFactory(user=done[1], button="docs")
    ButtonClickFactory(user=done[2], button="joined")
    spring = SequenceFactory(name="Spring", start_payload="spring")
    only = spring.steps.create(delay_seconds=0, text="Spring!")
    enrolled(only, "sent", payload="spring")
    return onboarding, spring


def test_stats_shows_each_steps_counts_each_buttons_unique_taps_and_each_payloads_finishers(chat, campaigns):
    text = chat(OPERATOR, "/stats")[0].text

    assert (
        "Sequences\n"
        "Onboarding (every new user)\n"
        "• after 1 min: 3 sent, 0 skipped, 2 failed, 1 pending\n"
        "• after 1 h: 1 sent, 1 skipped, 0 failed, 1 pending\n"
        "• clicks: joined 1 (link), bonus 2 (tap), docs 1 (tap)\n"
        "• ads: 3 users, 2 finished\n"
        "• no payload: 3 users, 0 finished\n"
        "Spring (campaign spring)\n"
        "• after 0 s: 1 sent, 0 skipped, 0 failed, 0 pending\n"
        "• spring: 1 user, 1 finished"
    ) in text


def test_stats_of_many_sequences_fit_one_message_and_say_how_many_more(chat):
    for n in range(80):
        sequence = SequenceFactory(name=f"Campaign {n:02d} 🚀 " + "x" * 40)
        for delay in (60, 600, 3600):
            sequence.steps.create(delay_seconds=delay, text="Hi")

    text = chat(OPERATOR, "/stats")[0].text

    assert utf16_length(text) < TEXT_LENGTH
    shown = text.count("🚀")
    assert 0 < shown < 80
    assert text.endswith(f"…and {80 - shown} more sequences")


def test_stats_queries_do_not_grow_with_sequences_steps_users_or_clicks(campaigns):
    def queries():
        with CaptureQueriesContext(connection) as ctx:
            campaign_stats()
        return len(ctx.captured_queries)

    few = queries()
    for n in range(5):
        more = SequenceFactory(name=f"More {n}")
        step = more.steps.create(delay_seconds=60, text="Hi", buttons=f"Go | tap:go{n}")
        for _ in range(4):
            ButtonClickFactory(user=enrolled(step, "sent"), button=f"go{n}")
    assert few == queries() == 5  # sequences, steps, step counts, clicks, payloads


def test_the_sequence_admin_page_shows_the_statistics_table(admin_client, plain_http, campaigns):
    onboarding, _ = campaigns
    page = admin_client.get(reverse("admin:botapp_sequence_change", args=[onboarding.pk])).content.decode()

    assert 'data-stats="steps"' in page
    rows = page.split('data-stats="steps"')[1].split("</table>")[0]
    assert ">after 1 min</td><td" in rows and ">3</td>" in rows and ">2</td>" in rows
    assert 'data-stats="buttons"' in page and ">bonus</td>" in page
    assert 'data-stats="payloads"' in page and ">ads</td>" in page
    assert 'class="chart"' in page  # unfold's bar chart of the same counts


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_new_user_reaching_the_last_step_counts_as_finished(chat, alice, gateway, telegram):
    sequence = SequenceFactory(name="Short")
    sequence.steps.create(delay_seconds=60, text="One")
    chat(alice, "/start promo")
    clock.clock_advance(timedelta(minutes=2))
    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    [stats] = campaign_stats()
    assert [(p.payload, p.users, p.finished) for p in stats.payloads] == [("promo", 1, 1)]
