"""Deletions are never given up quietly: one Telegram does not make is tried again with back-off
(1, 2, 4, 8, then every 15 minutes) until Telegram's 48 h window closes, and a row past it stays,
`expired`: logged, listed in the console and counted on the dashboard. Time is compressed: the
clock moves a minute between beat's runs, and the in-memory Telegram's outage is on that clock."""

import collections
import logging
from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.models import BroadcastDelivery, PendingDeletion, TelegramUser
from botapp.telegram.limits import DELETE_WINDOW
from scheduler.jobs.deletions import DeletionSweep
from scheduler.jobs.registry import JOBS, job_run
from scheduler.jobs.sweep import LEASE, RowsHandedBack
from scheduler.models import JobRun
from tests.factories import BroadcastDeliveryFactory, BroadcastFactory

DELETE = "messages.DeleteMessages"
NOTICE = "Previous message was deleted."
OUTAGE = timedelta(minutes=10)


@pytest.fixture
def quick_gateway(telegram):
    """A worker's gateway whose own back-off between attempts of a call takes no time."""
    from botapp.services.users import user_access_hash
    from offline.telegram.clients import offline_gateway

    gw = offline_gateway(telegram, peers=user_access_hash, sleep=lambda s: None)
    yield gw
    gw.stop()


def delivered(telegram, n: int, *, base: int, sent_ago: timedelta = timedelta(0)) -> dict[int, int]:
    """n users who each got a file, its deletion due now; {message id: chat}."""
    hashes = telegram.users_meet(range(base, base + n))
    TelegramUser.objects.bulk_create([TelegramUser(telegram_id=c, access_hash=h) for c, h in hashes.items()])
    chats = list(hashes)
    ids = telegram.bot_sent(chats, "Your file")
    PendingDeletion.objects.bulk_create(
        [
            PendingDeletion(chat_id=c, message_ids=[m], delete_at=clock.now(), share_id="s", created_at=clock.now() - sent_ago)
            for c, m in zip(chats, ids, strict=True)
        ]
    )
    return dict(zip(ids, chats, strict=True))


class Deployment:
    """The deleter as a deployment runs it, on a compressed clock: woken when its next row is due
    (a run that did something arms a wake-up for the earliest due row, a retry's included:
    scheduler/wakeup.py), the clock moved there first. `tries`: (start, end) of the runs that
    asked Telegram to delete, in minutes since the start."""

    def __init__(self, telegram, gateway, job: str = "delete_due_messages"):
        self.telegram, self.gateway, self.job = telegram, gateway, job
        self.start = clock.now()
        self.tries: list[tuple[float, float]] = []

    def minutes(self) -> float:
        return (clock.now() - self.start).total_seconds() / 60

    def run(self, *, at: float | None = None):
        """Run the job now, or at minute `at` (by then, if the clock has not passed it)."""
        if at is not None and (move := self.start + timedelta(minutes=at) - clock.now()) > timedelta(0):
            clock.clock_advance(move)
        before, started = self.telegram.count(DELETE), self.minutes()
        outcome = job_run(self.job, trigger="wakeup", gateway=self.gateway)
        if self.telegram.count(DELETE) > before:
            self.tries.append((started, self.minutes()))
        return outcome

    def run_until(self, minutes: float, check=lambda minute, outcome: None) -> None:
        """Each wake-up up to minute `minutes`; `check(minute, outcome)` after each run."""
        while (due := JOBS[self.job].due_next()) is not None and due <= self.start + timedelta(minutes=minutes):
            started = max(0.0, (due - self.start).total_seconds() / 60)
            check(started, self.run(at=started))

    def waits(self) -> list[float]:
        """Minutes from the end of each try to the start of the next, rounded to the second."""
        return [round((b[0] - a[1]) * 60) / 60 for a, b in zip(self.tries, self.tries[1:], strict=False)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error, code",
    [
        # Telegram's 5xx: kurigram asks again 10 times a second apart, then the gateway twice more.
        pytest.param("INTERNAL", None, id="500 INTERNAL", marks=pytest.mark.slow),
        pytest.param("FROZEN_METHOD_INVALID", 420, id="a 420 without seconds"),
        pytest.param("FLOOD_WAIT_900", None, id="a FloodWait longer than any sender waits"),
        pytest.param("DELETE_UNAVAILABLE", 400, id="a refusal Telegram never sent before"),
    ],
)
def test_telegram_refusing_deletions_for_ten_minutes_loses_none(telegram, quick_gateway, conf, error, code):
    messages = delivered(telegram, 500, base=400_000)  # one claim: the 5xx runs take kurigram's 30 s once
    telegram.fail_next(error, methods={DELETE}, seconds=OUTAGE.total_seconds(), code=code)
    deployment = Deployment(telegram, quick_gateway)
    failures = collections.Counter()  # rows by their failed tries, as the outage ends

    def none_dropped(minute, outcome):
        if minute < OUTAGE.total_seconds() / 60:
            rows = PendingDeletion.objects.filter(status="pending")
            assert rows.count() == 500, f"a row dropped at minute {minute:.1f}"
            assert outcome.processed == 0
            failures.clear()
            failures.update(rows.values_list("attempts", flat=True))

    deployment.run_until(60, none_dropped)

    # Each row tried 4 times in the outage (1, 2 and 4 minutes after each failed try), and 8
    # minutes after the last the first try after it deletes them all.
    assert failures == {4: 500}
    assert deployment.tries[-1][1] < OUTAGE.total_seconds() / 60 + 8 + 2
    assert telegram.live(messages) == []
    assert telegram.received(text=NOTICE) == dict.fromkeys(messages.values(), 1)  # each user told once
    assert not PendingDeletion.objects.exists()
    assert set(JobRun.objects.values_list("status", flat=True)) == {"ok"}  # Telegram's refusals are no failure of ours


@pytest.mark.django_db
def test_an_outage_of_hours_loses_no_deletion_that_can_still_be_made(telegram, quick_gateway, conf):
    messages = delivered(telegram, 100, base=410_000)
    telegram.fail_next("FLOOD_WAIT_900", methods={DELETE}, seconds=3 * 3600)
    deployment = Deployment(telegram, quick_gateway)

    deployment.run_until(240)

    assert deployment.waits() == [1, 2, 4, 8] + [15] * 11  # then every 15 minutes
    assert 180 <= deployment.tries[-1][0] < 181  # the first try after the outage deletes
    assert telegram.live(messages) == [] and not PendingDeletion.objects.exists()
    assert telegram.received(text=NOTICE) == dict.fromkeys(messages.values(), 1)


@pytest.mark.django_db
def test_a_deletion_failing_until_the_window_closes_is_expired_after_its_last_try(telegram, quick_gateway, conf, caplog):
    # Sent 47 h 40 min ago: 20 minutes of Telegram's window are left when the deletion comes due.
    messages = delivered(telegram, 1, base=420_000, sent_ago=DELETE_WINDOW - timedelta(minutes=20))
    row = PendingDeletion.objects.get()
    telegram.fail_next("FLOOD_WAIT_900", methods={DELETE}, seconds=3600)
    deployment = Deployment(telegram, quick_gateway)

    with caplog.at_level(logging.WARNING, logger="botapp.services.autodelete"):
        deployment.run_until(60)

    # 1, 2, 4, 8, then the last try a minute before the window closes (not 15 minutes later).
    assert [round(start) for start, _ in deployment.tries] == [0, 1, 3, 7, 15, 19]
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("expired", 5)  # kept, with the tries that failed before the last
    assert telegram.live(messages) == list(messages)  # still in the chat
    assert telegram.received(text=NOTICE) == {}  # and nobody told otherwise
    (line,) = [r for r in caplog.records if "expired" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert f"deletion={row.id} chat=420000" in line.getMessage() and "6 failed tries" in line.getMessage()
    assert "FloodWait: wait 900s" in line.getMessage()  # what the last try met
    assert deployment.run().processed == 0 and len(deployment.tries) == 6  # never tried again


@pytest.mark.django_db
def test_a_deletion_past_the_window_is_expired_shown_in_the_console_and_counted(
    telegram, gateway, conf, admin_client, plain_http, caplog
):
    old = delivered(telegram, 1, base=430_000, sent_ago=DELETE_WINDOW + timedelta(minutes=5))  # workers were down
    fresh = delivered(telegram, 1, base=430_100)
    expired = PendingDeletion.objects.get(chat_id=430_000)

    with caplog.at_level(logging.WARNING, logger="botapp.services.autodelete"):
        outcome = job_run("delete_due_messages", trigger="beat", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (1, 1)
    assert list(PendingDeletion.objects.values_list("id", "status")) == [(expired.id, "expired")]
    assert telegram.live(old) == list(old) and telegram.live(fresh) == []
    assert f"deletion={expired.id} chat=430000 messages={list(old)} expired" in caplog.text
    # The console lists it under the status filter, and the dashboard counts it.
    listed = admin_client.get(reverse("admin:botapp_pendingdeletion_changelist") + "?status__exact=expired")
    assert listed.status_code == 200 and list(listed.context["cl"].result_list) == [expired]
    dashboard = admin_client.get(reverse("admin:index"))
    assert dashboard.context["expired"] == {"files": 1, "broadcasts": 0}
    assert 'data-count="expired_deletions"' in dashboard.content.decode()


@pytest.mark.django_db
def test_a_row_handed_back_after_our_own_error_is_never_dropped(telegram, gateway, conf, monkeypatch):
    messages = delivered(telegram, 3, base=440_000)
    original = gateway.delete_private

    def broken(messages):
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(gateway, "delete_private", broken)
    deployment = Deployment(telegram, gateway)
    for n in range(8):  # more runs than the 5 tries after which rows used to vanish
        due = JOBS["delete_due_messages"].due_next()
        with pytest.raises(RowsHandedBack):  # the run fails loudly
            deployment.run(at=(due - deployment.start).total_seconds() / 60)
        assert PendingDeletion.objects.filter(status="pending", attempts=n + 1).count() == 3  # back, with back-off
    assert set(JobRun.objects.values_list("status", flat=True)) == {"failed"}

    monkeypatch.setattr(gateway, "delete_private", original)  # the bug fixed
    deployment.run_until(120)
    assert telegram.live(messages) == [] and not PendingDeletion.objects.exists()


@pytest.mark.django_db
def test_failing_rows_move_later_and_never_starve_due_ones(telegram, gateway, conf):
    failing = delivered(telegram, 50, base=450_000)
    telegram.fail_next("FLOOD_WAIT_900", methods={DELETE}, times=1)
    job = DeletionSweep(gateway)
    job.record(job.work_many(job.claim(100)))  # they fail: tried again a minute later
    clock.clock_advance(timedelta(seconds=30))
    newcomer = delivered(telegram, 1, base=450_100)  # due now, after the others were first due
    clock.clock_advance(timedelta(minutes=1))

    (first,) = job.claim(1)  # both are due: the claim takes the earliest due, the newcomer
    assert first.chat_id == 450_100
    job.record(job.work_many([first]))
    assert telegram.live(newcomer) == [] and len(telegram.live(failing)) == 50


@pytest.mark.django_db
def test_broadcast_messages_are_deleted_after_an_outage_or_expired_past_the_window(
    telegram, quick_gateway, conf, admin_client, plain_http, caplog
):
    broadcast = BroadcastFactory(status="done", delete_after_minutes=60)
    hashes = telegram.users_meet(range(460_000, 460_030))
    ids = telegram.bot_sent(list(hashes), "Sale")
    now = clock.now()
    rows = [
        BroadcastDeliveryFactory(
            broadcast=broadcast,
            user__telegram_id=chat,
            user__access_hash=hashes[chat],
            status="sent",
            message_id=m,
            sent_at=now - timedelta(minutes=60) - (DELETE_WINDOW if chat == 460_029 else timedelta(0)),
            delete_at=now,
        )
        for chat, m in zip(hashes, ids, strict=True)
    ]
    telegram.fail_next("FLOOD_WAIT_900", methods={DELETE}, seconds=OUTAGE.total_seconds())
    deployment = Deployment(telegram, quick_gateway, job="delete_expired_broadcasts")

    with caplog.at_level(logging.WARNING, logger="scheduler.jobs.broadcast_delete"):
        # The job runs hourly; a run a minute before the lease ends finds the failed ones leased
        # (at the lease's very end, the real time a run takes would decide it).
        for minute in (0, LEASE.total_seconds() / 60 - 1, 60):
            deployment.run(at=minute)

    assert [round(start) for start, _ in deployment.tries] == [0, 60]
    statuses = dict(BroadcastDelivery.objects.values_list("chat_id", "status"))
    assert statuses == {**dict.fromkeys(hashes, "deleted"), 460_029: "expired"}
    assert telegram.live(ids) == [ids[-1]]  # the one sent 49 h ago stays, and says so
    late = BroadcastDelivery.objects.get(chat_id=460_029)
    assert "48 h" in late.error and late.delete_at is None
    assert f"broadcast delivery={rows[-1].id} chat=460029" in caplog.text
    dashboard = admin_client.get(reverse("admin:index"))
    assert dashboard.context["expired"] == {"files": 0, "broadcasts": 1}
    listed = admin_client.get(reverse("admin:botapp_broadcastdelivery_changelist") + "?status__exact=expired")
    assert list(listed.context["cl"].result_list) == [late]
