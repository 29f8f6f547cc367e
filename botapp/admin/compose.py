"""What every composed message's form checks (broadcasts, sequence steps): Telegram's limits."""

import re

from django import forms

from botapp.models.buttons import buttons_parse
from botapp.services.telegram_html import telegram_html_check
from botapp.telegram.limits import CAPTION_LENGTH, TEXT_LENGTH
from botapp.telegram.media import media_problem

# The bot settings' personal placeholders: a composed message (a broadcast, a sequence step) is sent
# as written, the same to everyone, so one of these would reach users as "{first_name}".
PERSONAL_PLACEHOLDER = re.compile(r"\{(first_name|last_name|username|mention)\}")


class ComposedMessageForm(forms.ModelForm):
    """For models with text, media_kind, media and buttons fields."""

    def clean_text(self):
        if problems := telegram_html_check(text=self.cleaned_data["text"]):
            raise forms.ValidationError(problems)  # every problem at once; Telegram would refuse the text
        if found := PERSONAL_PLACEHOLDER.findall(self.cleaned_data["text"]):
            raise forms.ValidationError(
                f"{{{found[0]}}} would reach users as written: this message is the same for everyone "
                "(only the welcome, /help, /about and /faq texts of Bot settings are filled in)."
            )
        return self.cleaned_data["text"]

    def clean_media(self):
        return (self.cleaned_data.get("media") or "").strip()

    def clean_buttons(self):
        buttons_parse(text=self.cleaned_data["buttons"])  # raises a form error naming every bad line
        return self.cleaned_data["buttons"]

    def clean(self):
        data = super().clean()
        if bool(data.get("media_kind")) != bool(data.get("media", "").strip()):
            raise forms.ValidationError("Choose a media kind and give its file id or URL, or neither.")
        if data.get("media_kind") and data.get("media") and (problem := media_problem(data["media"], kind=data["media_kind"])):
            self.add_error("media", problem)
        text = data.get("text", "")
        if data.get("media_kind") and len(text) > CAPTION_LENGTH:
            self.add_error("text", f"A caption is at most {CAPTION_LENGTH} characters (Telegram's limit with media).")
        if not data.get("media_kind") and len(text) > TEXT_LENGTH:
            self.add_error("text", f"A message is at most {TEXT_LENGTH} characters (Telegram's limit).")
        return data
