"""Show Telegram HTML in the admin as users will see it, safely (botapp/services/telegram_html.py):
everything is escaped, only the tags Telegram understands are turned back on, and every tag is
closed, so nothing in a message can style the console around it."""

from django import template
from django.utils.safestring import mark_safe

from botapp.services.telegram_html import telegram_html_preview

register = template.Library()


@register.filter
def telegram_html(text: str) -> str:
    return mark_safe(telegram_html_preview(text=text))  # noqa: S308 - escaped text, known tags only, all closed
