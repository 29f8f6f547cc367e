"""The button grammar operators write in the admin, the API and the bot (broadcasts, sequence steps,
the welcome): plain parsing and validation, no sending, so models and services can both use it.

Buttons are written one row per line: `Text | https://url`, with `||` between buttons on a row.
A link is http(s) with a host or tg:// (what Telegram accepts on a button). A third part names the
button for click tracking: `Join | https://t.me/+abc | joined` (services/outgoing.py renders a
tracked button through Courier's redirect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.utils.html import escape

from botapp.telegram.limits import BUTTON_TEXT_LENGTH, utf16_length

KEY_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
TG_URL_RE = re.compile(r"^tg://[a-z_]+[^\s]*$", re.IGNORECASE)  # tg://resolve?domain=x, tg://join?invite=y, ...
_http_url = URLValidator(schemes=["http", "https"])


@dataclass(frozen=True)
class ButtonSpec:
    text: str
    url: str
    key: str = ""  # tracked when set


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
    row = []
    for part in line.split("||"):
        pieces = [p.strip() for p in part.split("|")]
        if len(pieces) not in (2, 3) or not pieces[0] or not pieces[1]:
            raise ValidationError(
                f'Line {number}: write a button as "Text | https://example.com" (optionally "| key" to track clicks).'
            )
        label, url, key = pieces[0], pieces[1], pieces[2] if len(pieces) == 3 else ""
        if check_links and not button_url_ok(url=url):
            raise ValidationError(
                f"Line {number}: {escape(url)} is not a link Telegram accepts on a button "
                "(https://… or http://… with a host, or tg://…)."
            )
        if problem := button_text_problem(text=label):
            raise ValidationError(f"Line {number}: {problem}")
        if key and not KEY_RE.match(key):
            raise ValidationError(f"Line {number}: a click key uses a-z, 0-9, _ and - only (got {escape(key)!s}).")
        if key and not settings.PUBLIC_URL:
            raise ValidationError(f"Line {number}: tracking clicks needs PUBLIC_URL (the admin's public https address).")
        row.append(ButtonSpec(label, url, key))
    return row


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
