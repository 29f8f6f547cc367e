"""prune_deliveries: per-user rows of finished broadcasts, settled sequence messages and old
button clicks go after DELIVERY_RETENTION_DAYS, in bounded chunks; what the operator sees stays."""

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.admin.templatetags.admin_list import results
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, ButtonClick, SequenceMessage, TelegramUser
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from scheduler.jobs import retention
from scheduler.jobs.registry import job_run
from scheduler.jobs.retention import prune_deliveries
from scheduler.models import JobRun
from tests.factories import (
    BroadcastDeliveryFactory,
    BroadcastFactory,
    ButtonClickFactory,
    JobRunFactory,
    SequenceFactory,
    SequenceMessageFactory,
    SequenceStepFactory,
    TelegramUserFactory,
    met_user,
)

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def retention_days(settings):
    settings.DELIVERY_RETENTION_DAYS = 30


def ago(days):
    return clock.now() - days * DAY


def broadcast(status, finished_days_ago=None, **fields):
    finished = ago(finished_days_ago) if finished_days_ago is not None else None
    return BroadcastFactory(status=status, finished_at=finished, **fields)


def deliveries(of, *statuses, **fields):
    """One row per status, each for a user of its own."""
    return [BroadcastDeliveryFactory(broadcast=of, status=status, **fields) for status in statuses]


def message(step, status, due_days_ago, sent_days_ago=None, **fields):
    sent_at = ago(sent_days_ago) if sent_days_ago is not None else None
    return SequenceMessageFactory(step=step, status=status, due_at=ago(due_days_ago), sent_at=sent_at, **fields)


def click(button, last_days_ago, first_days_ago=None, **fields):
    return ButtonClickFactory(
        button=button, clicked_at=ago(first_days_ago or last_days_ago), last_clicked_at=ago(last_days_ago), **fields
    )


def pks(rows):
    return {r.pk for r in rows}


def left(model):
    return set(model.objects.values_list("pk", flat=True))


def test_rows_past_the_retention_go_newer_and_unfinished_ones_stay():
    # Broadcasts: rows go 30 days after the broadcast ended (done or cancelled).
    old_done = broadcast("done", 31)
    gone_d = deliveries(old_done, "sent", "failed", "blocked", "interrupted", "deleted")
    # Telegram's 48 h closed before the deleter could remove this one: nothing is pending any more
    gone_d += deliveries(old_done, "expired")
    kept_d = deliveries(old_done, "sent", delete_at=ago(1 / 24))  # its lifetime deletion is still to run
    old_cancelled = broadcast("cancelled", 31)
    gone_d += deliveries(old_cancelled, "pending", "pending", "sent")  # never sent after the cancel: they go too
    kept_d += deliveries(old_cancelled, "sending")  # caught mid-call: the reaper settles it first
    one_off = broadcast("done", 45, scheduled_at=ago(45))  # a scheduled one-off message
    gone_d += deliveries(one_off, "sent", "blocked")
    kept_d += deliveries(broadcast("done", 29), "sent", "failed")
    kept_d += deliveries(broadcast("cancelled", 29), "pending")
    kept_d += deliveries(broadcast("sending", started_at=ago(40)), "sent", "pending", "sending")  # unfinished, however old
    kept_d += deliveries(broadcast("queued", started_at=ago(40)), "pending")

    # Sequence messages: 30 days after they were sent, or due when never sent.
    sequence = SequenceFactory(name="Onboarding")
    always = sequence.steps.create(delay_seconds=600, text="Join us", buttons="Join | https://t.me/+news | joined")
    always_keyed = sequence.steps.create(delay_seconds=1200, text="Hi", condition_button="joined")  # a leftover key: no condition
    not_clicked = sequence.steps.create(delay_seconds=3600, text="Still?", condition="not_clicked", condition_button="joined")
    clicked = sequence.steps.create(delay_seconds=7200, text="Thanks!", condition="clicked", condition_button="joined")
    gone_m = [
        message(always, "sent", 32, sent_days_ago=31),
        message(always, "skipped", 31),
        message(always, "failed", 31),
        message(always, "interrupted", 31),
    ]
    kept_m = [
        message(always, "sent", 31, sent_days_ago=29),  # sent late (the sender was down): counted from the send
        message(always, "pending", 40),
        message(always, "sending", 40),
        message(always, "sent", 29, sent_days_ago=29),
        message(always, "skipped", 29),
    ]

    # Clicks: 30 days after the last one, unless a pending conditional step of that user looks at it.
    gone_c = [click("joined", 31), click("joined", 40, first_days_ago=60)]
    kept_c = [click("joined", 1, first_days_ago=60)]  # clicked again lately
    for step in (not_clicked, clicked):
        user = TelegramUserFactory()
        kept_m.append(message(step, "pending", -1, user=user))
        kept_c.append(click("joined", 40, user=user))
    user = TelegramUserFactory()  # a pending step on another key
    kept_m.append(message(not_clicked, "pending", -1, user=user))
    gone_c.append(click("news", 40, user=user))
    user = TelegramUserFactory()  # a pending step with no condition
    kept_m.append(message(always_keyed, "pending", -1, user=user))
    gone_c.append(click("joined", 40, user=user))
    user = TelegramUserFactory()  # the conditional step is settled already
    gone_m.append(message(not_clicked, "skipped", 31, user=user))
    gone_c.append(click("joined", 40, user=user))
    user = TelegramUserFactory()  # settled lately: the message stays, the click no step needs goes
    kept_m.append(message(clicked, "sent", 2, sent_days_ago=2, user=user))
    gone_c.append(click("joined", 40, user=user))

    totals = list(Broadcast.objects.order_by("pk").values_list("status", "total", "sent", "failed", "blocked", "finished_at"))
    expected = f"{len(gone_d)} broadcast deliveries, {len(gone_m)} sequence messages, {len(gone_c)} button clicks"
    assert (len(gone_d), len(gone_m), len(gone_c)) == (11, 5, 6)

    dry = job_run("prune_deliveries", trigger="test", dry_run=True)
    assert (dry.processed, dry.failed, dry.detail) == (22, 0, f"would delete {expected} older than 30 days")
    assert (left(BroadcastDelivery), left(SequenceMessage), left(ButtonClick)) == (
        pks(gone_d + kept_d),
        pks(gone_m + kept_m),
        pks(gone_c + kept_c),
    )

    outcome = job_run("prune_deliveries", trigger="test")

    assert (outcome.processed, outcome.failed, outcome.detail) == (22, 0, f"deleted {expected} older than 30 days")
    assert left(BroadcastDelivery) == pks(kept_d)
    assert left(SequenceMessage) == pks(kept_m)
    assert left(ButtonClick) == pks(kept_c)
    assert list(Broadcast.objects.order_by("pk").values_list("status", "total", "sent", "failed", "blocked", "finished_at")) == (
        totals
    )
    assert job_run("prune_deliveries", trigger="test").processed == 0  # nothing twice


def test_the_retention_is_a_setting(settings):
    settings.DELIVERY_RETENTION_DAYS = 7
    b = broadcast("done", 8)
    deliveries(b, "sent")
    kept = deliveries(broadcast("done", 6), "sent")
    step = SequenceStepFactory()
    old_message, new_message = message(step, "sent", 8, sent_days_ago=8), message(step, "sent", 6, sent_days_ago=6)
    old_click, new_click = click("k", 8), click("k", 6)

    outcome = job_run("prune_deliveries", trigger="test")

    assert outcome.detail == "deleted 1 broadcast deliveries, 1 sequence messages, 1 button clicks older than 7 days"
    assert (left(BroadcastDelivery), left(SequenceMessage), left(ButtonClick)) == ({kept[0].pk}, {new_message.pk}, {new_click.pk})
    assert (
        not SequenceMessage.objects.filter(pk=old_message.pk).exists()
        and not ButtonClick.objects.filter(pk=old_click.pk).exists()
    )


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def broadcast_list(operator):
    """The broadcast list as the operator reads it: every cell of every row."""
    response = operator.get(reverse("admin:botapp_broadcast_changelist"))
    assert response.status_code == 200
    return [list(row) for row in results(response.context["cl"])], response.content.decode()


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_pruned_broadcast_keeps_the_totals_the_operator_sees(operator, telegram, gateway, sender_wakeups):
    reached = [met_user(telegram) for _ in range(3)]
    blocks = met_user(telegram)
    telegram.block(blocks.telegram_id)
    TelegramUserFactory()  # never wrote to the bot: no access hash, not a user of the bot (nothing sent)
    sale = BroadcastFactory(title="Sale", text="50% off", delete_after_minutes=60)
    assert broadcast_start(broadcast=sale) == 5
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    clock.clock_advance(timedelta(hours=2))
    assert job_run("delete_expired_broadcasts", trigger="test", gateway=gateway).processed == 3
    news = BroadcastFactory(title="News", text="soon")
    assert broadcast_start(broadcast=news) == 4  # the one who blocked the bot is no longer active
    assert broadcast_cancel(broadcast=news) == 4
    sale.refresh_from_db()
    assert (sale.status, sale.total, sale.sent, sale.blocked, sale.failed, sale.not_users) == ("done", 5, 3, 1, 0, 1)
    assert sorted(BroadcastDelivery.objects.filter(broadcast=sale).values_list("status", flat=True)) == [
        "blocked",
        *["deleted"] * 3,
        "not_user",
    ]
    sent = BroadcastDelivery.objects.filter(broadcast=sale, status="deleted").values_list("chat_id", "message_id")
    assert sorted(chat for chat, _ in sent) == sorted(u.telegram_id for u in reached)
    assert all(telegram.message(chat, message_id).deleted for chat, message_id in sent)

    clock.clock_advance(31 * DAY)
    before, html = broadcast_list(operator)
    assert "5/5 (100%)" in html and "0/4 (0%)" in html

    assert job_run("prune_deliveries", trigger="test").processed == 9

    assert not BroadcastDelivery.objects.exists()
    after, html = broadcast_list(operator)
    assert after == before
    assert "5/5 (100%)" in html and "0/4 (0%)" in html
    assert Broadcast.objects.get(pk=sale.pk).sent == 3


def test_rows_go_in_deletes_of_at_most_chunk_size_rows_and_kept_rows_between_them_stay():
    big, small = broadcast("done", 40), broadcast("cancelled", 35)
    gone_d, kept = [], []
    for i in range(25):
        gone_d += deliveries(big, "sent")
        if i % 10 == 5:  # kept rows between the ones that go
            kept += deliveries(big, "sent", delete_at=ago(0.01))
    gone_d += deliveries(small, "pending", "pending", "pending")
    step = SequenceStepFactory()
    newer = message(step, "skipped", 20)
    for _ in range(12):
        message(step, "skipped", 40)
    TelegramUser.objects.bulk_create([TelegramUser(telegram_id=900_000 + i) for i in range(21)])
    ButtonClick.objects.bulk_create(
        [ButtonClick(user=u, button="k", last_clicked_at=ago(40)) for u in TelegramUser.objects.filter(telegram_id__gte=900_000)]
    )
    recent_click = click("k", 1)

    deleted = []  # rows each DELETE removed, per table

    def count_deletes(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("DELETE"):
            deleted.append((sql.split('"')[1], context["cursor"].rowcount))
        return result

    with connection.execute_wrapper(count_deletes):
        outcome = prune_deliveries(chunk_size=10)

    assert max(n for _, n in deleted) == 10  # no statement removes more than a chunk
    per_table = {table: sum(n for t, n in deleted if t == table) for table, _ in deleted}
    assert per_table == {"botapp_broadcastdelivery": 28, "botapp_sequencemessage": 12, "botapp_buttonclick": 21}
    assert outcome.processed == 61
    assert left(BroadcastDelivery) == pks(kept) and len(kept) == 2 and len(gone_d) == 28
    assert left(SequenceMessage) == {newer.pk} and left(ButtonClick) == {recent_click.pk}


def test_a_run_stops_between_chunks_when_its_budget_is_spent_and_the_next_one_carries_on(monkeypatch):
    b = broadcast("done", 40)
    deliveries(b, *["sent"] * 25)
    ticks = iter(range(1000))
    monkeypatch.setattr(retention, "monotonic", lambda: next(ticks))  # each look at the clock: one second later

    outcome = prune_deliveries(chunk_size=10, time_budget=1.5)  # time for one chunk

    assert (outcome.processed, outcome.detail) == (
        10,
        "deleted 10 broadcast deliveries, 0 sequence messages, 0 button clicks older than 30 days;"
        " time budget spent, the next run continues",
    )
    assert BroadcastDelivery.objects.count() == 15
    outcome = prune_deliveries(chunk_size=10, time_budget=100)
    assert (outcome.processed, outcome.detail) == (
        15,
        "deleted 15 broadcast deliveries, 0 sequence messages, 0 button clicks older than 30 days",
    )
    assert not BroadcastDelivery.objects.exists()


def test_the_command_dry_run_counts_without_deleting():
    deliveries(broadcast("done", 31), "sent", "failed")
    deliveries(broadcast("done", 1), "sent")
    message(SequenceStepFactory(), "skipped", 31)
    click("k", 31)
    before = (left(BroadcastDelivery), left(SequenceMessage), left(ButtonClick))

    out = StringIO()
    call_command("prune_deliveries", "--dry-run", stdout=out)

    assert out.getvalue().strip() == (
        "prune_deliveries: dry run: 4 processed, 0 failed"
        " (would delete 2 broadcast deliveries, 1 sequence messages, 1 button clicks older than 30 days)"
    )
    assert (left(BroadcastDelivery), left(SequenceMessage), left(ButtonClick)) == before
    assert not JobRun.objects.exists()

    out = StringIO()
    call_command("prune_deliveries", stdout=out)

    assert out.getvalue().strip() == (
        "prune_deliveries: 4 processed, 0 failed"
        " (deleted 2 broadcast deliveries, 1 sequence messages, 1 button clicks older than 30 days)"
    )
    assert BroadcastDelivery.objects.count() == 1 and not SequenceMessage.objects.exists() and not ButtonClick.objects.exists()
    assert JobRun.objects.get().job == "prune_deliveries"


def test_it_runs_nightly_and_shows_on_the_jobs_page(operator):
    c = PeriodicTask.objects.get(task="scheduler.prune_deliveries").crontab
    assert (c.minute, c.hour, c.day_of_week, c.day_of_month, c.month_of_year) == ("45", "3", "*", "*", "*")
    JobRunFactory(job="prune_deliveries", processed=12)

    response = operator.get(reverse("admin:scheduler_backgroundjob_changelist"))

    rows = {r.job.name: r for r in response.context["rows"]}
    assert rows["prune_deliveries"].schedule_text.startswith("daily at 03:45")
    assert rows["prune_deliveries"].last.processed == 12
    assert "Delete old broadcast deliveries, sequence messages and button clicks" in response.content.decode()
