"""Telegram's HTML (parse_mode HTML, https://core.telegram.org/bots/api#html-style): checking what
an operator wrote before it is saved, and showing it in the console as users will see it.

Telegram accepts only these tags, each closed in order: b/strong, i/em, u/ins, s/strike/del,
span class="tg-spoiler", tg-spoiler, a href, tg-emoji emoji-id, code, pre, blockquote (optionally
expandable). Attribute values may use either quote style. A text that breaks these rules is refused
by Telegram ("can't parse entities"), so every user's send would fail: the form refuses it first.
"""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser

from botapp.telegram.limits import utf16_length

# tag -> attributes it may carry
TAGS = {
    "b": set(),
    "strong": set(),
    "i": set(),
    "em": set(),
    "u": set(),
    "ins": set(),
    "s": set(),
    "strike": set(),
    "del": set(),
    "span": {"class"},
    "tg-spoiler": set(),
    "a": {"href"},
    "tg-emoji": {"emoji-id"},
    "code": {"class"},
    "pre": set(),
    "blockquote": {"expandable"},
}
LINK_SCHEMES = ("http://", "https://", "tg://")
# In the preview: the tag a browser shows for each (a spoiler is blurred, an emoji is its fallback text).
PREVIEW = {"tg-spoiler": "span", "span": "span", "tg-emoji": "span", "strike": "s", "ins": "u"}
SPOILER_STYLE = ' style="filter: blur(3px)"'


class _Reader(HTMLParser):
    """Reads the text once: the problems it has, and a safe preview in which only known tags are
    open, every one of them is closed, and all text is escaped."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.open: list[str] = []
        self.out: list[str] = []
        self.length = 0  # UTF-16 units of the text users see (tags gone, entities decoded)

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        if tag not in TAGS:
            self.problems.append(f"Line {line}: <{tag}> is not a tag Telegram supports.")
            self.out.append(escape(self.get_starttag_text() or ""))
            return
        names = {name for name, _ in attrs}
        if extra := names - TAGS[tag]:
            self.problems.append(f"Line {line}: <{tag}> cannot have {', '.join(sorted(extra))}.")
        values = dict(attrs)
        if tag == "span" and values.get("class") != "tg-spoiler":
            self.problems.append(f'Line {line}: a <span> must be class="tg-spoiler".')
        href = (values.get("href") or "").strip()
        if tag == "a" and not href.startswith(LINK_SCHEMES):
            self.problems.append(f"Line {line}: a link needs href with http://, https:// or tg:// (got {href or 'none'!r}).")
        self.open.append(tag)
        self.out.append(self._preview_open(tag, href, values))

    def handle_endtag(self, tag):
        line = self.getpos()[0]
        if tag not in TAGS:
            self.problems.append(f"Line {line}: </{tag}> is not a tag Telegram supports.")
            self.out.append(escape(f"</{tag}>"))
            return
        if not self.open or self.open[-1] != tag:
            expected = f"</{self.open[-1]}> first" if self.open else "no tag is open"
            self.problems.append(f"Line {line}: </{tag}> does not close the last open tag ({expected}).")
            if tag in self.open:  # close up to it, so the preview stays balanced
                while self.open[-1] != tag:
                    inner = self.open.pop()
                    self.out.append(f"</{PREVIEW.get(inner, inner)}>")
            else:
                return
        self.open.pop()
        self.out.append(f"</{PREVIEW.get(tag, tag)}>")

    def handle_data(self, data):
        self.length += utf16_length(data)
        self.out.append(escape(data))

    def close(self):
        super().close()
        for tag in reversed(self.open):
            self.problems.append(f"<{tag}> is never closed.")
            self.out.append(f"</{PREVIEW.get(tag, tag)}>")
        self.open = []

    @staticmethod
    def _preview_open(tag, href, values):
        if tag == "a":
            if href.startswith(("http://", "https://")):
                return f'<a href="{escape(href)}" target="_blank" rel="noopener">'
            # tg:// (a mention, a username): no page to open in a browser, shown as a link all the same
            return f'<a title="{escape(href)}" style="text-decoration: underline">'
        if tag in ("tg-spoiler", "span"):
            return f"<span{SPOILER_STYLE}>"
        return f"<{PREVIEW.get(tag, tag)}>"


def _read(text: str) -> _Reader:
    reader = _Reader()
    reader.feed(text or "")
    reader.close()
    return reader


def telegram_html_check(*, text: str) -> list[str]:
    """Every problem that would make Telegram refuse `text` as HTML (unknown tags or attributes,
    tags not closed or closed out of order, links without a usable href), one sentence each; []
    when Telegram accepts it."""
    return _read(text).problems


def telegram_html_preview(*, text: str) -> str:
    """`text` as HTML for the console's preview: all text escaped, only Telegram's tags kept (as
    their browser equivalents), each closed, so nothing the operator wrote can style the page
    around it. Not marked safe: the caller marks it."""
    return "".join(_read(text).out)


def telegram_html_length(*, text: str) -> int:
    """How long Telegram counts `text` (Telegram HTML) against its limits: the UTF-16 code units
    of what users see once the HTML is parsed (tags gone, `&lt;` one character)."""
    return _read(text).length
