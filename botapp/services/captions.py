"""Caption templates for delivered files (Bot settings → file caption).

A template is Telegram HTML with placeholders: `{filename}`, `{filesize}` (human units),
`{previouscaption}` (the stored message's own caption, with its formatting), `{mention}`,
`{first_name}` (and `{last_name}`, `{username}`) of the user receiving the file.

Telegram refuses a caption longer than CAPTION_LENGTH characters after its HTML is parsed. So:
- the settings form refuses a template that cannot fit when every bounded placeholder takes its
  longest value (`caption_template_problems`);
- `{previouscaption}` (itself up to the whole limit) gets the room the rest leaves, and is cut to it;
- whatever still does not fit (a template saved before this check) is cut as a whole.
Cutting keeps the HTML well formed: text is cut at a character, tags still open are closed, and
"…" marks the cut.
"""

from __future__ import annotations

import html
import string
from html.parser import HTMLParser

from botapp.services.telegram_html import telegram_html_length
from botapp.services.texts import text_render
from botapp.telegram.gateway import CopySource, TgUser
from botapp.telegram.limits import CAPTION_LENGTH, utf16_length

ELLIPSIS = "…"
PLACEHOLDERS = ("filename", "filesize", "previouscaption", "mention", "first_name", "last_name", "username")

# The longest value each bounded placeholder can take, as visible characters. Telegram's own
# limits for names (64, usernames 32); a file name of 255 (the common file-system limit: inferred,
# Telegram documents none); the longest `filesize_human` answer.
LONGEST = {
    "filename": "F" * 255,
    "filesize": "1023.9 MB",
    "first_name": "N" * 64,
    "last_name": "L" * 64,
    "username": "u" * 32,
}


def filesize_human(*, size: int) -> str:
    """Bytes as people read them: "512 B", "1 KB", "2.5 MB", "1.4 GB" (powers of 1024)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            break
        value /= 1024
    if unit == "B":
        return f"{int(value)} B"
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {unit}"


def visible_length(*, text: str) -> int:
    """Characters Telegram counts in this HTML once parsed (UTF-16 units, as Telegram measures)."""
    return telegram_html_length(text=text)


def caption_cut(*, text: str, limit: int = CAPTION_LENGTH) -> str:
    """`text` (Telegram HTML) shortened to at most `limit` visible characters, still well formed:
    text is cut at a character, an ellipsis marks the cut, open tags are closed. Unchanged if it fits."""
    if visible_length(text=text) <= limit:
        return text
    return _Cutter(limit - utf16_length(ELLIPSIS)).cut(text)


def caption_render(*, template: str, source: CopySource, tg: TgUser | None) -> str | None:
    """The caption one delivered message gets, within Telegram's limit; None (keep the message's own
    caption) for a message without media or an empty template."""
    if not template.strip() or not source.kind:
        return None
    fields = {
        "filename": html.escape(source.file_name),
        "filesize": filesize_human(size=source.file_size) if source.file_size else "",
    }
    rest = text_render(template=template, tg=tg, previouscaption="", **fields)
    previous = source.caption
    if "{previouscaption}" in template and previous:
        room = max(0, CAPTION_LENGTH - visible_length(text=rest))
        previous = caption_cut(text=previous, limit=room) if room else ""
    return caption_cut(text=text_render(template=template, tg=tg, previouscaption=previous, **fields))


def caption_template_problems(*, template: str) -> list[str]:
    """Why a caption template cannot be saved, for the settings form: a placeholder that does not
    exist, a stray brace, or a template too long for Telegram's caption limit when every
    placeholder but {previouscaption} takes its longest value. Empty: it is fine."""
    if not template.strip():
        return []
    try:
        fields = [
            (name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template) if name is not None
        ]
    except ValueError as exc:
        return [f"The template has a stray brace ({exc}); write {{{{ or }}}} for a literal brace."]
    for name, spec, conversion in fields:
        if spec or conversion:
            written = f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            return [f"{written}: a placeholder takes no conversion or format; write {{{name}}}."]
    names = {name for name, _, _ in fields}
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        return [f"Unknown placeholder {{{unknown[0]}}}: use " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + "."]
    longest = TgUser(id=1, first_name=LONGEST["first_name"], last_name=LONGEST["last_name"], username=LONGEST["username"])
    text = text_render(
        template=template, tg=longest, previouscaption="", filename=LONGEST["filename"], filesize=LONGEST["filesize"]
    )
    length = visible_length(text=text)
    if length > CAPTION_LENGTH:
        return [
            f"With the longest values (a 255-character file name, 64-character names) this caption has {length} "
            f"characters; Telegram allows {CAPTION_LENGTH}. Shorten it by {length - CAPTION_LENGTH}."
        ]
    return []


class _Cutter(HTMLParser):
    """Walks Telegram HTML, copying it until `budget` visible characters are spent."""

    def __init__(self, budget: int):
        super().__init__(convert_charrefs=True)
        self.budget = budget
        self.out: list[str] = []
        self.open: list[str] = []
        self.done = False

    def cut(self, text: str) -> str:
        self.feed(text)
        self.close()
        if not self.done:
            return "".join(self.out)
        return "".join(self.out) + ELLIPSIS + "".join(f"</{tag}>" for tag in reversed(self.open))

    def handle_starttag(self, tag, attrs):
        if not self.done:
            self.out.append(self.get_starttag_text())
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        if not self.done:
            self.out.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        if self.done or tag not in self.open:
            return
        while self.open:  # close what was left open inside it, as a browser would
            inner = self.open.pop()
            self.out.append(f"</{inner}>")
            if inner == tag:
                break

    def handle_data(self, data):
        if self.done or self.budget < 0:
            return
        kept = []
        for char in data:
            size = utf16_length(char)
            if size > self.budget:
                self.done = True
                break
            self.budget -= size
            kept.append(char)
        self.out.append(html.escape("".join(kept), quote=False))
