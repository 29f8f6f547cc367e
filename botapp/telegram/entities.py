"""A Telegram text and its entities as Telegram HTML, to send again with parse_mode HTML.

Courier re-sends what people wrote (a storage-channel caption under `{previouscaption}`, a channel
post broadcast to users) as HTML. kurigram's `Str.html` escapes only the text inside entities, so
a plain "Price < 5 & <notes>" came back as a tag Telegram drops and "<b>x" as bold. Here every
piece of text is escaped, attribute values are quoted, and entities that cross one another are
closed and reopened so the HTML stays well formed. Entity offsets are UTF-16 units, as Telegram
counts them. Entities Telegram finds again by itself (links, @mentions, #hashtags) are plain text.
"""

from __future__ import annotations

from html import escape

from pyrogram import enums

PLAIN = {
    enums.MessageEntityType.BOLD: "b",
    enums.MessageEntityType.ITALIC: "i",
    enums.MessageEntityType.UNDERLINE: "u",
    enums.MessageEntityType.STRIKETHROUGH: "s",
    enums.MessageEntityType.SPOILER: "tg-spoiler",
    enums.MessageEntityType.CODE: "code",
}


def _tags(entity) -> tuple[str, str] | None:
    """(opening, closing) HTML of one entity; None for one that is sent as plain text."""
    kind = entity.type
    if kind in PLAIN:
        return f"<{PLAIN[kind]}>", f"</{PLAIN[kind]}>"
    if kind == enums.MessageEntityType.PRE:
        language = getattr(entity, "language", "") or ""
        if language:
            return f'<pre><code class="language-{escape(language)}">', "</code></pre>"
        return "<pre>", "</pre>"
    if kind == enums.MessageEntityType.BLOCKQUOTE:
        return ("<blockquote expandable>" if getattr(entity, "expandable", False) else "<blockquote>"), "</blockquote>"
    if kind == enums.MessageEntityType.TEXT_LINK and entity.url:
        return f'<a href="{escape(entity.url)}">', "</a>"
    if kind == enums.MessageEntityType.TEXT_MENTION and getattr(entity, "user", None) is not None:
        return f'<a href="tg://user?id={int(entity.user.id)}">', "</a>"
    if kind == enums.MessageEntityType.CUSTOM_EMOJI and getattr(entity, "custom_emoji_id", None):
        return f'<tg-emoji emoji-id="{int(entity.custom_emoji_id)}">', "</tg-emoji>"
    return None


def entities_html(text: str | None, entities=None) -> str:
    """`text` with its `entities` (kurigram MessageEntity objects; a kurigram `Str` carries its
    own) as well-formed Telegram HTML in which every character of the text survives as written."""
    if not text:
        return ""
    if entities is None:
        entities = getattr(text, "entities", None) or []
    units = str(text).encode("utf-16-le", "surrogatepass")
    size = len(units) // 2
    spans = []  # (start, end, opening, closing), in UTF-16 units
    for entity in entities:
        tags = _tags(entity)
        start, end = max(0, entity.offset), min(size, entity.offset + entity.length)
        if tags is not None and start < end:
            spans.append((start, end, *tags))
    bounds = sorted({0, size, *(s[0] for s in spans), *(s[1] for s in spans)})
    out: list[str] = []
    stack: list[tuple] = []
    for n, at in enumerate(bounds):
        ending = [i for i, span in enumerate(stack) if span[1] <= at]
        if ending:  # close down to the first span that ends here; reopen the ones that go on
            reopened = stack[ending[0] :]
            del stack[ending[0] :]
            out.extend(span[3] for span in reversed(reopened))
            for span in reopened:
                if span[1] > at:
                    out.append(span[2])
                    stack.append(span)
        for span in sorted((s for s in spans if s[0] == at), key=lambda s: -s[1]):  # outer first
            out.append(span[2])
            stack.append(span)
        if n + 1 < len(bounds):
            piece = units[at * 2 : bounds[n + 1] * 2].decode("utf-16-le", "surrogatepass")
            out.append(escape(piece, quote=False))
    return "".join(out)
