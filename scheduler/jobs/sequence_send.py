"""The sequence sender: sends due onboarding steps. A step is skipped when the user has stopped
messages (or cannot be reached) or its click condition does not hold when it comes due. What a
refused send means is `send_failure`'s to say, as for broadcasts (a user who blocked the bot or
deleted their account: the step is skipped and the user marked so)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from botapp import clock
from botapp.metrics import sends_count
from botapp.models import BotSettings, ButtonClick, SequenceMessage, SequenceStep, TelegramUser
from botapp.models.buttons import buttons_parse
from botapp.services.outgoing import Outgoing, send_failure, send_key
from botapp.services.posts import PostCopy
from botapp.services.send_window import SendWindow, send_window_due, send_window_of
from botapp.services.users import users_mark_unreachable
from botapp.telegram.gateway import Gateway, TelegramError
from scheduler.jobs.bulk import rows_update
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import LEASE, message_or_error, sends_outcome

log = logging.getLogger(__name__)

Status = SequenceMessage.Status
LATE = "outcome unknown, and its random_id is past TELEGRAM_RANDOM_ID_WINDOW: not sent again"
Condition = SequenceStep.Condition


@dataclass(slots=True)
class Due:
    id: int
    step_id: int
    user_id: int
    chat_id: int
    due_at: datetime
    retry_from: datetime | None  # its first attempt of unknown outcome (None: none)
    skip: str = ""  # why it is not sent
    late: bool = False  # that attempt is older than TELEGRAM_RANDOM_ID_WINDOW: not sent again

    @property
    def key(self) -> str:
        return send_key(kind="s", row_id=self.id, made_at=self.due_at)


@dataclass(slots=True)
class Result:
    id: int
    user_id: int
    status: str
    message_id: int | None = None
    error: str = ""
    unreachable: str = ""
    retry_from: datetime | None = None  # set: to be sent again with the same random_id (since then)


@dataclass
class SequenceSendSweep:
    gateway: Gateway
    messages: dict[int, Outgoing | PostCopy | Exception] = field(default_factory=dict)  # per step; or why it cannot be built
    window: SendWindow = field(default_factory=SendWindow)  # Bot settings' send window (default: always open)
    optout: str = ""  # the opt-out button's text under every step ("": none)

    def claim(self, n: int) -> list[Due]:
        """Due rows, each the user's earliest not yet settled: a user whose steps fell due together
        (a sender that was down, steps minutes apart) gets them in order, one per run, never two
        at once racing in the sending threads. A row another worker holds (sending) or handed
        back (pending) keeps the user's later steps waiting too."""
        now = clock.now()
        if not self.window.is_open(now):  # quiet hours: held until the window opens (no query)
            return []
        earlier = SequenceMessage.objects.filter(
            Q(due_at__lt=OuterRef("due_at")) | Q(due_at=OuterRef("due_at"), id__lt=OuterRef("id")),
            user_id=OuterRef("user_id"),
            status__in=(Status.PENDING, Status.SENDING),
        )
        with transaction.atomic():
            rows = [
                Due(*r)
                for r in SequenceMessage.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(~Exists(earlier), status=Status.PENDING, due_at__lte=now)
                .order_by("due_at", "id")
                .values_list("id", "step_id", "user_id", "chat_id", "due_at", "retry_from")[:n]
            ]
            if not rows:
                return []
            SequenceMessage.objects.filter(id__in=[r.id for r in rows]).update(status=Status.SENDING, lease_until=now + LEASE)
        steps = SequenceStep.objects.in_bulk({r.step_id for r in rows})
        user_ids = {r.user_id for r in rows}
        users = {
            pk: (state, access_hash)
            for pk, state, access_hash in TelegramUser.objects.filter(id__in=user_ids).values_list("id", "state", "access_hash")
        }
        states = {pk: state for pk, (state, _) in users.items()}
        self.gateway.peers_remember({r.chat_id: users.get(r.user_id, (None, None))[1] for r in rows})
        keys = {s.condition_button for s in steps.values() if s.condition != Condition.ALWAYS}
        clicked = (
            set(ButtonClick.objects.filter(user_id__in=user_ids, button__in=keys).values_list("user_id", "button"))
            if keys
            else set()
        )
        cutoff = now - timedelta(seconds=settings.TELEGRAM_RANDOM_ID_WINDOW)
        for row in rows:
            step = steps[row.step_id]
            row.late = row.retry_from is not None and row.retry_from < cutoff
            if states.get(row.user_id) != TelegramUser.State.ACTIVE:
                row.skip = f"user is {states.get(row.user_id, 'gone')}"
            elif step.condition == Condition.NOT_CLICKED and (row.user_id, step.condition_button) in clicked:
                row.skip = f"clicked {step.condition_button}"
            elif step.condition == Condition.CLICKED and (row.user_id, step.condition_button) not in clicked:
                row.skip = f"did not click {step.condition_button}"
        self.messages = {
            step.pk: message_or_error(step, lambda s: step_message(s, optout=self.optout)) for step in steps.values()
        }
        return rows

    def work(self, due: Due) -> Result:
        if due.skip:
            return Result(due.id, due.user_id, Status.SKIPPED, error=due.skip)
        if due.late:
            return Result(due.id, due.user_id, Status.INTERRUPTED, error=LATE)
        message = self.messages[due.step_id]
        if isinstance(message, Exception):
            raise message  # handed back untouched, until the step can be built
        try:
            sent = message.send(self.gateway, due.chat_id, user_id=due.user_id, key=due.key)
        except TelegramError as exc:
            failure = send_failure(exc=exc, unreachable_status=Status.SKIPPED)
            if failure.status == Status.FAILED:
                log.warning("sequence send failed message=%s chat=%s: %s", due.id, due.chat_id, exc)
            if failure.repeat:
                log.warning("sequence send of unknown outcome message=%s chat=%s, to be sent again: %s", due.id, due.chat_id, exc)
            return Result(
                due.id, due.user_id, failure.status, error=failure.error, unreachable=failure.unreachable,
                retry_from=(due.retry_from or clock.now()) if failure.repeat else None,
            )  # fmt: skip
        return Result(due.id, due.user_id, Status.SENT, message_id=sent.message_id)

    def handback(self, due: Due, exc: Exception) -> Result:
        """As a broadcast's: a bug that struck while the send was on its way starts its repeats' window."""
        maybe = getattr(exc, "maybe_delivered", False)
        return Result(
            due.id, due.user_id, Status.PENDING, error=f"handed back: {exc}"[:255],
            retry_from=(due.retry_from or clock.now()) if maybe else None,
        )  # fmt: skip

    def record(self, results: list[Result]) -> tuple[int, int]:
        with transaction.atomic():  # results and the counters they move, together
            now = clock.now()
            rows_update(
                SequenceMessage,
                [
                    {
                        "id": r.id,
                        "status": r.status,
                        "message_id": r.message_id,
                        "error": r.error[:255],
                        "lease_until": None,
                        "sent_at": now if r.status == Status.SENT else None,
                    }
                    for r in results
                ],
                ["status", "message_id", "error", "lease_until", "sent_at"],
            )
            repeats = [{"id": r.id, "retry_from": r.retry_from} for r in results if r.retry_from is not None]
            rows_update(SequenceMessage, repeats, ["retry_from"])  # kept otherwise: a handback leaves it as it was
            users_mark_unreachable(by_pk={r.user_id: r.unreachable for r in results if r.unreachable})
            sends_count("sequence", (r.status for r in results if r.status != Status.PENDING))  # handed back: not a send
            return sum(r.status in (Status.SENT, Status.SKIPPED) for r in results), sum(
                r.status in (Status.FAILED, Status.INTERRUPTED, Status.PENDING) for r in results
            )


def step_message(step: SequenceStep, *, optout: str = "") -> Outgoing | PostCopy:
    """The step as users get it: a copy of its post with its buttons, or the message it composes;
    with the opt-out button (`optout`, its text) under them when Bot settings ask for it."""
    if step.post_id:
        rows = buttons_parse(text=step.buttons, check_links=False)
        return PostCopy(step.post_chat_id, step.post_id, rows, protect=step.protect_content, source=f"s{step.pk}", optout=optout)
    return Outgoing.compose(
        text=step.text,
        media_kind=step.media_kind,
        media=step.media,
        buttons=step.buttons,
        protect=step.protect_content,
        source=f"s{step.pk}",
        optout=optout,
    )


def send_sequence_messages(
    *, gateway: Gateway, dry_run: bool = False, batch_size: int = 200, time_budget: float = 50.0
) -> Outcome:
    if dry_run:
        due = SequenceMessage.objects.filter(status=Status.PENDING, due_at__lte=clock.now()).count()
        return Outcome(due, detail="sequence messages due")
    conf = BotSettings.load()
    window, now = send_window_of(conf=conf), clock.now()
    if not window.is_open(now):  # one check per run: due steps wait for the window's opening
        return Outcome(0, detail=f"held: outside the send window until {window.describe(window.opens_at(now))}")
    optout = conf.optout_label if conf.optout_enabled else ""
    sweep = SequenceSendSweep(gateway, window=window, optout=optout)
    return sends_outcome(sweep, batch_size=batch_size, time_budget=time_budget)


def sequence_due_next():
    """When the earliest pending step may go (the partial index `seqmsg_due`), for the wake-up:
    its due time, or the send window's opening when it falls due outside the window."""
    due = SequenceMessage.objects.filter(status=Status.PENDING).order_by("due_at").values_list("due_at", flat=True).first()
    return None if due is None else send_window_due(due=due)


job_register(
    Job(
        "send_sequence_messages",
        send_sequence_messages,
        {"minute": "*"},
        "Send due onboarding messages",
        needs_gateway=True,
        wakes_on="sequence",
        due_next=sequence_due_next,
    )
)
