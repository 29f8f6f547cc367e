"""Statistics of the onboarding sequences, as an operator reads them in /stats and on a
sequence's admin page: per step, its messages sent / skipped / failed / pending; per button of
the steps (tracked links and tap buttons), the users who clicked it; per campaign payload, the
users enrolled and how many finished (their row of the sequence's last step was sent or skipped).

Guarantees: a fixed number of aggregate queries (GROUP BY), whatever the number of sequences,
steps, users and clicks (`campaign_stats` makes 5: sequences, their steps, the steps' counts,
the clicks, the payloads; 4 when no step has a button with a key, 1 when there is no sequence). Clicks are counted by
key, in the store both kinds of button share (one row per user and key): a key used under
several messages counts its users once, wherever they clicked it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from html import escape

from django.core.exceptions import ValidationError
from django.db.models import Count, Q

from botapp.models import ButtonClick, Sequence, SequenceMessage, SequenceStep
from botapp.models.buttons import button_specs, buttons_parse
from botapp.telegram.limits import TEXT_LENGTH, utf16_length

Status = SequenceMessage.Status


@dataclass
class StepStats:
    step: SequenceStep
    sent: int = 0
    skipped: int = 0
    failed: int = 0  # failed, and interrupted (its answer lost: never sent again)
    pending: int = 0  # pending, and being sent right now


@dataclass
class ButtonStats:
    key: str
    kind: str  # "link" (a tracked link) or "tap" (a callback button)
    users: int = 0


@dataclass
class PayloadStats:
    payload: str  # "" for users who came without one
    users: int = 0
    finished: int = 0


@dataclass
class SequenceStats:
    sequence: Sequence
    steps: list[StepStats] = field(default_factory=list)
    buttons: list[ButtonStats] = field(default_factory=list)
    payloads: list[PayloadStats] = field(default_factory=list)


def campaign_stats(*, sequence_ids: list[int] | None = None) -> list[SequenceStats]:
    """The statistics of every sequence (or of those in `sequence_ids`), by name: 5 queries at most."""
    sequences = Sequence.objects.order_by("name", "id").prefetch_related("steps")
    if sequence_ids is not None:
        sequences = sequences.filter(id__in=sequence_ids)
    found = [SequenceStats(s, steps=[StepStats(step) for step in s.steps.all()]) for s in sequences]
    if not found:
        return []
    by_step = {st.step.pk: st for s in found for st in s.steps}
    for step_id, status, n in (
        SequenceMessage.objects.filter(step_id__in=by_step).values_list("step_id", "status").annotate(n=Count("id")).order_by()
    ):
        st = by_step[step_id]
        if status == Status.SENT:
            st.sent += n
        elif status == Status.SKIPPED:
            st.skipped += n
        elif status in (Status.FAILED, Status.INTERRUPTED):
            st.failed += n
        else:
            st.pending += n
    kinds: dict[str, str] = {}
    for s in found:
        keys: dict[str, str] = {}
        for st in s.steps:
            try:
                rows = buttons_parse(text=st.step.buttons, check_links=False)
            except ValidationError:  # saved under an older rule, or PUBLIC_URL gone since: not counted
                continue
            for spec in button_specs(rows=rows):
                if spec.key:
                    keys.setdefault(spec.key, "tap" if spec.tap else "link")
        s.buttons = [ButtonStats(key, kind) for key, kind in keys.items()]
        kinds.update(keys)
    if kinds:
        clicked = dict(ButtonClick.objects.filter(button__in=kinds).values_list("button").annotate(n=Count("user_id")).order_by())
        for s in found:
            for b in s.buttons:
                b.users = clicked.get(b.key, 0)
    last_steps = {s.steps[-1].step.pk for s in found if s.steps}  # steps are ordered by delay, then id
    payloads: dict[int, dict[str, PayloadStats]] = defaultdict(dict)
    rows = (
        SequenceMessage.objects.filter(step_id__in=by_step)
        .values_list("step__sequence_id", "user__start_payload")
        .annotate(
            users=Count("user_id", distinct=True),
            finished=Count("user_id", filter=Q(step_id__in=last_steps, status__in=(Status.SENT, Status.SKIPPED))),
        )
        .order_by()
    )
    for sequence_id, payload, users, finished in rows:
        payloads[sequence_id][payload] = PayloadStats(payload, users, finished)
    for s in found:
        s.payloads = sorted(payloads[s.sequence.pk].values(), key=lambda p: (not p.payload, -p.users, p.payload))
    return found


MORE = "…and {n} more sequence{s}"


def campaign_stats_text(*, stats: list[SequenceStats], room: int = TEXT_LENGTH) -> str:
    """/stats' block per sequence (Telegram HTML), at most `room` UTF-16 units long: the blocks
    that fit, then "…and N more sequences" for the rest."""
    blocks = [_block(s) for s in stats]
    out: list[str] = []
    used = 0
    for n, block in enumerate(blocks):
        rest = len(blocks) - n - 1
        tail = utf16_length("\n" + MORE.format(n=rest, s="s" * (rest != 1))) if rest else 0
        size = utf16_length(block) + (1 if out else 0)
        if used + size + tail > room:
            more = len(blocks) - n
            out.append(MORE.format(n=more, s="s" * (more != 1)))
            break
        out.append(block)
        used += size
    return "\n".join(out)


def _block(s: SequenceStats) -> str:
    target = f"campaign {escape(s.sequence.start_payload)}" if s.sequence.start_payload else "every new user"
    off = "" if s.sequence.enabled else ", disabled"
    lines = [f"<b>{escape(s.sequence.name)}</b> ({target}{off})"]
    for st in s.steps:
        lines.append(
            f"• after {st.step.delay_text}: {st.sent} sent, {st.skipped} skipped, {st.failed} failed, {st.pending} pending"
        )
    if s.buttons:
        lines.append("• clicks: " + ", ".join(f"{escape(b.key)} {b.users} ({b.kind})" for b in s.buttons))
    for p in s.payloads:
        lines.append(f"• {escape(p.payload) or 'no payload'}: {p.users} user{'s' * (p.users != 1)}, {p.finished} finished")
    return "\n".join(lines)
