"""What a message composed once and sent the same to many users must be, whichever way it comes
in: the admin's forms (broadcasts, sequence steps), the HTTP API (broadcasts, scheduled messages)
and the sandbox. One check per kind of content, so that no entry point is looser than another:

- its Telegram HTML is what Telegram accepts (a text it refuses would fail every recipient's send,
  and a tag it does not know, such as <script>, would vanish in front of users);
- it names none of the personal placeholders ({first_name}, ...): they are filled only in the Bot
  settings' texts, so here one would reach users as written;
- it fits Telegram's limit for a text, or for a caption when it goes with one attachment, counted
  as Telegram counts: UTF-16 units of the text once its HTML is parsed.

`ComposedMessageForm` applies them to a model's text, media and buttons: the base of the
console's forms and of the API's broadcast check, so both say the same thing.
"""

from __future__ import annotations

import re

from django import forms

from botapp.models.buttons import button_specs, buttons_parse
from botapp.services.telegram_html import telegram_html_check, telegram_html_length
from botapp.telegram.limits import CAPTION_LENGTH, TEXT_LENGTH
from botapp.telegram.media import media_problem

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


class ComposedMessageForm(forms.ModelForm):
    """For models with text, media_kind, media and buttons fields: every check above, each problem
    on its field. `clean_composed` is the whole message's check (a subclass may take another
    way first: the console's posts, botapp/admin/compose.py)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "text" in self.fields:
            self.fields["text"].required = False  # a post needs none; clean says when one is missing

    def clean_text(self):
        # Every problem at once (the length as a message here; as a caption in clean, with media).
        if problems := composed_text_problems(text=self.cleaned_data["text"]):
            raise forms.ValidationError(problems)
        return self.cleaned_data["text"]

    def clean_media(self):
        return (self.cleaned_data.get("media") or "").strip()

    def clean_buttons(self):
        rows = buttons_parse(text=self.cleaned_data["buttons"])  # raises a form error naming every bad line
        problems = [  # a tap's reply is a message of its own
            f"{spec.text}: reply: {problem}"
            for spec in button_specs(rows=rows)
            if spec.reply
            for problem in composed_text_problems(text=spec.reply)
        ]
        if problems:
            raise forms.ValidationError(problems)
        return self.cleaned_data["buttons"]

    def clean(self):
        return self.clean_composed(super().clean())

    def clean_composed(self, data):
        if bool(data.get("media_kind")) != bool(data.get("media", "").strip()):
            raise forms.ValidationError("Choose a media kind and give its file id or URL, or neither.")
        if data.get("media_kind") and data.get("media") and (problem := media_problem(data["media"], kind=data["media_kind"])):
            self.add_error("media", problem)
        text = data.get("text", "")
        if "text" in self.fields and "text" not in self.errors and not text.strip():
            self.add_error("text", "Give the message's text, or the number of a post of the posts channel.")
        if data.get("media_kind") and "text" not in self.errors and (problem := text_length_problem(text=text, caption=True)):
            self.add_error("text", problem)
        return data
