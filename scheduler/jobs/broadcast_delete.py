"""The broadcast deleter: removes broadcast messages from every chat once their lifetime is over
(Broadcast.delete_after_minutes). Sweeps BroadcastDelivery rows like the message deleter does, by
the same rule (botapp/services/autodelete.py): a deletion Telegram did not make (an outage, a
FloodWait, any refusal, a row handed back) is tried again at the job's next run (hourly; at least
the sweeps' LEASE later), until Telegram's 48 h window closes. A message whose window closed before a try, or
whose try failed in the window's last minute (LAST_TRY), is `expired` (logged at WARNING, counted
on the dashboard), never `deleted`. A message whose send Telegram confirmed only as a repeat (its
id never known) is found first in the bot's box (services/repeats.py); not found, it is `expired`
with NOT_FOUND."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from botapp import clock
from botapp.db import ids_update
from botapp.models import BroadcastDelivery
from botapp.services.autodelete import deletion_last_try
from botapp.services.repeats import RepeatSearch, broadcast_repeats_find, broadcast_repeats_search
from botapp.telegram.gateway import DELETE_CHUNK, FloodWait, Gateway, TelegramError, TransientError
from botapp.telegram.limits import DELETE_WINDOW
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE, sweep_outcome

log = logging.getLogger(__name__)

Status = BroadcastDelivery.Status
EXPIRED = "not deleted: Telegram's 48 h window closed first, the message stays in the chat"


class Due(NamedTuple):
    """A sent broadcast message whose lifetime is over."""

    id: int  # the delivery's
    chat_id: int
    message_id: int | None  # None: its send was confirmed only as a repeat (found first: `_found`)
    sent_at: datetime
    broadcast_id: int = 0


# Why a message confirmed only as a repeat is left in its chat (`expired`).
NOT_FOUND = "not deleted: delivered by an earlier attempt, and its message was not found in the chat"


class Deleted(NamedTuple):
    id: int  # the delivery's
    outcome: str  # deleted | retry | expired


@dataclass
class BroadcastDeletionSweep:
    gateway: Gateway
    # Where each broadcast's messages confirmed only as repeats are looked for, made once a run.
    searches: dict[int, RepeatSearch] = field(default_factory=dict)

    def claim(self, n: int) -> list[Due]:
        now = clock.now()
        with transaction.atomic():
            rows = list(
                BroadcastDelivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=Status.SENT, delete_at__isnull=False, delete_at__lte=now)
                .order_by("delete_at")
                .values_list("id", "chat_id", "message_id", "sent_at", "broadcast_id", "user__access_hash", named=True)[:n]
            )
            # Pushing delete_at forward by LEASE is the lease: a dead sweeper's rows come due again.
            if rows:
                ids_update(BroadcastDelivery, [r.id for r in rows], delete_at=now + LEASE)
        self.gateway.peers_remember({r.chat_id: r.user__access_hash for r in rows})
        return [Due(r.id, r.chat_id, r.message_id, r.sent_at, r.broadcast_id) for r in rows]

    def _expired(self, row: Due, error: str = "") -> Deleted:
        last = f" (last try: {error})" if error else ""
        log.warning(
            "broadcast delivery=%s chat=%s message=%s expired: %s%s", row.id, row.chat_id, row.message_id, EXPIRED, last,
        )  # fmt: skip
        return Deleted(row.id, "expired")

    def _not_deleted(self, rows: list[Due], exc: TelegramError, now: datetime) -> list[Deleted]:
        """Telegram did not delete: tried again later, or expired when no time is left."""
        level = logging.INFO if isinstance(exc, (FloodWait, TransientError)) else logging.WARNING
        log.log(
            level, "broadcast delete not made for %d deliveries (delivery=%s…), tried again later: %s", len(rows), rows[0].id, exc
        )
        return [
            self._expired(r, str(exc)) if now >= deletion_last_try(sent_at=r.sent_at) else Deleted(r.id, "retry") for r in rows
        ]

    def work(self, row: Due) -> Deleted:
        return self.work_many([row])[0]

    group = DELETE_CHUNK  # rows per work_many: one messages.deleteMessages for all their chats

    def work_many(self, rows: list[Due]) -> list[Deleted]:
        """The rows' messages deleted together (`delete_private`: one call per DELETE_CHUNK);
        those past Telegram's window are not asked for."""
        now = clock.now()
        late = {r.id: self._expired(r) for r in rows if now - r.sent_at >= DELETE_WINDOW}
        due, done = self._found([r for r in rows if r.id not in late], now)
        if due:
            try:
                self.gateway.delete_private([(row.chat_id, [row.message_id]) for row in due])
                done |= {r.id: Deleted(r.id, "deleted") for r in due}
            except TelegramError as exc:
                done |= {d.id: d for d in self._not_deleted(due, exc, now)}
        return [late.get(r.id) or done[r.id] for r in rows]

    def _found(self, rows: list[Due], now: datetime) -> tuple[list[Due], dict[int, Deleted]]:
        """The rows with their message ids, those confirmed only as repeats found first (one read
        of the bot's box per broadcast: services/repeats.py); with the results of those settled
        here: not found, `expired` (left in the chat, said so); the reads refused, tried again."""
        unknown = [r for r in rows if r.message_id is None]
        if not unknown:
            return rows, {}
        settled: dict[int, Deleted] = {}
        ids: dict[int, int] = {}
        for broadcast_id in sorted({r.broadcast_id for r in unknown}):
            mine = [r for r in unknown if r.broadcast_id == broadcast_id]
            try:
                search = self.searches.get(broadcast_id) or broadcast_repeats_search(
                    gateway=self.gateway, broadcast_id=broadcast_id
                )
                self.searches[broadcast_id] = search
                found = broadcast_repeats_find(gateway=self.gateway, search=search, chat_ids={r.chat_id for r in mine})
            except TelegramError as exc:
                settled |= {d.id: d for d in self._not_deleted(mine, exc, now)}
                continue
            for r in mine:
                if r.chat_id in found:
                    ids[r.id] = found[r.chat_id]
                else:
                    log.warning("broadcast delivery=%s chat=%s: %s", r.id, r.chat_id, NOT_FOUND)
                    settled[r.id] = Deleted(r.id, "not found")
        due = [r._replace(message_id=ids[r.id]) if r.message_id is None else r for r in rows if r.id not in settled]
        return [r for r in due if r.message_id is not None], settled

    def handback(self, row: Due, exc: Exception) -> Deleted:
        return Deleted(row.id, "retry")

    def record(self, results: list[Deleted]) -> tuple[int, int]:
        """Deleted rows are `deleted`; rows to try again keep the delete_at their claim gave them
        (LEASE later: the job's next run); expired ones become `expired`, their message left in the chat."""
        deleted = [i for i, outcome in results if outcome == "deleted"]
        retry = [i for i, outcome in results if outcome == "retry"]
        expired = [i for i, outcome in results if outcome == "expired"]
        unfound = [i for i, outcome in results if outcome == "not found"]
        if deleted:
            ids_update(BroadcastDelivery, deleted, status=Status.DELETED, delete_at=None)
        if expired:
            ids_update(BroadcastDelivery, expired, status=Status.EXPIRED, delete_at=None, error=EXPIRED)
        if unfound:
            ids_update(BroadcastDelivery, unfound, status=Status.EXPIRED, delete_at=None, error=NOT_FOUND)
        return len(deleted), len(retry) + len(expired) + len(unfound)


def delete_expired_broadcasts(
    *, gateway: Gateway, dry_run: bool = False, batch_size: int = 500, time_budget: float = 240.0
) -> Outcome:
    # The budget stays well under CELERY_TASK_SOFT_TIME_LIMIT (300 s): a run ends between batches,
    # never killed in the middle of one.
    if dry_run:
        due = BroadcastDelivery.objects.filter(status=Status.SENT, delete_at__lte=clock.now()).count()
        return Outcome(due, detail="broadcast messages due for deletion")
    return sweep_outcome(BroadcastDeletionSweep(gateway), batch_size=batch_size, time_budget=time_budget)


job_register(
    Job(
        "delete_expired_broadcasts",
        delete_expired_broadcasts,
        {"minute": "0"},
        "Delete broadcast messages past their lifetime",
        needs_gateway=True,
    )
)
