"""The button grammar operators write in the admin, the API and the bot (broadcasts, sequence steps,
the welcome): plain parsing and validation, no sending, so models and services can both use it.

Buttons are written one row per line, with `||` between buttons on a row:

- a link: `Text | https://url` (http(s) with a host, or tg://: what Telegram accepts on a button).
  A third part names it for click tracking: `Join | https://t.me/+abc | joined`
  (services/outgoing.py renders a tracked button through Courier's redirect);
- a callback button: `Text | tap:key`, recorded as a click on `key` when tapped
  (services/taps.py). Options follow, each `| name: value`:
  `toast: text` (a short notice at the top of the chat) or `alert: text` (a pop-up to close),
  at most CALLBACK_ANSWER_LENGTH characters; `reply: text` (a message sent on the first tap);
  `then: <a button>` (the button becomes that one: the rest of the line, a link or another
  callback button), e.g. `✅ I joined | tap:joined | toast: Thanks! | then: 🔎 Verify | https://t.me/x`;
  `member: <channel id>` (the tap counts only from a member of that channel: Telegram is asked,
  and anyone else is told to join first, nothing recorded; the drip bot's Verify of TARGET_CHANNEL_ID).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.utils.html import escape

from botapp.telegram.limits import BUTTON_TEXT_LENGTH, CALLBACK_ANSWER_LENGTH, channel_id_problem, utf16_length

KEY_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
TG_URL_RE = re.compile(r"^tg://[a-z_]+[^\s]*$", re.IGNORECASE)  # tg://resolve?domain=x, tg://join?invite=y, ...
_http_url = URLValidator(schemes=["http", "https"])


TAP_PREFIX = "tap:"
TAP_OPTIONS = ("toast", "alert", "reply", "member", "then")
THEN_DEPTH = 5  # states one button goes through, at most: each makes its callback data longer


@dataclass(frozen=True)
class ButtonSpec:
    text: str
    url: str = ""  # a link button's target; "" for a callback button
    key: str = ""  # a link: tracked when set; a callback button: the click it records
    tap: bool = False  # a callback button
    answer: str = ""  # a callback button's answer (toast, or alert when `alert`)
    alert: bool = False
    reply: str = ""  # a message the bot sends on the first tap (Telegram HTML)
    then: ButtonSpec | None = None  # what the button turns into once tapped
    member: int | None = None  # a callback button: the channel whose members alone may tap it


def buttons_parse(*, text: str, check_links: bool = True) -> list[list[ButtonSpec]]:
    """Parse the admin's button lines into rows of buttons; a ValidationError names every line that
    is wrong, each once (no text or link, a link Telegram would refuse, a bad click key, tracking
    without PUBLIC_URL). Senders pass `check_links=False`: a message composed under an older,
    looser rule still goes out, and Telegram's refusal is then each send's own result."""
    rows, errors = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(_button_row(number, line, check_links=check_links))
        except ValidationError as exc:
            errors.extend(exc.messages)
    if errors:
        raise ValidationError(errors)
    return rows


def _button_row(number: int, line: str, *, check_links: bool) -> list[ButtonSpec]:
    return [_button(number, part, check_links=check_links) for part in line.split("||")]


def _button(number: int, part: str, *, check_links: bool, depth: int = 0) -> ButtonSpec:
    pieces = [p.strip() for p in part.split("|")]
    if len(pieces) >= 2 and pieces[1].lower().startswith(TAP_PREFIX):
        return _tap_button(number, pieces, check_links=check_links, depth=depth)
    if len(pieces) not in (2, 3) or not pieces[0] or not pieces[1]:
        raise ValidationError(
            f'Line {number}: write a button as "Text | https://example.com" (optionally "| key" to track clicks), '
            'or "Text | tap:key" for a button that answers in the chat.'
        )
    label, url, key = pieces[0], pieces[1], pieces[2] if len(pieces) == 3 else ""
    if check_links and not button_url_ok(url=url):
        raise ValidationError(
            f"Line {number}: {escape(url)} is not a link Telegram accepts on a button "
            "(https://… or http://… with a host, or tg://…)."
        )
    _label_check(number, label)
    if key and not KEY_RE.match(key):
        raise ValidationError(f"Line {number}: a click key uses a-z, 0-9, _ and - only (got {escape(key)!s}).")
    if key and not settings.PUBLIC_URL:
        raise ValidationError(
            f"Line {number}: clicks cannot be tracked on this server yet: a tracked link goes through the console's "
            "public address, which whoever runs Courier has not set (PUBLIC_URL, docs/operating.md). "
            f"Remove “| {escape(key)}” to send the link untracked."
        )
    return ButtonSpec(label, url, key)


def _tap_button(number: int, pieces: list[str], *, check_links: bool, depth: int = 0) -> ButtonSpec:
    """`Text | tap:key [| toast: …] [| alert: …] [| reply: …] [| member: -100…] [| then: <button>]`."""
    label, key = pieces[0], pieces[1][len(TAP_PREFIX) :].strip()
    if not label:
        raise ValidationError(f'Line {number}: a callback button needs a text: "✅ I joined | tap:joined".')
    _label_check(number, label)
    if not KEY_RE.match(key):
        raise ValidationError(f"Line {number}: a tap key uses a-z, 0-9, _ and - only (got {escape(key) or 'nothing'}).")
    options: dict[str, str] = {}
    rest = pieces[2:]
    then = None
    while rest:
        name, colon, value = rest.pop(0).partition(":")
        name = name.strip().lower()
        if not colon or name not in TAP_OPTIONS:
            raise ValidationError(
                f"Line {number}: after tap:{escape(key)} write options as "
                '"| toast: text", "| alert: text", "| reply: text", "| member: -100…" or "| then: Text | https://…".'
            )
        if name in options or (name == "then" and then is not None):
            raise ValidationError(f"Line {number}: {name} is given twice.")
        if name == "then":
            if depth >= THEN_DEPTH:
                raise ValidationError(f"Line {number}: a button turns into another at most {THEN_DEPTH} times.")
            then = _button(number, " | ".join([value, *rest]), check_links=check_links, depth=depth + 1)
            rest = []
            continue
        options[name] = value.strip()
    if "toast" in options and "alert" in options:
        raise ValidationError(f"Line {number}: a tap answers with a toast or an alert, not both.")
    answer = options.get("toast", options.get("alert", ""))
    if utf16_length(answer) > CALLBACK_ANSWER_LENGTH:
        raise ValidationError(
            f"Line {number}: a toast or alert is at most {CALLBACK_ANSWER_LENGTH} characters as Telegram counts them "
            f"(an emoji counts 2); this one has {utf16_length(answer)}."
        )
    if "reply" in options and not options["reply"]:
        raise ValidationError(f"Line {number}: reply: needs the text to send.")
    member = options.get("member")
    if member is not None:
        problem = (
            channel_id_problem(int(member)) if re.fullmatch(r"-?\d{1,19}", member) else "A channel id looks like -1001234567890."
        )
        if problem:
            raise ValidationError(f"Line {number}: member: {escape(problem)}")
    return ButtonSpec(
        label, key=key, tap=True, answer=answer, alert="alert" in options, reply=options.get("reply", ""), then=then,
        member=int(member) if member is not None else None,
    )  # fmt: skip


def _label_check(number: int, label: str) -> None:
    if problem := button_text_problem(text=label):
        raise ValidationError(f"Line {number}: {problem}")


def button_specs(*, rows: list[list[ButtonSpec]]) -> list[ButtonSpec]:
    """Every button of these rows and every state each can turn into, in order."""
    found = []
    for row in rows:
        for spec in row:
            while spec is not None:
                found.append(spec)
                spec = spec.then
    return found


def button_text_problem(*, text: str) -> str:
    """Why `text` cannot be a button's label: over BUTTON_TEXT_LENGTH as Telegram counts (UTF-16
    units); "" when it can."""
    length = utf16_length(text)
    if length <= BUTTON_TEXT_LENGTH:
        return ""
    return f"button text is at most {BUTTON_TEXT_LENGTH} characters as Telegram counts them (an emoji counts 2); this one has {length}."


def button_url_ok(*, url: str) -> bool:
    """Whether Telegram takes `url` on a link button: http(s) with a valid host, or tg://. Anything
    else (mailto:, javascript:, a bare word) would fail every send of the message."""
    if url.lower().startswith("tg://"):
        return bool(TG_URL_RE.match(url))
    try:
        _http_url(url)
    except ValidationError:
        return False
    return True
