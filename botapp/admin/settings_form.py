"""The Bot settings form's checks of delivery fields (kept apart from the page's layout)."""

from django import forms

from botapp.models import BotSettings
from botapp.services.captions import caption_template_problems


class BotSettingsForm(forms.ModelForm):
    class Meta:
        model = BotSettings
        fields = ("file_caption",)  # the admin adds the rest of its fieldsets

    def clean_file_caption(self):
        template = self.cleaned_data.get("file_caption") or ""
        problems = caption_template_problems(template=template)
        if problems:
            raise forms.ValidationError(problems)
        return template
