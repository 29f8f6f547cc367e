"""Show Telegram HTML in the admin as users will see it, safely: everything is escaped, then only
the tags Telegram itself understands are turned back on (links only to http(s))."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

SIMPLE = re.compile(r"&lt;(/?)(b|strong|i|em|u|ins|s|strike|del|code|pre|blockquote|tg-spoiler)&gt;")
LINK_OPEN = re.compile(r"&lt;a href=&quot;(https?://[^&\s]+)&quot;&gt;")
LINK_CLOSE = re.compile(r"&lt;/a&gt;")


def _tag(match: re.Match) -> str:
    closing, name = match[1], match[2]
    if name == "tg-spoiler":  # no such tag in a browser: a blurred span stands in
        return "</span>" if closing else '<span style="filter: blur(3px)">'
    return f"<{closing}{name}>"


@register.filter
def telegram_html(text: str) -> str:
    html = escape(text)
    html = SIMPLE.sub(_tag, html)
    html = LINK_OPEN.sub(r'<a href="\1" target="_blank" rel="noopener">', html)
    html = LINK_CLOSE.sub("</a>", html)
    return mark_safe(html)  # noqa: S308 - built from escaped text, only known tags restored
