"""Users imported from another bot, reached by id alone (issue 43): the rows Courier settled
before it addressed users without an access hash are tried once more."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, SequenceMessage
from botapp.signals import broadcast_queued, work_scheduled_announce

# What those rows' error says ("user 1002 has never written to the bot: no access hash"): the
# gateway's refusal, before any call, of a user with no stored access hash, up to this change.
NEVER_WRITTEN = "has never written to the bot: no access hash"
# A broadcast whose rows may be sent again: one cancelled stays cancelled.
REOPENED_FROM = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING, Broadcast.Status.PAUSED, Broadcast.Status.DONE)


@dataclass(frozen=True)
class NeverWrittenRetry:
    steps: int  # sequence steps pending again
    deliveries: int  # broadcast deliveries pending again
    broadcasts: int  # the broadcasts they belong to (a done one sends again)


def never_written_retry(*, dry_run: bool = False) -> NeverWrittenRetry:
    """Put back to pending, once, every sequence step `failed` and every broadcast delivery
    `not_user` because the user had no stored access hash (NEVER_WRITTEN): the gateway now
    addresses such users by id and Telegram's answer decides. A broadcast done with such rows
    is sending again (its `not_users` less them; the others' results untouched); a cancelled
    one is left. The rows' error no longer says NEVER_WRITTEN, so a second run finds nothing.
    `dry_run`: count them, write nothing."""
    steps = SequenceMessage.objects.filter(status=SequenceMessage.Status.FAILED, error__endswith=NEVER_WRITTEN)
    deliveries = BroadcastDelivery.objects.filter(
        status=BroadcastDelivery.Status.NOT_USER, error__endswith=NEVER_WRITTEN, broadcast__status__in=REOPENED_FROM
    )
    with transaction.atomic():
        per_broadcast = Counter(deliveries.select_for_update(of=("self",)).values_list("broadcast_id", flat=True))
        if dry_run:
            return NeverWrittenRetry(steps.count(), sum(per_broadcast.values()), len(per_broadcast))
        n_steps = steps.update(status=SequenceMessage.Status.PENDING, error="", lease_until=None)
        n_deliveries = deliveries.update(status=BroadcastDelivery.Status.PENDING, error="", lease_until=None)
        for broadcast_id, n in per_broadcast.items():
            Broadcast.objects.filter(pk=broadcast_id).update(not_users=F("not_users") - n)
            Broadcast.objects.filter(pk=broadcast_id, status=Broadcast.Status.DONE).update(
                status=Broadcast.Status.SENDING, finished_at=None
            )
        for broadcast_id in per_broadcast:
            transaction.on_commit(
                lambda pk=broadcast_id: broadcast_queued.send_robust(
                    sender=Broadcast, broadcast_id=pk, send=True, preparing=False
                )
            )
        if n_steps:
            work_scheduled_announce(work="sequence", due_at=clock.now())
    return NeverWrittenRetry(n_steps, n_deliveries, len(per_broadcast))
