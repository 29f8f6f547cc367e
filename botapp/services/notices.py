"""The notices outbox: lines for the verification log channel and messages to single users that a
worker sends (the `send_notices` job, scheduler/jobs/notices.py).

Guarantees:
- a notice is a row written in the transaction of what it tells (a verification, a bypass, a ban,
  a referral reward): it exists exactly when that happened, and no restart loses it;
- log lines are joined, in order, into as few messages as fit Telegram's text length, at most
  LOG_MESSAGES_PER_RUN messages per run of the job (every minute): a channel takes about 20
  messages a minute (Telegram's Bots FAQ on groups), so the log never runs into its FloodWait, and
  a burst of verifications waits in the table, not in memory;
- a message's random_id is fixed by its rows before the first attempt (a line's batch is written
  with its claim), so a message is never sent twice: one of unknown outcome is tried again with
  the same random_id, and Telegram drops the repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q

from botapp import clock
from botapp.models import BotSettings, Notice
from botapp.services.outgoing import send_key
from botapp.signals import work_scheduled_announce
from botapp.telegram.limits import TEXT_LENGTH, utf16_length

Status = Notice.Status
LOG_MESSAGES_PER_RUN = 15  # log messages per run of the minute job: under a channel's 20 a minute
LEASE = timedelta(minutes=5)  # a claim whose worker is silent this long is taken again
LINE_LENGTH = 300  # a log line is cut to this (UTF-16 units): one line never fills a message
LINES_PER_MESSAGE_MAX = 200  # lines claimed per log message at most: more than fit one (they are longer than 20)


def notice_log(*, text: str, conf: BotSettings | None = None) -> Notice | None:
    """A line for the verification log channel, when Bot settings name one (else nothing)."""
    conf = conf or BotSettings.load()
    if conf.verification_log_channel_id is None:
        return None
    line = text if utf16_length(text) <= LINE_LENGTH else text[: LINE_LENGTH - 1] + "…"
    return Notice.objects.create(text=line)


def notice_user(*, chat_id: int, text: str) -> Notice:
    """A message to one user, sent by a worker as soon as this transaction commits."""
    notice = Notice.objects.create(chat_id=chat_id, text=text)
    work_scheduled_announce(work="notices", due_at=notice.created_at)
    return notice


@dataclass(frozen=True, slots=True)
class Message:
    """One message to send: to a user, or to the log channel (`chat_id` None: read when sent)."""

    chat_id: int | None
    text: str
    key: str
    row_ids: tuple[int, ...]


def _unsent_q(now) -> Q:
    return Q(status=Status.PENDING) | Q(status=Status.CLAIMED, claimed_at__lt=now - LEASE)


def notices_claim(*, users: int, log_messages: int) -> list[Message]:
    """Claim (with a lease) up to `users` messages to users and the next log lines, joined into at
    most `log_messages` messages. A line claimed before (its worker died) keeps its batch,
    so its message is the one tried before, with the same random_id."""
    now = clock.now()
    with transaction.atomic():
        base = Notice.objects.select_for_update(skip_locked=True, of=("self",)).filter(_unsent_q(now)).order_by("id")
        to_users = list(base.filter(chat_id__isnull=False)[:users])
        lines = list(base.filter(chat_id__isnull=True)[: log_messages * LINES_PER_MESSAGE_MAX]) if log_messages > 0 else []
        batches = {n.batch for n in lines if n.batch is not None}
        if batches:  # the whole of every batch claimed before, even past the slice
            have = {n.pk for n in lines}
            lines += [
                n
                for n in Notice.objects.select_for_update(skip_locked=True, of=("self",)).filter(batch__in=batches)
                if n.pk not in have and n.status != Status.SENT
            ]
            lines.sort(key=lambda n: n.pk)
        groups = _group(lines)[: max(log_messages, 0)]
        claimed = [n for n in to_users] + [n for g in groups for n in g]
        for group in groups:
            for n in group:
                n.batch = group[0].batch or group[0].pk
        Notice.objects.bulk_update(
            [Notice(pk=n.pk, status=Status.CLAIMED, claimed_at=now, batch=n.batch) for n in claimed],
            ["status", "claimed_at", "batch"],
        )
    messages = [Message(n.chat_id, n.text, send_key(kind="u", row_id=n.pk, made_at=n.created_at), (n.pk,)) for n in to_users]
    for group in groups:
        first = min(group, key=lambda n: n.pk)
        messages.append(
            Message(None, "\n".join(n.text for n in group), send_key(kind="v", row_id=first.pk, made_at=first.created_at),
                    tuple(n.pk for n in group))
        )  # fmt: skip
    return messages


def _group(lines: list[Notice]) -> list[list[Notice]]:
    """Lines in id order, joined into messages that fit: a batch given before stays whole and first
    (its message keeps its random_id); new lines fill new messages."""
    groups: dict[int, list[Notice]] = {}
    for n in lines:
        if n.batch is not None:
            groups.setdefault(n.batch, []).append(n)
    out = list(groups.values())
    current: list[Notice] = []
    size = 0
    for n in (n for n in lines if n.batch is None):
        length = utf16_length(n.text) + 1
        if current and size + length > TEXT_LENGTH:
            out.append(current)
            current, size = [], 0
        current.append(n)
        size += length
    if current:
        out.append(current)
    return out


def notices_record(*, sent: list[int], skipped: dict[int, str], again: list[int]) -> None:
    """What came of the claimed rows: sent, not sent (why), or back to waiting (outcome unknown:
    tried again with the same random_id)."""
    now = clock.now()
    with transaction.atomic():
        if sent:
            Notice.objects.filter(pk__in=sent).update(status=Status.SENT, result=f"sent {now:%Y-%m-%d %H:%M}")
        for pk, why in skipped.items():
            Notice.objects.filter(pk=pk).update(status=Status.SKIPPED, result=why[:255])
        if again:
            Notice.objects.filter(pk__in=again).update(status=Status.PENDING, claimed_at=None)


def notices_due_next():
    """When the oldest message to a user was written (log lines wait for the minute job)."""
    waiting = Notice.objects.filter(status=Status.PENDING, chat_id__isnull=False)
    return waiting.order_by("id").values_list("created_at", flat=True).first()


def notices_waiting() -> int:
    """How many notices wait to be sent (a lapsed claim's included)."""
    return Notice.objects.filter(_unsent_q(clock.now())).count()
