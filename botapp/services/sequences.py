"""Onboarding sequences: enrolling a new user schedules every step as a durable row; the
`send_sequence_messages` sweep sends each when due, if the user still wants messages and the
step's condition holds at that moment."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q

from botapp import clock
from botapp.models import SequenceMessage, SequenceStep, TelegramUser


def sequences_enroll(*, user: TelegramUser) -> int:
    """Schedule the steps of every enabled sequence that fits this new user (two queries, whatever
    the number of steps). Returns how many messages were scheduled."""
    steps = SequenceStep.objects.filter(sequence__enabled=True).filter(
        Q(sequence__start_payload="") | Q(sequence__start_payload=user.start_payload)
    )
    start = user.joined_at or clock.now()
    rows = [
        SequenceMessage(user=user, step_id=step_id, chat_id=user.telegram_id, due_at=start + timedelta(minutes=delay))
        for step_id, delay in steps.values_list("id", "delay_minutes")
    ]
    SequenceMessage.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
