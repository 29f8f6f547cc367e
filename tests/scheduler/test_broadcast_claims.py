"""Broadcast claims (migration 0021): a sender leases a range of a broadcast's rows with one
BroadcastClaim, the rows stay `pending`, and no two senders ever hold the same row; a claim goes
with the record of its last row, and the reaper settles the claims of senders that died."""

import contextlib
import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction

from botapp import clock
from botapp.models import Broadcast, BroadcastClaim, BroadcastDelivery
from scheduler.jobs.broadcast_send import BroadcastSendSweep, Result, deliveries_claim
from scheduler.jobs.registry import job_run
from scheduler.jobs.sweep import LEASE
from tests.factories import BroadcastDeliveryFactory, BroadcastFactory, TelegramUserFactory

Status = BroadcastDelivery.Status


def deliveries(n: int, broadcast=None) -> tuple[Broadcast, list[int]]:
    broadcast = broadcast or BroadcastFactory(status=Broadcast.Status.SENDING, total=n)
    rows = [BroadcastDeliveryFactory(broadcast=broadcast, user=TelegramUserFactory(access_hash=7)) for _ in range(n)]
    return broadcast, sorted(r.id for r in rows)


def sent(row, message_id: int = 1) -> Result:
    return Result(row.id, row.broadcast_id, row.user_id, Status.SENT, message_id=message_id)


@pytest.mark.django_db
def test_a_claim_writes_one_row_and_no_delivery(gateway):
    broadcast, ids = deliveries(5)
    sweep = BroadcastSendSweep(gateway)

    rows = sweep.claim(3)

    assert [r.id for r in rows] == ids[:3]
    claim = BroadcastClaim.objects.get()
    assert (claim.broadcast_id, claim.first_id, claim.last_id) == (broadcast.pk, ids[0], ids[2])
    assert claim.lease_until == claim.claimed_at + LEASE and claim.claimed_at <= clock.now()
    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {"pending"}


@pytest.mark.django_db
def test_a_second_sender_walks_past_the_rows_another_holds(gateway):
    broadcast, ids = deliveries(10)
    first, second = BroadcastSendSweep(gateway), BroadcastSendSweep(gateway)

    a = [r.id for r in first.claim(3)]
    b = [r.id for r in second.claim(3)]
    c = [r.id for r in first.claim(2)]  # walks on past the second sender's claim
    d = [r.id for r in second.claim(5)]  # what is left

    assert (a, b, c, d) == (ids[:3], ids[3:6], ids[6:8], ids[8:])
    assert second.claim(5) == [] and first.claim(5) == []
    # Every claim's range holds no other claim's row.
    ranges = sorted(BroadcastClaim.objects.values_list("first_id", "last_id"))
    assert all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False)), ranges


@pytest.mark.django_db(transaction=True)
def test_senders_claiming_at_once_never_share_a_row():
    """Eight senders on their own connections, claiming at once until nothing is left: the claim
    lock makes each walk see the claims committed before it. Half claim as the sweep does (the
    statement's own transaction), half inside a transaction of theirs."""
    broadcast, ids = deliveries(240)
    start = threading.Barrier(8)
    taken: list[list[int]] = []
    errors: list[BaseException] = []

    def sender(own: bool) -> None:
        mine: list[int] = []
        try:
            start.wait()
            while True:
                with transaction.atomic() if own else contextlib.nullcontext():
                    rows = deliveries_claim(broadcast.pk, 7, now=clock.now())
                if not rows:
                    break
                mine += [r.id for r in rows]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            taken.append(mine)
            connections.close_all()

    threads = [threading.Thread(target=sender, args=(n % 2 == 1,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not errors, errors
    every = [i for mine in taken for i in mine]
    assert sorted(every) == ids  # each row once, none left
    assert sum(1 for mine in taken if mine) > 1  # they did claim at once


@pytest.mark.django_db
def test_a_claim_goes_with_the_record_of_its_last_row(gateway):
    _, ids = deliveries(3)
    sweep = BroadcastSendSweep(gateway)
    rows = sweep.claim(3)

    sweep.record([sent(rows[0])])
    assert BroadcastClaim.objects.count() == 1  # two rows still in flight: nobody else takes them
    assert BroadcastSendSweep(gateway).claim(3) == []
    sweep.record([sent(rows[1]), sweep.handback(rows[2], RuntimeError("a bug"))])

    assert not BroadcastClaim.objects.exists()
    assert [r.id for r in BroadcastSendSweep(gateway).claim(3)] == [ids[2]]  # the row handed back


@pytest.mark.django_db
def test_the_reaper_gives_a_dead_senders_rows_back_to_be_sent_again(gateway):
    broadcast, ids = deliveries(4)
    dead = BroadcastSendSweep(gateway)
    rows = dead.claim(3)
    claimed_at = BroadcastClaim.objects.get().claimed_at
    dead.record([sent(rows[0], 41)])  # then the worker is killed

    clock.clock_advance(LEASE - timedelta(seconds=1))
    job_run("reap_expired_claims", trigger="test")
    assert BroadcastClaim.objects.count() == 1  # its lease is not over
    clock.clock_advance(timedelta(seconds=2))
    job_run("reap_expired_claims", trigger="test")

    assert not BroadcastClaim.objects.exists()
    state = {d.id: (d.status, d.retry_from, d.message_id) for d in BroadcastDelivery.objects.all()}
    assert state == {
        ids[0]: ("sent", None, 41),
        ids[1]: ("pending", claimed_at, None),  # may have been sent: the same random_id again
        ids[2]: ("pending", claimed_at, None),
        ids[3]: ("pending", None, None),  # never claimed
    }
    assert [r.id for r in BroadcastSendSweep(gateway).claim(5)] == ids[1:]


@pytest.mark.django_db
def test_the_reaper_interrupts_a_dead_senders_rows_past_the_random_id_window(gateway, settings):
    broadcast, ids = deliveries(2)
    BroadcastSendSweep(gateway).claim(2)

    clock.clock_advance(timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW + 1))
    job_run("reap_expired_claims", trigger="test")

    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {"interrupted"}
    broadcast.refresh_from_db()
    assert broadcast.interrupted == 2
    assert not BroadcastClaim.objects.exists()


@pytest.mark.django_db
def test_a_record_after_the_reaper_writes_nothing(gateway, caplog):
    """A sender that stalled past its lease: the reaper gave its rows to the next sender, whose
    results are the ones kept; the late ones are dropped (logged), counters untouched."""
    broadcast, ids = deliveries(2)
    slow = BroadcastSendSweep(gateway)
    rows = slow.claim(2)
    clock.clock_advance(LEASE + timedelta(seconds=1))
    job_run("reap_expired_claims", trigger="test")

    assert slow.record([sent(rows[0]), sent(rows[1])]) == (0, 0)

    assert set(BroadcastDelivery.objects.values_list("status", flat=True)) == {"pending"}
    broadcast.refresh_from_db()
    assert broadcast.sent == 0
    assert "2 result(s) not recorded" in caplog.text
    assert slow.claims.unrecorded[broadcast.pk] == 0


@pytest.mark.django_db
def test_a_record_that_fails_changes_nothing_and_its_retry_records_all(gateway, monkeypatch):
    """The sweep's last try records the same results again after a record raised (rolled back):
    the claim's bookkeeping in the run changes only once a record commits."""
    from scheduler.jobs import broadcast_send

    broadcast, ids = deliveries(2)
    sweep = BroadcastSendSweep(gateway)
    rows = sweep.claim(2)
    noted = broadcast_send.broadcasts_progress_note  # late in the record: most of it done, then rolled back

    def fails(*args, **kwargs):
        raise RuntimeError("the record's bug")

    monkeypatch.setattr(broadcast_send, "broadcasts_progress_note", fails)
    with pytest.raises(RuntimeError):
        sweep.record([sent(rows[0]), sent(rows[1])])
    assert BroadcastClaim.objects.count() == 1 and set(sweep.claims.of) == set(ids)
    assert sweep.claims.unrecorded[broadcast.pk] == 2
    monkeypatch.setattr(broadcast_send, "broadcasts_progress_note", noted)

    assert sweep.record([sent(rows[0]), sent(rows[1])]) == (2, 0)
    assert not BroadcastClaim.objects.exists() and not sweep.claims.of and not sweep.claims.left
    assert sweep.claims.unrecorded[broadcast.pk] == 0  # counted down once, not once per try
    broadcast.refresh_from_db()
    assert broadcast.sent == 2
