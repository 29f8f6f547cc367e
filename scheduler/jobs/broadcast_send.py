"""The broadcast sender: sends queued broadcasts to their users at Telegram's rate (the shared
limiter), records each result, keeps the broadcast's progress counters, and closes it when done.

Once per user: a sender claims a range of a broadcast's pending rows (a BroadcastClaim with a
lease; the rows stay `pending`, skipped by every other sender's walk) before the calls, and every
message carries the random_id of its key (`send_key`: the delivery and its broadcast), so a repeat
is never delivered twice. What a refused send means is `send_failure`'s to say (a FloodWait goes
back to `pending`, a user who blocked the bot or deleted their account is counted blocked and
marked so, a lost answer is `pending` again with `retry_from` and sent again with the same
random_id, the rest `failed`); a worker that dies mid-send leaves its claim, and the reaper puts
the claim's rows still pending back the same way. Past TELEGRAM_RANDOM_ID_WINDOW after
`retry_from` a row is `interrupted` instead (`claim`). Rows `sending` are those of a sender from
before migration 0021 (the reaper settles them as it always did)."""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from time import monotonic
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef
from psycopg import sql

from botapp import clock
from botapp.metrics import sends_count
from botapp.models import BotSettings, Broadcast, BroadcastAttachment, BroadcastClaim, BroadcastDelivery, TelegramUser
from botapp.services.attachments import attachments_upload
from botapp.services.broadcast_bot import broadcasts_report
from botapp.services.broadcasts import (
    BroadcastMessage,
    broadcast_handback_note,
    broadcasts_finish,
    broadcasts_prepare,
    broadcasts_progress_note,
    broadcasts_start_due,
)
from botapp.services.outgoing import send_failure, send_key
from botapp.services.send_window import SendWindow, send_window_current, send_window_of
from botapp.services.users import users_mark_unreachable
from botapp.signals import work_scheduled_announce
from botapp.telegram.gateway import CopyIncomplete, Gateway, PeerUnknown, SendItem, Sent, TelegramError
from scheduler.jobs.bulk import rows_update
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE, message_or_error, sends_outcome

log = logging.getLogger(__name__)

Status = BroadcastDelivery.Status
ACTIVE_TTL = 2.0  # seconds between two looks at which broadcasts are being sent
ACTIVE = (Broadcast.Status.QUEUED, Broadcast.Status.SENDING)
HANDED_BACK = "handed back: "  # a row's error when a bug sent it back untouched


class Leased(NamedTuple):
    """A delivery `deliveries_claim` claimed, with what its send needs to know of the user."""

    id: int
    broadcast_id: int
    user_id: int  # TelegramUser's pk
    chat_id: int
    access_hash: int | None
    user_state: str
    retry_from: datetime | None
    claim: int  # its BroadcastClaim


class Delivery(NamedTuple):
    """A claimed delivery, as `work` takes it."""

    id: int
    broadcast_id: int
    user_id: int  # TelegramUser's pk
    chat_id: int
    skip: str  # why it is not sent ("": it is)
    retry_from: datetime | None = None  # its first attempt of unknown outcome (None: none)
    late: bool = False  # that attempt is older than TELEGRAM_RANDOM_ID_WINDOW: not sent again


@dataclass(slots=True)
class Result:
    id: int
    broadcast_id: int
    user_id: int
    status: str
    message_id: int | None = None
    error: str = ""
    unreachable: str = ""  # the user's TelegramUser.State when Telegram said they cannot be reached
    retry_from: datetime | None = None  # set: to be sent again with the same random_id (since then)


LATE = "outcome unknown, and its random_id is past TELEGRAM_RANDOM_ID_WINDOW: not sent again"

# pg_advisory_xact_lock(CLAIM_LOCK, broadcast id): one sender walks a broadcast's rows at a time,
# so no two claims take the same rows (a claim is one short statement: senders queue on it for no
# longer).
CLAIM_LOCK = 0x62636C6D  # "bclm"

# A record's claims, locked until it commits (the reaper skips a claim being recorded), and those
# whose last rows it records, deleted: the claim ids go as parameters, the table's name is quoted
# once here.
_CLAIMS = sql.Identifier(BroadcastClaim._meta.db_table)
CLAIMS_LOCK = sql.SQL("SELECT id FROM {} WHERE id = ANY(%s) ORDER BY id FOR UPDATE").format(_CLAIMS).as_string()
CLAIMS_DELETE = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(_CLAIMS).as_string()


def deliveries_claim(broadcast_id: int, n: int, *, now: datetime, after: int = 0) -> list[Leased]:
    """Claim up to n pending deliveries of the broadcast above id `after`, lowest id first, rows
    of other senders' live claims skipped: one BroadcastClaim per run of rows between those
    claims. No delivery row is written (a claim that set them `sending` cost PostgreSQL several
    times the walk alone). One statement, the function `courier_broadcast_claim`
    (migration 0022: the lock, the claims, the walk of each gap). Called outside a transaction,
    its own commits the claims as it ends; inside one, the lock is held until that one ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM courier_broadcast_claim(%s, %s, %s, %s, %s, %s, %s)",
            [broadcast_id, n, after, now, now + LEASE, Status.PENDING.value, CLAIM_LOCK],
        )
        return sorted(Leased._make(row) for row in cursor.fetchall())


@dataclass
class RunProgress:
    """What this run has done to each broadcast it sends, so that each is done once per run."""

    started: set[int] = field(default_factory=set)  # marked sending
    # Whose pending rows it has seen run out: only their completion is checked, when the run
    # records results of theirs, or at once when it has none left to record.
    drained: set[int] = field(default_factory=set)
    handbacks_noted: set[int] = field(default_factory=set)  # whose handback it noted


@dataclass
class ClaimBooks:
    """The rows this run has leased and not yet recorded, and their claims."""

    # Per broadcast, the highest row leased: the next claim's index walk starts there, not at the
    # broadcast's first row past every entry its sent rows left behind (until VACUUM, a broadcast
    # of millions walked thousands of index pages to find its first pending row).
    upto: dict[int, int] = field(default_factory=dict)
    of: dict[int, int] = field(default_factory=dict)  # a leased row's BroadcastClaim
    left: collections.Counter = field(default_factory=collections.Counter)  # per claim: its rows not yet recorded
    unrecorded: collections.Counter = field(default_factory=collections.Counter)  # per broadcast

    def book(self, leased: list[Leased]) -> list[Leased]:
        """One claim's rows (one broadcast's, by id), booked: leased, not yet recorded."""
        if leased:
            broadcast_id = leased[0].broadcast_id
            self.upto[broadcast_id] = max(self.upto.get(broadcast_id, 0), leased[-1].id)
            self.unrecorded[broadcast_id] += len(leased)
            for r in leased:
                self.of[r.id] = r.claim
            self.left.update(r.claim for r in leased)
        return leased

    def recorded(self, results: list[Result], *, done: list[int]) -> None:
        """These results' record committed: their rows leave the books (those whose claim the
        reaper took were not written, and are forgotten too), and so do the claims whose last rows
        they were (`done`, deleted by the record)."""
        claims = collections.Counter()
        for r in results:
            claim = self.of.pop(r.id)
            claims[claim] += 1
            self.unrecorded[r.broadcast_id] -= 1
        self.left.subtract(claims)
        for c in done:
            del self.left[c]


@dataclass
class ActiveBroadcasts:
    """The broadcasts being sent, oldest first: looked up again every ACTIVE_TTL seconds, not at
    every claim (the query cost the worker more CPU than leasing a batch of rows)."""

    ids: list[int] = field(default_factory=list)
    looked_at: float | None = None  # monotonic()

    def current(self) -> list[int]:
        if self.looked_at is None or monotonic() - self.looked_at >= ACTIVE_TTL:
            # A message whose files are not all on Telegram yet waits for attachments_upload.
            not_uploaded = BroadcastAttachment.objects.filter(broadcast=OuterRef("pk"), file_id="")
            active = Broadcast.objects.filter(status__in=ACTIVE).exclude(Exists(not_uploaded))
            self.ids = list(active.order_by("id").values_list("id", flat=True))
            self.looked_at = monotonic()
        return self.ids


@dataclass
class BroadcastSendSweep:
    gateway: Gateway
    window: SendWindow = field(default_factory=SendWindow)  # Bot settings' send window (default: always open)
    optout: str = ""  # the opt-out button's text under every broadcast ("": none)
    # Each broadcast's message, built once per run; or why it cannot be built (PUBLIC_URL removed
    # after a tracked button was composed): its rows are then handed back untouched by `work`.
    messages: dict[int, BroadcastMessage | Exception] = field(default_factory=dict)
    progress: RunProgress = field(default_factory=RunProgress)
    claims: ClaimBooks = field(default_factory=ClaimBooks)
    active: ActiveBroadcasts = field(default_factory=ActiveBroadcasts)

    def claim(self, n: int) -> list[Delivery]:
        """Up to n pending deliveries, oldest broadcast first. One broadcast at a time, so the
        query is an ordered scan of the partial index `delivery_pending` (broadcast, id): cheap from
        the first second of a new broadcast, before PostgreSQL has statistics for its rows."""
        now = clock.now()
        if not self.window.is_open(now):  # quiet hours: held until the window opens (no query)
            return []
        rows: list[Leased] = []
        # No transaction of ours: each claim is one statement that commits as it ends (migration
        # 0022: three round trips fewer), and is in this run's books before the next is asked.
        for broadcast_id in self.active.current():
            wanted = n - len(rows)
            after = self.claims.upto.get(broadcast_id, 0)
            leased = self.claims.book(deliveries_claim(broadcast_id, wanted, now=now, after=after))
            if len(leased) < wanted and after:
                # Rows below the mark may be pending again (handed back, a FloodWait's, the
                # reaper's): one walk from the start before the broadcast counts as drained.
                leased += self.claims.book(deliveries_claim(broadcast_id, wanted - len(leased), now=now))
            if len(leased) < wanted and broadcast_id not in self.progress.drained:
                self.progress.drained.add(broadcast_id)
                if not leased and not self.claims.unrecorded[broadcast_id]:  # no record of ours will ask
                    broadcasts_finish(broadcast_ids=[broadcast_id])
            rows += leased
            if len(rows) >= n:
                break
        if not rows:
            return []
        ids = {r.broadcast_id for r in rows}
        if ids - self.progress.started:  # once per broadcast and run, not once per batch
            Broadcast.objects.filter(id__in=ids, status=Broadcast.Status.QUEUED).update(status=Broadcast.Status.SENDING)
            self.progress.started |= ids
        self.gateway.peers_remember({r.chat_id: r.access_hash for r in rows})
        missing = ids - set(self.messages)
        if missing:  # broadcast bodies are loaded once per run, not once per batch
            bodies = Broadcast.objects.filter(id__in=missing).prefetch_related("attachments")
            build = functools.partial(BroadcastMessage.of, optout=self.optout)
            self.messages.update({b.pk: message_or_error(b, build) for b in bodies})
        # A user who sent /stop (or became unreachable) after the broadcast was queued gets nothing.
        active = TelegramUser.State.ACTIVE
        cutoff = now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
        return [
            Delivery(
                r.id,
                r.broadcast_id,
                r.user_id,
                r.chat_id,
                "" if r.user_state == active else f"user is {r.user_state}",
                r.retry_from,
                r.retry_from is not None and r.retry_from < cutoff,
            )  # fmt: skip
            for r in rows
        ]

    def _key(self, row: Delivery) -> str:
        message = self.messages[row.broadcast_id]
        return send_key(kind="b", row_id=row.id, made_at=message.made_at) if isinstance(message, BroadcastMessage) else ""

    def work(self, row: Delivery) -> Result:
        if row.skip:
            return Result(row.id, row.broadcast_id, row.user_id, Status.SKIPPED, error=row.skip)
        if row.late:
            return Result(row.id, row.broadcast_id, row.user_id, Status.INTERRUPTED, error=LATE)
        message = self.messages[row.broadcast_id]
        if isinstance(message, Exception):
            raise message
        try:
            sent = message.send(self.gateway, row.chat_id, user_id=row.user_id, key=self._key(row))
        except TelegramError as exc:
            return self._result(row, exc)
        return self._result(row, sent)

    def work_many(self, rows: list[Delivery]) -> list[Result | Exception]:
        """The rows whose message is one send go to Telegram together (`Gateway.send_many`); the
        others one by one as `work` sends them. A row's exception is its entry (handed back)."""
        outcomes: list[Result | Exception | None] = [None] * len(rows)
        batch: list[tuple[int, SendItem]] = []
        for n, row in enumerate(rows):
            message = self.messages.get(row.broadcast_id)
            usable = isinstance(message, BroadcastMessage) and not row.skip and not row.late
            item = message.item(row.chat_id, user_id=row.user_id, key=self._key(row)) if usable else None
            if item is not None:
                batch.append((n, item))
                continue
            try:
                outcomes[n] = self.work(row)
            except Exception as exc:  # noqa: BLE001 - that row goes back
                outcomes[n] = exc
        if batch:
            # Never raises: an item that could not be sent (Redis down, the token refused) has the
            # exception, and goes back untouched; what was sent is recorded as sent.
            answers = self.gateway.send_many([item for _, item in batch])
            for (n, _), answer in zip(batch, answers, strict=True):
                refused = isinstance(answer, TelegramError) or not isinstance(answer, Exception)
                outcomes[n] = self._result(rows[n], answer) if refused else answer
        return outcomes  # type: ignore[return-value]

    def _result(self, row: Delivery, sent: Sent | TelegramError) -> Result:
        """A delivery's result from what Telegram answered."""
        delivery_id, broadcast_id, user_id = row.id, row.broadcast_id, row.user_id
        if isinstance(sent, Sent):
            return Result(delivery_id, broadcast_id, user_id, Status.SENT, message_id=sent.message_id)
        exc = sent
        if isinstance(exc, PeerUnknown):  # addressed by id, Telegram said they never started the bot: nothing sent
            return Result(delivery_id, broadcast_id, user_id, Status.NOT_USER, error=str(exc)[:255])
        if isinstance(exc, CopyIncomplete):  # a message of several parts stopped partway: never sent again
            failure = send_failure(exc=exc.cause, unreachable_status=Status.BLOCKED)
            log.warning("broadcast send incomplete broadcast=%s user=%s: %s", broadcast_id, user_id, exc)
            return Result(
                delivery_id,
                broadcast_id,
                user_id,
                Status.FAILED,
                message_id=exc.sent[0].message_id,
                error=str(exc)[:255],
                unreachable=failure.unreachable,
            )
        failure = send_failure(exc=exc, unreachable_status=Status.BLOCKED)
        if failure.status == Status.FAILED:
            log.warning("broadcast send failed broadcast=%s user=%s: %s", broadcast_id, user_id, exc)
        retry_from = (row.retry_from or clock.now()) if failure.repeat else None
        if failure.repeat:
            log.warning(
                "broadcast send of unknown outcome broadcast=%s user=%s, to be sent again: %s", broadcast_id, user_id, exc
            )
        return Result(
            delivery_id, broadcast_id, user_id, failure.status, error=failure.error, unreachable=failure.unreachable,
            retry_from=retry_from,
        )  # fmt: skip

    def handback(self, row: Delivery, exc: Exception) -> Result:
        """Untouched, to be sent again; a bug that struck while its send was on its way
        (`maybe_delivered`, set by the gateway) starts its window of repeats as a lost answer does."""
        return Result(
            row.id, row.broadcast_id, row.user_id, Status.PENDING, error=f"{HANDED_BACK}{type(exc).__name__}: {exc}"[:255],
            retry_from=(row.retry_from or clock.now()) if getattr(exc, "maybe_delivered", False) else None,
        )  # fmt: skip

    def _claimed(self, results: list[Result]) -> tuple[list[Result], Callable[[], None]]:
        """Those of the results whose claim is still this run's: locked until the record commits
        (the reaper skips a claim being recorded), and deleted with its last row's result. A claim
        the reaper settled meanwhile (its lease ran out: this run stalled past LEASE) has given its
        rows to the next sender: their results here are dropped, not written over that sender's.
        With them, what to note once the record has committed (a record that fails changes nothing:
        the sweep's last try records the same results again)."""
        claim = {r.id: self.claims.of[r.id] for r in results}
        claims = collections.Counter(claim.values())
        done = [c for c, n in claims.items() if self.claims.left[c] <= n]
        with connection.cursor() as cursor:
            cursor.execute(CLAIMS_LOCK, [sorted(claims)])
            live = {row[0] for row in cursor.fetchall()}
            if done:
                cursor.execute(CLAIMS_DELETE, [done])
        kept = results if len(live) == len(claims) else [r for r in results if claim[r.id] in live]
        if len(kept) < len(results):
            log.error(
                "%s result(s) not recorded: their claim's lease ran out first (claims %s), and the reaper gave "
                "their rows to the next sender (same random_id: Telegram delivers each once)",
                len(results) - len(kept), sorted(set(claims) - live),
            )  # fmt: skip
        return kept, functools.partial(self.claims.recorded, results, done=done)

    def record(self, results: list[Result]) -> tuple[int, int]:
        with transaction.atomic():  # results and the counters they move, together
            now = clock.now()
            results, claimed = self._claimed(results)
            rows = []
            for r in results:
                # A send confirmed only by RANDOM_ID_DUPLICATE has no message id: the broadcast
                # deleter finds it first when it is due (services/repeats.py).
                deletable = r.status == Status.SENT
                delete_after = self.messages[r.broadcast_id].delete_after if deletable else None
                rows.append(
                    {
                        "id": r.id,
                        "status": r.status,
                        "message_id": r.message_id,
                        "error": r.error,
                        "lease_until": None,
                        "sent_at": now if r.status == Status.SENT else None,
                        "delete_at": now + delete_after if r.status == Status.SENT and delete_after else None,
                    }
                )
            rows_update(BroadcastDelivery, rows, ["status", "message_id", "error", "lease_until", "sent_at", "delete_at"])
            repeats = [{"id": r.id, "retry_from": r.retry_from} for r in results if r.retry_from is not None]
            rows_update(BroadcastDelivery, repeats, ["retry_from"])  # kept otherwise: a handback leaves it as it was
            users_mark_unreachable(by_pk={r.user_id: r.unreachable for r in results if r.unreachable})
            sends_count("broadcast", (r.status for r in results if r.status != Status.PENDING))  # handed back: not a send
            counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
            for r in results:
                counts[r.broadcast_id][r.status] += 1
            for broadcast_id, c in counts.items():
                Broadcast.objects.filter(pk=broadcast_id).update(
                    sent=F("sent") + c[Status.SENT],
                    failed=F("failed") + c[Status.FAILED],
                    blocked=F("blocked") + c[Status.BLOCKED],
                    skipped=F("skipped") + c[Status.SKIPPED],
                    interrupted=F("interrupted") + c[Status.INTERRUPTED],
                    not_users=F("not_users") + c[Status.NOT_USER],
                )
            # A bug's streak per broadcast (one note per run), and the end of it when rows settle.
            handed = {r.broadcast_id: r.error[len(HANDED_BACK) :] for r in results if r.error.startswith(HANDED_BACK)}
            broadcasts_progress_note(
                broadcast_ids={r.broadcast_id for r in results if r.status != Status.PENDING} - handed.keys()
            )
            for broadcast_id, error in handed.items():
                if broadcast_id not in self.progress.handbacks_noted:
                    self.progress.handbacks_noted.add(broadcast_id)
                    broadcast_handback_note(broadcast_id=broadcast_id, error=error)
            # Done when nothing is pending or being sent. Only a worker that has seen the pending
            # rows run out asks (it, or another that did, records the last results).
            broadcasts_finish(broadcast_ids=[b for b in counts if b in self.progress.drained])
            reported = [b for b in counts if getattr(self.messages[b], "reported", False)]  # /broadcast's progress message
            if reported:  # edited once committed: no row lock held during the call
                transaction.on_commit(lambda: broadcasts_report(gateway=self.gateway, broadcast_ids=reported))
            outcome = (
                sum(r.status != Status.PENDING for r in results),
                sum(r.status in (Status.FAILED, Status.PENDING) for r in results),
            )
        claimed()  # once committed: a record tried again counts once
        return outcome


def send_broadcasts(*, gateway: Gateway, dry_run: bool = False, batch_size: int = 200, time_budget: float = 50.0) -> Outcome:
    if dry_run:
        due = BroadcastDelivery.objects.filter(status=Status.PENDING, broadcast__status__in=ACTIVE).count()
        return Outcome(due, detail="broadcast messages waiting to be sent")
    started = broadcasts_start_due()
    uploads = attachments_upload(gateway=gateway)
    conf = BotSettings.load()
    window, now = send_window_of(conf=conf), clock.now()
    if window.is_open(now):
        optout = conf.optout_label if conf.optout_enabled else ""
        sweep = BroadcastSendSweep(gateway, window=window, optout=optout)
        outcome = sends_outcome(sweep, batch_size=batch_size, time_budget=time_budget)
    else:  # one check per run: deliveries wait for the window's opening, and the sender wakes then
        opening = window.opens_at(now)
        outcome = Outcome(0, detail=f"held: outside the send window until {window.describe(opening)}")
        if Broadcast.objects.filter(status__in=ACTIVE).exists():
            work_scheduled_announce(work="broadcast", due_at=opening)
    if started:
        outcome.detail += f", {started} scheduled broadcast(s) started"
    if uploads.uploaded or uploads.failed or uploads.refused:
        outcome.detail += f", files uploaded: {uploads.uploaded} ({uploads.failed} to retry, {uploads.refused} refused)"
    return outcome


def scheduled_due_next():
    """When the sender has work next, for the wake-up: the earliest scheduled broadcast or message
    (the partial index `broadcast_scheduled`; starting one is not a send, so the send window does
    not hold it), or, outside the send window, its opening when a broadcast is waiting for it."""
    scheduled = Broadcast.objects.filter(status=Broadcast.Status.SCHEDULED)
    due = scheduled.order_by("scheduled_at").values_list("scheduled_at", flat=True).first()
    window, now = send_window_current(), clock.now()
    if not window.is_open(now) and Broadcast.objects.filter(status__in=ACTIVE).exists():
        opening = window.opens_at(now)
        due = opening if due is None else min(due, opening)
    return due


job_register(
    Job(
        "send_broadcasts",
        send_broadcasts,
        {"minute": "*"},
        "Send queued broadcasts",
        needs_gateway=True,
        wakes_on="broadcast",
        due_next=scheduled_due_next,
    )
)


def prepare_broadcasts(*, gateway=None, dry_run: bool = False, time_budget: float = 240.0) -> Outcome:
    """Make the delivery rows of started broadcasts too large to queue at once (services/
    broadcasts.py: START_ROWS are made when it starts), chunk by chunk while they are being sent.
    The budget lets one run make the rows of the largest broadcasts on its own (beat's run each minute finds a broadcast
    it is preparing locked, and leaves it)."""
    preparing = Broadcast.objects.filter(status__in=ACTIVE + (Broadcast.Status.PAUSED,), prepare_after__isnull=False)
    if dry_run:
        return Outcome(preparing.count(), detail="broadcasts whose rows are being made")
    done = broadcasts_prepare(time_budget=time_budget)
    return Outcome(done.rows, detail=f"delivery rows made, {done.broadcasts} broadcast(s) complete", more=done.more)


job_register(
    Job(
        "prepare_broadcasts",
        prepare_broadcasts,
        {"minute": "*"},
        "Make the rows of large broadcasts",
    )
)
