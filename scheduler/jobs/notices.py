"""Sending the notices outbox (botapp/services/notices.py): the verification log channel's lines,
a few messages a minute, and messages to single users (a referrer told of their reward) at once.

A message of unknown outcome (a lost answer, -503, 500 INTERNAL) goes back to waiting with its
batch, and the next run sends it again with the same random_id, which Telegram delivers once; a
repeat refused as RANDOM_ID_DUPLICATE means it arrived. Telegram's refusal (the bot removed from
the channel, a user who blocked it) is that message's result, recorded and not tried again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from botapp.models import BotSettings
from botapp.services.notices import (
    LOG_MESSAGES_PER_RUN,
    Message,
    notices_claim,
    notices_due_next,
    notices_record,
    notices_waiting,
)
from botapp.telegram.gateway import AlreadySent, Gateway, OutcomeUnknown, TelegramError
from scheduler.jobs.registry import Job, Outcome, job_register
from scheduler.jobs.sweep import sweep_outcome

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Result:
    message: Message
    sent: bool = False
    again: bool = False
    why: str = ""


@dataclass
class NoticesSweep:
    gateway: Gateway
    conf: BotSettings = field(default_factory=BotSettings.load)
    log_left: int = LOG_MESSAGES_PER_RUN  # log messages this run may still send

    def claim(self, n: int) -> list[Message]:
        messages = notices_claim(users=n, log_messages=self.log_left)
        self.log_left -= sum(m.chat_id is None for m in messages)
        return messages

    def work(self, message: Message) -> Result:
        chat_id = message.chat_id if message.chat_id is not None else self.conf.verification_log_channel_id
        if chat_id is None:
            return Result(message, why="no verification log channel in Bot settings")
        try:
            self.gateway.send_text(chat_id, message.text, key=message.key)
        except AlreadySent:
            return Result(message, sent=True)
        except OutcomeUnknown as exc:
            log.warning("notice of unknown outcome rows=%s chat=%s, sent again next run: %s", message.row_ids, chat_id, exc)
            return Result(message, again=True)
        except TelegramError as exc:
            log.info("notice not sent rows=%s chat=%s: %s", message.row_ids, chat_id, exc)
            return Result(message, why=f"not sent: {exc}")
        return Result(message, sent=True)

    def handback(self, message: Message, exc: Exception) -> Result:
        return Result(message, again=True)

    def record(self, results: list[Result]) -> tuple[int, int]:
        notices_record(
            sent=[pk for r in results if r.sent for pk in r.message.row_ids],
            skipped={pk: r.why for r in results if r.why for pk in r.message.row_ids},
            again=[pk for r in results if r.again for pk in r.message.row_ids],
        )
        return sum(r.sent for r in results), sum(bool(r.why) for r in results)


def send_notices(*, gateway: Gateway | None = None, dry_run: bool = False, batch_size: int = 50) -> Outcome:
    if dry_run:
        return Outcome(notices_waiting(), detail="notices waiting")
    return sweep_outcome(NoticesSweep(gateway), batch_size=batch_size, time_budget=50.0, in_flight=2)


job_register(
    Job(
        "send_notices",
        send_notices,
        {"minute": "*"},
        "Post the verification log and send referral rewards' notices",
        needs_gateway=True,
        wakes_on="notices",
        due_next=notices_due_next,
    )
)
