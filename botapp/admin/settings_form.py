"""The Bot settings form's checks of delivery fields (kept apart from the page's layout)."""

from django import forms

from botapp.config import storage_channel_load
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

    def clean_backup_channel_id(self):
        channel_id = self.cleaned_data.get("backup_channel_id")
        if channel_id is not None and channel_id > -1_000_000_000_000:
            raise forms.ValidationError("A channel id looks like -1001234567890 (forward a post to @userinfobot to read it).")
        storage = storage_channel_load()
        if channel_id is not None and channel_id == storage:
            raise forms.ValidationError("That is the storage channel itself: the backup needs a second channel.")
        return channel_id
