"""What went wrong, in one line: the most common error of a broadcast's failed sends, and what the
onboarding sequences' messages came to over the last hours (sent, failed, skipped), for the
console's broadcast page and dashboard.

Guarantees: each answer is one aggregate query over a partial index of the settled rows it reads
(`delivery_failed`, `seqmsg_sent_at`, `seqmsg_unsent`), whatever the size of the tables."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from botapp import clock
from botapp.models import BroadcastDelivery, Sequence, SequenceMessage

Status = SequenceMessage.Status
UNSENT = (Status.FAILED, Status.SKIPPED, Status.INTERRUPTED)


def broadcast_error_common(*, broadcast_id: int) -> tuple[str, int] | None:
    """The error most of the broadcast's failed deliveries recorded, and how many recorded it
    (None: no failed delivery is kept, e.g. after `prune_deliveries`)."""
    row = (
        BroadcastDelivery.objects.filter(broadcast_id=broadcast_id, status=BroadcastDelivery.Status.FAILED)
        .values_list("error")
        .annotate(n=Count("id"))
        .order_by("-n", "error")
        .first()
    )
    return (row[0] or "no error recorded", row[1]) if row else None


@dataclass
class SequenceOutcome:
    sequence: Sequence
    sent: int = 0
    failed: int = 0  # failed, and interrupted (its answer lost: never sent again)
    skipped: int = 0
    error: str = ""  # the most common error of the failed ones
    error_count: int = 0

    @property
    def total(self) -> int:
        return self.sent + self.failed + self.skipped


def sequences_outcome_since(*, since: datetime) -> list[SequenceOutcome]:
    """Per sequence (by name), its messages settled since `since`: sent then (by `sent_at`), or
    failed, interrupted or skipped when due then; sequences with none are left out. Three queries."""
    now = clock.now()
    found: dict[int, SequenceOutcome] = {}
    settled = (
        SequenceMessage.objects.filter(Q(sent_at__gte=since, status=Status.SENT))
        .values_list("step__sequence_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ).union(
        SequenceMessage.objects.filter(status__in=UNSENT, due_at__gte=since, due_at__lte=now)
        .values_list("step__sequence_id", "status")
        .annotate(n=Count("id"))
        .order_by(),
        all=True,
    )
    counts = list(settled)
    if not counts:
        return []
    sequences = Sequence.objects.in_bulk({sequence_id for sequence_id, _, _ in counts})
    for sequence_id, status, n in counts:
        row = found.setdefault(sequence_id, SequenceOutcome(sequences[sequence_id]))
        if status == Status.SENT:
            row.sent += n
        elif status == Status.SKIPPED:
            row.skipped += n
        else:
            row.failed += n
    errors = (
        SequenceMessage.objects.filter(status__in=(Status.FAILED, Status.INTERRUPTED), due_at__gte=since, due_at__lte=now)
        .values_list("step__sequence_id", "error")
        .annotate(n=Count("id"))
        .order_by("step__sequence_id", "-n", "error")
    )
    for sequence_id, error, n in errors:
        row = found[sequence_id]
        if not row.error_count:
            row.error, row.error_count = error or "no error recorded", n
    return sorted(found.values(), key=lambda r: (r.sequence.name, r.sequence.pk))
