"""Every update handled once: runbot's claims on updates, and its stored place in the update stream.

What "handled" means (docs/reliability.md#updates): an update is claimed in PostgreSQL before its
handler runs (`update_claim`, one statement) and marked done when the handler has returned, whatever
it answered (`update_done`). When the same update comes again — Telegram's getDifference after a
restart hands back what came after the stored position, which can be a moment old; or it comes
live and in the difference — the claim says what to do:

- done, or being handled by this very run: not handled again;
- claimed by an earlier run that died before it was done: handled again when its handling can be
  repeated (a user's /start: every send carries random_ids fixed by the update, so Telegram refuses
  what had already arrived), never when it is `once` (admin commands, file storing, broadcast
  buttons, a broadcast started from a channel post): the router tells the admin it was not run again.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from botapp import clock
from botapp.models import HandledUpdate, UpdatePosition
from botapp.telegram.position import PositionState

Kind = HandledUpdate.Kind
# Days a claim is kept. A repeat comes from a getDifference from runbot's stored position (seconds
# old) or within one run; Telegram keeps a bot's undelivered updates for 24 hours (Bot API,
# getUpdates), longer is not documented: a week is far past both.
HANDLED_RETENTION = timedelta(days=7)


@dataclass(frozen=True)
class Claim:
    """What `update_claim` found. `handle`: run the handler now (`again`: an earlier run died while
    handling it); `interrupted`: a once-only update an earlier run died while handling, not run
    again (the admin is to be told); neither: a repeat of one handled or being handled."""

    pk: int
    token: int
    handle: bool
    again: bool = False
    interrupted: bool = False
    attempts: int = 1
    claimed_at: datetime | None = None


def update_run() -> str:
    """A new run id: one per runbot process (per Router), so a claim left by a dead run is told
    from one this run is still handling."""
    return uuid.uuid4().hex


_CLAIM = """
INSERT INTO {t} (kind, chat_id, update_id, once, run, token, attempts, claimed_at, done_at)
VALUES (%s, %s, %s, %s, %s, %s, 1, %s, NULL)
ON CONFLICT (kind, chat_id, update_id) DO UPDATE SET
    attempts = {t}.attempts + 1,
    run = CASE WHEN {t}.done_at IS NULL AND {t}.run <> EXCLUDED.run THEN EXCLUDED.run ELSE {t}.run END,
    token = CASE WHEN {t}.done_at IS NULL AND {t}.run <> EXCLUDED.run THEN EXCLUDED.token ELSE {t}.token END
RETURNING id, token, attempts, once, claimed_at
"""


def update_claim(*, kind: int, chat_id: int, update_id: int, once: bool, run: str) -> Claim:
    """Claim an update before handling it, in one statement (committed at once: the claim outlives
    a crash of the handler). A repeat is recognised by (kind, chat, update id); a claim left by
    another run that never finished it is taken over by this one (so only one run handles it)."""
    token = secrets.randbits(62)
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM.format(t=HandledUpdate._meta.db_table),
            [kind, chat_id, update_id, once, run, token, clock.now()],
        )
        pk, owner, attempts, stored_once, claimed_at = cursor.fetchone()
    ours = owner == token
    return Claim(
        pk=pk,
        token=token,
        handle=ours and (attempts == 1 or not stored_once),
        again=ours and attempts > 1 and not stored_once,
        interrupted=ours and attempts > 1 and stored_once,
        attempts=attempts,
        claimed_at=claimed_at,
    )


def update_claimed(*, kind: int, chat_id: int, update_id: int) -> bool:
    """Whether the update was claimed before (handled, or being handled): it comes again."""
    return HandledUpdate.objects.filter(kind=kind, chat_id=chat_id, update_id=update_id).exists()


def update_done(*, claim: Claim) -> None:
    """The claimed update has been handled (its handler returned, whatever it answered): a repeat
    of it is never handled again."""
    with connection.cursor() as cursor:  # on every update's path: the statement without the ORM's compiling
        cursor.execute(
            f"UPDATE {HandledUpdate._meta.db_table} SET done_at = %s WHERE id = %s AND token = %s",
            [clock.now(), claim.pk, claim.token],
        )


def handled_updates_prune(*, before: datetime | None = None) -> int:
    """Delete claims older than HANDLED_RETENTION (or `before`); returns how many. No update comes
    again that late."""
    cutoff = before or clock.now() - HANDLED_RETENTION
    deleted, _ = HandledUpdate.objects.filter(claimed_at__lt=cutoff).delete()
    return deleted


class UpdatePositions:
    """runbot's position in PostgreSQL (botapp/telegram/updates.py: PositionStore): one row for the
    bot's own sequence, one per channel."""

    def load(self) -> PositionState | None:
        """The stored position, or None if runbot never stored one."""
        rows = {row.box: row for row in UpdatePosition.objects.all()}
        account = rows.pop(UpdatePosition.ACCOUNT, None)
        if account is None:
            return None
        return PositionState(
            pts=account.pts,
            qts=account.qts,
            date=account.date,
            seq=account.seq,
            channels={box: row.pts for box, row in rows.items()},
            bot_id=account.bot_id,
        )

    def save(self, state: PositionState) -> None:
        """Store the position: every row upserted in one statement, the rows of channels no longer
        followed deleted, in one transaction."""
        now = clock.now()
        rows = [
            UpdatePosition(
                box=UpdatePosition.ACCOUNT,
                pts=state.pts,
                qts=state.qts,
                date=state.date,
                seq=state.seq,
                bot_id=state.bot_id,
                updated_at=now,
            )
        ]
        rows += [UpdatePosition(box=box, pts=pts, updated_at=now) for box, pts in state.channels.items()]
        with transaction.atomic():
            UpdatePosition.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["box"],
                update_fields=["pts", "qts", "date", "seq", "bot_id", "updated_at"],
            )
            UpdatePosition.objects.exclude(box__in=[row.box for row in rows]).delete()

    def reset(self) -> None:
        """Forget the position and every claim: they are another bot's, or another Telegram's
        (BOT_TOKEN now names another bot; a test server started afresh), whose message ids and
        sequence numbers mean nothing for this one."""
        with transaction.atomic():
            UpdatePosition.objects.all().delete()
            HandledUpdate.objects.all().delete()
