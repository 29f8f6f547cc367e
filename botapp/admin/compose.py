"""What every composed message's form checks (broadcasts, sequence steps): Telegram's limits, with
the checks every other entry point makes (botapp/services/composed.py)."""

from django import forms

from botapp.models.buttons import buttons_parse
from botapp.services.composed import composed_text_problems, text_length_problem
from botapp.telegram.media import media_problem


class ComposedMessageForm(forms.ModelForm):
    """For models with text, media_kind, media and buttons fields."""

    def clean_text(self):
        # Every problem at once (the length as a message here; as a caption in clean, with media).
        if problems := composed_text_problems(text=self.cleaned_data["text"]):
            raise forms.ValidationError(problems)
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
        if data.get("media_kind") and "text" not in self.errors and (problem := text_length_problem(text=text, caption=True)):
            self.add_error("text", problem)
        return data
