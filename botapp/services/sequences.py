"""Onboarding sequences: enrolling a new user schedules every step as a durable row; the
`send_sequence_messages` sweep sends each when due, if the user still wants messages and the
step's condition holds at that moment."""

from __future__ import annotations

import logging
from datetime import timedelta

from botapp import clock
from botapp.cache import HotValue
from botapp.models import SequenceMessage, SequenceStep, TelegramUser
from botapp.signals import work_scheduled_announce

log = logging.getLogger(__name__)


STEPS_KEY = "courier:sequence-steps:v2"  # v2: delays in seconds (v1 cached minutes)
STEPS_TIMEOUT = 300  # seconds: a change the signals missed (a bulk update) shows within this


def sequences_enroll(*, user: TelegramUser) -> int:
    """Schedule the steps of every enabled sequence that fits this new user (the steps from the
    shared cache; one INSERT, none when nothing fits). Returns how many messages were scheduled."""
    start = user.joined_at or clock.now()
    rows = [
        SequenceMessage(user=user, step_id=step_id, chat_id=user.telegram_id, due_at=start + timedelta(seconds=delay))
        for step_id, delay, payload in sequence_steps_enabled()
        if payload in ("", user.start_payload)
    ]
    if rows:
        SequenceMessage.objects.bulk_create(rows, ignore_conflicts=True)
        work_scheduled_announce(work="sequence", due_at=min(r.due_at for r in rows))
    return len(rows)


def sequences_enroll_campaign(*, user: TelegramUser, payload: str) -> int:
    """A returning user came through campaign `payload`: schedule, from now, the steps of every
    enabled sequence that targets exactly that payload and that the user has not had. A step the
    user already has a row for (sent, skipped, or cancelled by /stop) is never scheduled again
    (the row's unique constraint). One INSERT, none when nothing targets the payload."""
    now = clock.now()
    rows = [
        SequenceMessage(user=user, step_id=step_id, chat_id=user.telegram_id, due_at=now + timedelta(seconds=delay))
        for step_id, delay, target in sequence_steps_enabled()
        if payload and target == payload
    ]
    if rows:
        SequenceMessage.objects.bulk_create(rows, ignore_conflicts=True)
        work_scheduled_announce(work="sequence", due_at=min(r.due_at for r in rows))
    return len(rows)


def sequence_payloads() -> frozenset[str]:
    """The start payloads enabled sequences target (from the cached steps: no query)."""
    return frozenset(payload for _, _, payload in sequence_steps_enabled() if payload)


def sequence_steps_enabled() -> list[tuple[int, int, str]]:
    """(step id, delay in seconds, its sequence's start payload) of every enabled sequence's
    steps: runbot needs them for every new user, so they are a HotValue (Redis, and this process
    for a second), forgotten whenever a sequence or a step is saved or deleted (botapp.apps)."""
    return STEPS.get()


def _steps_load() -> list[tuple[int, int, str]]:
    return [
        tuple(row)
        for row in SequenceStep.objects.filter(sequence__enabled=True).values_list(
            "id", "delay_seconds", "sequence__start_payload"
        )
    ]


STEPS = HotValue(STEPS_KEY, _steps_load, timeout=STEPS_TIMEOUT, what="sequence steps")


def sequence_steps_forget() -> None:
    """Drop the cached steps: the next new user reads them again."""
    STEPS.forget()
