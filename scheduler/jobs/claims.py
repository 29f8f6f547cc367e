"""The reaper: claims whose sweeper died (the lease ran out) are settled.

- A pending deletion goes back to the queue: deleting twice is harmless (at-least-once). Its
  "deleted" notice stays due, with `notice_from` (when it was claimed, unless an earlier attempt
  of unknown outcome set it): it is sent with its random_id, which Telegram delivers once. When
  that is more than TELEGRAM_RANDOM_ID_WINDOW ago, the notice is given up instead (logged): the
  dead worker may have sent it, and Telegram may have forgotten the random_id.
- A broadcast delivery or sequence message caught mid-send goes back to `pending` with `retry_from`
  (when it was claimed): it is sent again with the same random_id, which Telegram delivers at most
  once. When that is more than TELEGRAM_RANDOM_ID_WINDOW ago, it becomes `interrupted` instead and
  is never re-sent (Telegram may have forgotten the random_id). The reaper runs every minute, so a
  row a dead worker held comes back within its lease (LEASE) and a minute. A broadcast's rows
  are held by a BroadcastClaim (they stay `pending`): its rows still pending get `retry_from` and
  the claim goes; a sequence message (and a delivery claimed before migration 0021) is `sending`.
- (A pending deletion still `delivering` DELIVERY_GRACE after it was written, runbot having died
  between the copy and writing its message ids, is settled by the deletion sweep, which can ask
  Telegram for the copies: services/delivery.py `deliveries_cut_off_settle`.)
- A broadcast with nothing pending or in flight any more is done, even when its last sender died.
- A job run still "running" after Celery's hard time limit belongs to a worker that died: it failed.
"""

from __future__ import annotations

import collections
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from botapp import clock
from botapp.models import Broadcast, BroadcastClaim, BroadcastDelivery, ClaimStatus, PendingDeletion, SequenceMessage
from botapp.services.broadcasts import broadcasts_settled
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE
from scheduler.models import JobRun

log = logging.getLogger(__name__)

# A run older than this cannot still be running: Celery kills a task at CELERY_TASK_TIME_LIMIT.
RUN_GRACE = timedelta(minutes=1)


def reap_expired_claims(*, gateway=None, dry_run: bool = False) -> Outcome:
    now = clock.now()
    deletions = PendingDeletion.objects.filter(status=ClaimStatus.CLAIMED, lease_until__lt=now)
    sends = BroadcastDelivery.objects.filter(status=BroadcastDelivery.Status.SENDING, lease_until__lt=now)
    steps = SequenceMessage.objects.filter(status=SequenceMessage.Status.SENDING, lease_until__lt=now)
    dead_runs = JobRun.objects.filter(
        status=JobRun.Status.RUNNING,
        started_at__lt=now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT) - RUN_GRACE,
    )
    claims = BroadcastClaim.objects.filter(lease_until__lt=now)
    if dry_run:
        d, s, c = deletions.count(), sends.count() + steps.count(), claims.count()
        return Outcome(
            d + s + c, detail=f"would requeue {d} deletions and settle {s} sends caught mid-send and {c} broadcast claims"
        )
    window = timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
    # The notice of unknown outcome: since its first such attempt, or this claim.
    noticed = Q(notice_from__lt=now - window) | Q(notice_from__isnull=True, lease_until__lt=now - window + LEASE)
    given_up = list(deletions.filter(noticed, notice_due=True).values_list("id", flat=True))
    if given_up:
        log.warning(
            "deletions=%s: their worker stopped mid-sweep longer than TELEGRAM_RANDOM_ID_WINDOW ago: "
            "their \"deleted\" notices are not sent again (they may have arrived)", given_up,
        )  # fmt: skip
        PendingDeletion.objects.filter(id__in=given_up).update(notice_due=False)
    d = deletions.update(
        status=ClaimStatus.PENDING, lease_until=None, notice_from=Coalesce("notice_from", F("lease_until") - LEASE)
    )
    # When the attempt of unknown outcome was made: the first such attempt, or this claim (made
    # LEASE before its lease ran out).
    tried = Coalesce("retry_from", F("lease_until") - LEASE)
    late = Q(retry_from__lt=now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)) | Q(
        retry_from__isnull=True, lease_until__lt=now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW) + LEASE
    )
    again = dict(status="pending", lease_until=None, retry_from=tried, error="worker stopped mid-send: to be sent again")
    lost = "worker stopped mid-send, past TELEGRAM_RANDOM_ID_WINDOW: not sent again"
    with transaction.atomic():  # the rows and their broadcasts' counters, together
        caught = list(sends.filter(late).select_for_update(skip_locked=True).values_list("id", "broadcast_id"))
        s = BroadcastDelivery.objects.filter(id__in=[i for i, _ in caught]).update(
            status=BroadcastDelivery.Status.INTERRUPTED, lease_until=None, error=lost
        )
        for broadcast_id, n in collections.Counter(b for _, b in caught).items():
            Broadcast.objects.filter(pk=broadcast_id).update(interrupted=F("interrupted") + n)
        r = sends.exclude(late).update(**again)
        claimed = claims_settle(claims, now=now, again=again["error"], lost=lost)
        r, s = r + claimed[0], s + claimed[1]
    s += steps.filter(late).update(status=SequenceMessage.Status.INTERRUPTED, lease_until=None, error=lost)
    r += steps.exclude(late).update(**again)
    closed = broadcasts_settled(
        broadcasts=Broadcast.objects.filter(status=Broadcast.Status.SENDING, prepare_after__isnull=True)  # rows all made
    ).update(status=Broadcast.Status.DONE, finished_at=now)
    runs = dead_runs.update(
        status=JobRun.Status.FAILED,
        finished_at=now,
        error="The worker stopped before this run finished (killed, or past Celery's hard time limit).",
    )
    detail = (
        f"requeued {d} deletions ({len(given_up)} notices given up), {r} sends to send again (same random_id), "
        f"{s} sends interrupted, "
        f"{closed} broadcast(s) closed, {runs} dead run(s) failed"
    )
    return Outcome(d + r + s, detail=detail)


job_register(Job("reap_expired_claims", reap_expired_claims, {"minute": "*"}, "Settle claims whose worker died"))


def claims_settle(claims, *, now, again: str, lost: str) -> tuple[int, int]:
    """Settle the broadcast claims of dead senders (call in a transaction): each one's rows still
    pending go back with `retry_from` (its `claimed_at`, unless an earlier attempt set one), or
    become `interrupted` when that is past TELEGRAM_RANDOM_ID_WINDOW; then the claim goes. A claim
    being recorded is locked, and skipped: its worker is alive. Returns (to send again, interrupted)."""
    cutoff = now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
    sent_again = interrupted = 0
    for claim in claims.select_for_update(skip_locked=True).order_by("id"):
        rows = BroadcastDelivery.objects.filter(
            broadcast_id=claim.broadcast_id,
            id__gte=claim.first_id,
            id__lte=claim.last_id,
            status=BroadcastDelivery.Status.PENDING,
        )
        late = Q(retry_from__lt=cutoff) | Q(retry_from__isnull=True) if claim.claimed_at < cutoff else Q(retry_from__lt=cutoff)
        n = rows.filter(late).update(status=BroadcastDelivery.Status.INTERRUPTED, error=lost)
        if n:
            Broadcast.objects.filter(pk=claim.broadcast_id).update(interrupted=F("interrupted") + n)
        sent_again += rows.update(retry_from=Coalesce("retry_from", Value(claim.claimed_at)), error=again)
        interrupted += n
        claim.delete()
    if sent_again or interrupted:
        log.warning("claims of dead senders settled: %s rows to send again, %s interrupted", sent_again, interrupted)
    return sent_again, interrupted
