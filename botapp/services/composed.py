"""What a message composed once and sent the same to many users must be, whichever way it comes
in: the admin's forms (broadcasts, sequence steps), the HTTP API (broadcasts, scheduled messages)
and the sandbox. One check per kind of content, so that no entry point is looser than another:

- its Telegram HTML is what Telegram accepts (a text it refuses would fail every recipient's send,
  and a tag it does not know, such as <script>, would vanish in front of users);
- it names none of the personal placeholders ({first_name}, ...): they are filled only in the Bot
  settings' texts, so here one would reach users as written;
- it fits Telegram's limit for a text, or for a caption when it goes with one attachment, counted
  as Telegram counts: UTF-16 units of the text once its HTML is parsed.
"""

from __future__ import annotations

import re

from botapp.services.telegram_html import telegram_html_check, telegram_html_length
from botapp.telegram.limits import CAPTION_LENGTH, TEXT_LENGTH

PERSONAL_PLACEHOLDER = re.compile(r"\{(first_name|last_name|username|mention)\}")


def composed_text_problems(*, text: str, caption: bool = False) -> list[str]:
    """Every reason `text` (Telegram HTML, the same for every recipient) cannot be sent: HTML
    Telegram refuses, a personal placeholder, over TEXT_LENGTH (CAPTION_LENGTH when `caption`).
    One sentence each; [] when it can go."""
    problems = telegram_html_check(text=text)
    if found := PERSONAL_PLACEHOLDER.findall(text):
        problems.append(
            f"{{{found[0]}}} would reach users as written: this message is the same for everyone "
            "(only the welcome, /help, /about and /faq texts of Bot settings are filled in)."
        )
    if problem := text_length_problem(text=text, caption=caption):
        problems.append(problem)
    return problems


def text_length_problem(*, text: str, caption: bool = False) -> str:
    """Why `text` (Telegram HTML) is too long for Telegram as a message (as a caption when
    `caption`), counted as Telegram counts; "" when it fits."""
    limit = CAPTION_LENGTH if caption else TEXT_LENGTH
    length = telegram_html_length(text=text)
    if length <= limit:
        return ""
    what = "A caption (a text sent with one attachment)" if caption else "A message"
    return (
        f"{what} is at most {limit} characters as Telegram counts them (an emoji counts 2); "
        f"this one has {length}: shorten it by {length - limit}."
    )
