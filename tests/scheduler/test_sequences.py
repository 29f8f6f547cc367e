"""Onboarding sequences: enrolled at the first /start, each step sent once when due, if its
condition holds and the user still wants messages."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from botapp import clock
from botapp.models import SequenceMessage, SequenceStep, TelegramUser
from botapp.telegram import retry
from botapp.telegram.gateway import TgUser
from inmemory_telegram.faults import LOSE_ANSWER
from scheduler.jobs.registry import job_run
from scheduler.jobs.sequence_send import SequenceSendSweep
from scheduler.jobs.sweep import Sweep
from tests.factories import ButtonClickFactory, SequenceFactory, meet

pytestmark = pytest.mark.django_db

BOB = TgUser(id=2002, first_name="Bob")


@pytest.fixture
def onboarding(settings):
    settings.PUBLIC_URL = "https://courier.example"
    sequence = SequenceFactory(name="Onboarding")
    sequence.steps.create(delay_seconds=600, text="Join us", buttons="Join | https://t.me/+news | joined")
    sequence.steps.create(delay_seconds=3600, text="Still not joined?", condition="not_clicked", condition_button="joined")
    sequence.steps.create(delay_seconds=7200, text="Thanks for joining!", condition="clicked", condition_button="joined")
    return sequence


def texts(telegram, user):
    return [m.text for m in telegram.bot_messages(user.id)]


def run(gateway):
    return job_run("send_sequence_messages", trigger="test", gateway=gateway)


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_steps_go_out_when_due_and_follow_the_click_condition(chat, alice, telegram, gateway, onboarding):
    chat(alice, "/start")
    chat(BOB, "/start")
    assert SequenceMessage.objects.count() == 6

    clock.clock_advance(timedelta(minutes=9))
    assert run(gateway).processed == 0
    clock.clock_advance(timedelta(minutes=2))
    run(gateway)
    assert texts(telegram, alice)[-1] == "Join us"

    ButtonClickFactory(user=TelegramUser.objects.get(telegram_id=alice.id), button="joined")
    clock.clock_advance(timedelta(hours=2))
    run(gateway)  # the 60-minute steps (the 120-minute ones, due too, wait for them)
    run(gateway)  # the 120-minute steps, a minute later in production

    assert texts(telegram, alice) == ["Hello Alice! I deliver files shared through my links.", "Join us", "Thanks for joining!"]
    assert texts(telegram, BOB) == ["Hello Bob! I deliver files shared through my links.", "Join us", "Still not joined?"]
    skipped = SequenceMessage.objects.filter(status="skipped").values_list("user__telegram_id", "error")
    assert sorted(skipped) == [(alice.id, "clicked joined"), (BOB.id, "did not click joined")]
    assert run(gateway).processed == 0  # nothing twice


def test_returning_users_are_not_enrolled_again(chat, alice, onboarding):
    chat(alice, "/start")
    chat(alice, "/start")
    assert SequenceMessage.objects.count() == 3


def test_a_sequence_can_be_limited_to_one_start_payload(chat, alice, onboarding):
    onboarding.start_payload = "spring"
    onboarding.save()
    chat(alice, "/start")
    chat(BOB, "/start spring")
    assert set(SequenceMessage.objects.values_list("user__telegram_id", flat=True)) == {BOB.id}


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_stop_skips_the_rest_and_blocking_is_noticed(chat, alice, telegram, gateway, onboarding):
    chat(alice, "/start")
    chat(BOB, "/start")
    chat(alice, "/stop")
    telegram.block(BOB.id)
    clock.clock_advance(timedelta(minutes=11))
    run(gateway)

    assert texts(telegram, alice)[-1].startswith("You will get no more messages")
    assert TelegramUser.objects.get(telegram_id=BOB.id).state == "blocked"
    assert dict(SequenceMessage.objects.filter(step__delay_seconds=600).values_list("user__telegram_id", "error")) == {
        alice.id: "cancelled by /stop",  # at once, not when it came due
        BOB.id: "blocked the bot",
    }


def test_a_crash_mid_send_is_sent_again_and_delivered_once(chat, alice, telegram, gateway, onboarding):
    chat(alice, "/start")
    clock.clock_advance(timedelta(minutes=11))
    sweep = SequenceSendSweep(gateway)
    (due,) = sweep.claim(10)  # marked sending...
    sweep.messages[due.step_id].send(gateway, due.chat_id, user_id=due.user_id, key=due.key)  # sent; then the worker dies
    clock.clock_advance(timedelta(minutes=6))
    job_run("reap_expired_claims", trigger="test")
    run(gateway)
    assert SequenceMessage.objects.get(step__delay_seconds=600).status == "sent"
    assert texts(telegram, alice).count("Join us") == 1


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_send_whose_answer_was_lost_is_sent_again_once_and_recorded_sent(
    chat, alice, telegram, gateway, onboarding, monkeypatch
):
    monkeypatch.setattr(retry, "CALL_TIMEOUT", 0.5)  # how long the gateway waits for an answer
    chat(alice, "/start")
    clock.clock_advance(timedelta(minutes=11))
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"})

    outcome = run(gateway)

    message = SequenceMessage.objects.get(step__delay_seconds=600)
    assert (message.status, outcome.processed, outcome.failed) == ("pending", 0, 1)  # outcome unknown
    assert message.retry_from is not None
    clock.clock_advance(timedelta(minutes=1))
    run(gateway)
    assert texts(telegram, alice).count("Join us") == 1  # it did arrive (the answer was lost): once, never twice
    assert SequenceMessage.objects.get(pk=message.pk).status == "sent"  # the repeat was refused: it had arrived
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"


@pytest.mark.django_db(transaction=True)
def test_steps_that_fell_due_together_go_in_order_one_per_run(chat, alice, telegram, gateway, onboarding):
    chat(alice, "/start")
    clock.clock_advance(timedelta(hours=3))  # the sender was down: every step is due
    first, second = run(gateway), run(gateway)
    assert (first.processed, second.processed) == (1, 1)
    assert texts(telegram, alice)[1:] == ["Join us", "Still not joined?"]
    third = run(gateway)
    assert third.processed == 1  # the clicked-only step, skipped
    assert list(SequenceMessage.objects.order_by("due_at").values_list("status", flat=True)) == ["sent", "sent", "skipped"]
    assert run(gateway).processed == 0


def test_a_held_step_keeps_the_users_later_steps_back(chat, alice, telegram, gateway, onboarding):
    chat(alice, "/start")
    clock.clock_advance(timedelta(hours=3))
    first = SequenceMessage.objects.order_by("due_at").first()
    SequenceMessage.objects.filter(pk=first.pk).update(status="sending", lease_until=clock.now() + timedelta(minutes=5))
    assert SequenceSendSweep(gateway).claim(10) == []  # another worker is sending the first step


def test_batch_queries_do_not_grow_with_batch_size(telegram, gateway, onboarding):
    step = onboarding.steps.get(delay_seconds=3600)  # a conditional step: the click lookup is part of the batch

    def queries_for(n):
        SequenceMessage.objects.all().delete()
        chats = [900_000 + n * 1000 + i for i in range(n)]
        users = TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=meet(telegram, c)) for c in chats])
        SequenceMessage.objects.bulk_create(
            [SequenceMessage(user=u, step=step, chat_id=u.telegram_id, due_at=clock.now() - timedelta(minutes=1)) for u in users]
        )
        sweep = SequenceSendSweep(gateway)
        with CaptureQueriesContext(connection) as ctx:
            assert Sweep(sweep, batch_size=n, in_flight=1).run()[0] == n
        return len(ctx.captured_queries)

    assert queries_for(10) == queries_for(200)


def test_admin_step_needs_a_button_key_for_a_condition(admin_client, plain_http):
    sequence = SequenceFactory()
    response = admin_client.post(
        reverse("admin:botapp_sequencestep_add"),
        {"sequence": sequence.pk, "delay_seconds": 300, "text": "hi", "media_kind": "", "media": "", "condition": "not_clicked"},
    )
    assert "condition_button" in response.context["adminform"].form.errors
    assert admin_client.get(reverse("admin:botapp_sequence_changelist")).status_code == 200


def test_admin_step_keeps_to_telegram_limits(admin_client, plain_http):
    sequence = SequenceFactory()
    response = admin_client.post(
        reverse("admin:botapp_sequencestep_add"),
        {"sequence": sequence.pk, "delay_seconds": 300, "text": "x" * 4097, "media_kind": "", "media": "", "condition": "always"},
    )
    assert "text" in response.context["adminform"].form.errors


def test_admin_refuses_a_payload_or_click_key_that_could_never_match(admin_client, plain_http):
    from botapp.models import Sequence

    sequence = SequenceFactory()
    step = admin_client.post(
        reverse("admin:botapp_sequencestep_add"),
        {
            "sequence": sequence.pk,
            "delay_seconds": 300,
            "text": "hi",
            "media_kind": "",
            "media": "",
            "condition": "clicked",
            "condition_button": "Join Us!",
        },
    )
    assert step.context["adminform"].form.errors["condition_button"] == [
        "A click key uses a-z, 0-9, _ and - only, as on the buttons that record it."
    ]
    data = {"name": "Spring", "enabled": "on", "start_payload": "spring sale!"}
    data |= {"steps-TOTAL_FORMS": 0, "steps-INITIAL_FORMS": 0, "steps-MIN_NUM_FORMS": 0, "steps-MAX_NUM_FORMS": 1000}
    page = admin_client.post(reverse("admin:botapp_sequence_add"), data)
    assert page.context["adminform"].form.errors["start_payload"] == [
        "A start payload uses A-Z, a-z, 0-9, _ and - only (Telegram's deep links carry no other)."
    ]
    response = admin_client.post(reverse("admin:botapp_sequence_add"), data | {"start_payload": "spring-sale_2"})
    assert response.status_code == 302 and Sequence.objects.filter(start_payload="spring-sale_2").exists()


# Outside a transaction: later migrations build indexes CONCURRENTLY (0020), which PostgreSQL does
# not do in one; the database is migrated forward again at the end.
@pytest.mark.django_db(transaction=True)
def test_migrating_turns_step_delays_in_minutes_into_seconds():
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("botapp", "0003_campaign_payloads")], [("botapp", "0004_step_delay_seconds")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        sequence = old.get_model("botapp", "Sequence").objects.create(name="Old")
        old.get_model("botapp", "SequenceStep").objects.create(sequence=sequence, delay_minutes=3, text="Three minutes")

        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)

        migrated = executor.loader.project_state(after).apps.get_model("botapp", "SequenceStep")  # fields of then
        assert migrated.objects.get(text="Three minutes").delay_seconds == 180
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_step_forty_seconds_after_start_goes_at_forty_seconds_not_before(chat, alice, telegram, gateway):
    SequenceFactory(name="Drip").steps.create(delay_seconds=40, text="Forty seconds in")
    chat(alice, "/start")

    clock.clock_advance(timedelta(seconds=39))
    assert run(gateway).processed == 0
    clock.clock_advance(timedelta(seconds=2))
    assert run(gateway).processed == 1
    assert texts(telegram, alice)[-1] == "Forty seconds in"
    assert str(SequenceStep.objects.get()) == "Drip: after 40 s"
