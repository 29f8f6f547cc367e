"""Seed 002's drip bot rebuilt on Courier from its own `.env` (shared/seeds/002_*.txt): the posts
channel (SOURCE_CHANNEL_ID), the welcome post (MSG_IMMEDIATE_ID), the channel link /about and /faq
carry (CHANNEL_URL), and a sequence for every new user
with the bot's four timed tasks as steps, at the document's delays: msg_30s after 40 s, msg_3min
after 3 min, the farewell (msg_cleanup) CLEANUP_DELAY_MINUTES (15) after that, and msg_2h after 2 h
only for users who have not clicked join_channel. The post steps carry the bot's keyboard: a link
to CHANNEL_URL and "✅ I Joined", which records join_channel and turns into Verify (recording
verify, for a member of TARGET_CHANNEL_ID only when it is set), as the drip bot's buttons did.

`drip_env_read` checks the file before anything is written; `drip_campaign_build` is idempotent
(a sequence of the same name is found again, its steps by delay) and with `dry_run` writes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from botapp.models import BotSettings, Sequence, SequenceStep
from botapp.models.buttons import buttons_parse
from botapp.services.audit import audited
from botapp.services.import_files import ImportFileError
from botapp.telegram.limits import MESSAGE_ID_MAX, channel_id_problem

SEQUENCE_NAME = "Drip bot (imported)"
FAREWELL = "Thanks for using this bot!"  # the document's farewell, when no task of the database names one
# The post buttons' label: the document shows the worker's one mis-encoded ("â Join Now"); its
# broadcasts' "⚡ Join Now" is the legible one.
JOIN_LABEL = "⚡ Join Now"
JOINED = "✅ I Joined | tap:join_channel | then: 🔎 Verify | tap:verify{member} | reply: ✅ Verified!"
CLEANUP_DELAY_MINUTES = 15  # the document's default
REQUIRED_POSTS = ("MSG_30S_ID", "MSG_3MIN_ID", "MSG_2H_ID")


@dataclass
class DripEnv:
    """The drip bot's .env, checked: each value with the line it is on."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, name: str) -> str:
        return f"{self.path} line {self.lines[name]}: {name}" if name in self.lines else f"{self.path}: {name}"

    def number(self, name: str) -> int | None:
        return int(self.values[name]) if self.values.get(name) else None


@dataclass(frozen=True)
class StepPlan:
    task_type: str
    delay_seconds: int
    post_id: int | None = None
    text: str = ""
    buttons: str = ""
    not_clicked: str = ""

    def describe(self) -> str:
        what = f"post {self.post_id}" if self.post_id else f"the text {self.text!r}"
        extra = f", only if {self.not_clicked} was not clicked" if self.not_clicked else ""
        buttons = f", buttons: {' / '.join(line.split(' | ')[0] for line in self.buttons.splitlines())}" if self.buttons else ""
        return f"step {self.task_type}: after {_span(self.delay_seconds)}, {what}{buttons}{extra}"


def _span(seconds: int) -> str:
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    return " ".join(p for p in (f"{hours} h" if hours else "", f"{m} min" if m else "", f"{s} s" if s else "") if p)


def drip_env_read(*, path: str | Path) -> DripEnv:
    """Read and check a drip bot's .env (`NAME=value`, `# comments`, quotes, `export`): the channel
    ids, the post ids, CHANNEL_URL and CLEANUP_DELAY_MINUTES. Raises ImportFileError naming the
    file, the line and the variable of the first thing wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise ImportFileError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(f"{path}: cannot read it as text ({exc})") from exc
    env = DripEnv(path)
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or not name.replace("_", "").isalnum():
            raise ImportFileError(f"{path} line {number}: {line[:40]!r} is not NAME=value")
        value = value.strip()
        if value[:1] in ("'", '"'):
            value = value[1:].split(value[0], 1)[0]
        else:
            value = value.split(" #", 1)[0].split("\t#", 1)[0].strip()
        env.values[name], env.lines[name] = value, number
    for name in ("SOURCE_CHANNEL_ID", *REQUIRED_POSTS):
        if not env.values.get(name):
            raise ImportFileError(f"{env.where(name)} is not set (the drip bot's campaign needs it)")
    for name in ("SOURCE_CHANNEL_ID", "TARGET_CHANNEL_ID"):
        raw = env.values.get(name, "")
        if raw and (not raw.lstrip("-").isdigit() or channel_id_problem(int(raw))):
            raise ImportFileError(f"{env.where(name)}: {raw!r} is not a channel id (like -1001234567890)")
    for name in ("MSG_IMMEDIATE_ID", *REQUIRED_POSTS):
        raw = env.values.get(name, "")
        if raw and raw != "0" and (not raw.isdigit() or not 0 < int(raw) <= MESSAGE_ID_MAX):
            raise ImportFileError(f"{env.where(name)}: {raw!r} is not a message id of the channel")
    if env.values.get("MSG_IMMEDIATE_ID") == "0":  # the drip bot's "not set" (it warns and goes on)
        env.values["MSG_IMMEDIATE_ID"] = ""
    raw = env.values.get("CLEANUP_DELAY_MINUTES", "")
    if raw and not raw.isdigit():
        raise ImportFileError(f"{env.where('CLEANUP_DELAY_MINUTES')}: {raw!r} is not a number of minutes")
    if url := env.values.get("CHANNEL_URL"):
        try:
            buttons_parse(text=f"{JOIN_LABEL} | {url}")
        except ValidationError as exc:
            raise ImportFileError(f"{env.where('CHANNEL_URL')}: {url!r} is not a link a button can carry") from exc
    return env


def drip_farewell(*, path: str | Path | None) -> str:
    """The farewell the drip bot's msg_cleanup tasks carry in their payload (the latest written),
    or the document's when its database names none."""
    if path is None:
        return FAREWELL
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT payload FROM tasks WHERE task_type = 'msg_cleanup' ORDER BY rowid DESC LIMIT 50")
            for (payload,) in rows:
                try:
                    text = json.loads(payload or "{}").get("farewell_message")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if isinstance(text, str) and text.strip():
                    return text.strip()
        finally:
            conn.close()
    except sqlite3.DatabaseError:  # no such table or column: the document's farewell
        pass
    return FAREWELL


def drip_campaign_plan(*, env: DripEnv, farewell: str) -> list[StepPlan]:
    """The four steps, in the document's order and delays."""
    target = env.values.get("TARGET_CHANNEL_ID")
    joined = JOINED.format(member=f" | member: {target}" if target else "")  # Verify checks the membership
    keyboard = "\n".join(
        filter(None, (f"{JOIN_LABEL} | {env.values['CHANNEL_URL']}" if env.values.get("CHANNEL_URL") else "", joined))
    )
    cleanup = 180 + 60 * int(env.values.get("CLEANUP_DELAY_MINUTES") or CLEANUP_DELAY_MINUTES)
    return [
        StepPlan("msg_30s", 40, post_id=env.number("MSG_30S_ID"), buttons=keyboard),
        StepPlan("msg_3min", 180, post_id=env.number("MSG_3MIN_ID"), buttons=keyboard),
        StepPlan("msg_cleanup", cleanup, text=farewell),
        StepPlan("msg_2h", 7200, post_id=env.number("MSG_2H_ID"), buttons=keyboard, not_clicked="join_channel"),
    ]


@dataclass
class CampaignReport:
    lines: list[str] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)  # task type -> step id (dry run, new: negative)


@audited(action="import.campaign")
def drip_campaign_build(*, env: DripEnv, farewell: str, dry_run: bool = False) -> CampaignReport:
    """Write the campaign: Bot settings' posts channel and welcome post (when not set already: an
    operator's own choice is kept, and said), the sequence "Drip bot (imported)" for every new user
    and its steps. A second run finds the sequence and its steps (by delay) and writes nothing new.
    Returns what it did (or, `dry_run`, would do) line by line, and each task type's step."""
    report = CampaignReport()
    channel = env.number("SOURCE_CHANNEL_ID")
    welcome = env.number("MSG_IMMEDIATE_ID")
    with transaction.atomic():
        conf = BotSettings.load()
        changed = []
        for name, value, what in (
            ("posts_channel_id", channel, "posts channel"),
            ("welcome_post_id", welcome, "welcome post"),
            ("channel_url", env.values.get("CHANNEL_URL") or None, "channel link (/about and /faq's button)"),
        ):
            current = getattr(conf, name)
            if value is None or current == value:
                continue
            if current in (None, ""):
                setattr(conf, name, value)
                changed.append(name)
                report.lines.append(f"Bot settings: {what} {value}")
            else:
                report.lines.append(f"Bot settings: {what} kept as {current} (the .env says {value}: change it on the page)")
        sequence = Sequence.objects.filter(name=SEQUENCE_NAME).first()
        existing = {s.delay_seconds: s for s in sequence.steps.all()} if sequence else {}
        if sequence is None:
            report.lines.append(f"sequence {SEQUENCE_NAME!r}: for every new user")
            if not dry_run:
                sequence = Sequence.objects.create(name=SEQUENCE_NAME)
        planned = []  # the steps written (or, dry run, to be written) now
        for n, plan in enumerate(drip_campaign_plan(env=env, farewell=farewell), 1):
            step = existing.get(plan.delay_seconds)
            if step is not None:
                report.steps[plan.task_type] = step.pk
                continue
            planned.append(plan)
            report.lines.append(plan.describe())
            step = SequenceStep(
                sequence=sequence, delay_seconds=plan.delay_seconds, post_id=plan.post_id,
                post_chat_id=channel if plan.post_id else None, text=plan.text, buttons=plan.buttons,
                condition="not_clicked" if plan.not_clicked else "always", condition_button=plan.not_clicked,
            )  # fmt: skip
            try:
                step.full_clean(exclude=["sequence"])
            except ValidationError as exc:
                raise ImportFileError(f"{env.path}: step {plan.task_type}: {'; '.join(exc.messages)}") from exc
            if dry_run:
                report.steps[plan.task_type] = -n
            else:
                step.save()
                report.steps[plan.task_type] = step.pk
        target = env.values.get("TARGET_CHANNEL_ID")
        if target and any(plan.buttons for plan in planned):
            report.lines.append(
                f"TARGET_CHANNEL_ID {target}: Verify counts for its members only (the bot must be an admin there)"
            )
        if changed and not dry_run:
            conf.save(update_fields=changed)
    return report
