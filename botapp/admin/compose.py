"""What every composed message's form checks (broadcasts, sequence steps): Telegram's limits, with
the checks every other entry point makes (botapp/services/composed.py). A message can instead be a
post of the posts channel (`post_id`): read through Telegram to check that it exists, its text and
media then come from the post."""

from django import forms
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string

from botapp.config import ConfigError, bot_config_load
from botapp.models import BotSettings
from botapp.models.buttons import button_specs, buttons_parse
from botapp.services.composed import composed_text_problems, text_length_problem
from botapp.services.posts import post_preview, post_read_checked
from botapp.telegram.console import console_gateway
from botapp.telegram.gateway import BotUnauthorized
from botapp.telegram.media import media_problem


def post_check(*, post_id: int, channel_id: int | None = None) -> int:
    """The posts channel's id (Bot settings', unless `channel_id` is given) when its post `post_id`
    can be copied; raises a ValidationError that says what to do otherwise (no posts channel, no
    such post, the bot cannot read the channel or reach Telegram at all)."""
    channel_id = channel_id if channel_id is not None else BotSettings.load().posts_channel_id
    if channel_id is None:
        raise ValidationError("Set the posts channel in Bot settings first: a post is named by its message id there.")
    try:
        gateway = console_gateway(config_load=bot_config_load)
    except (ConfigError, BotUnauthorized) as exc:
        raise ValidationError(f"The console cannot reach Telegram to read the post: {exc}") from None
    post_read_checked(gateway=gateway, chat_id=channel_id, message_id=post_id)
    return channel_id


def post_preview_html(*, chat_id: int | None, message_id: int | None) -> str:
    """The console's view of a chosen post, read through Telegram: its media and its text as users
    see them, or why it cannot be shown."""
    if not message_id:
        return "—"
    try:
        gateway = console_gateway(config_load=bot_config_load)
    except (ConfigError, BotUnauthorized) as exc:
        preview = {"error": f"The console cannot reach Telegram: {exc}"}
    else:
        preview = post_preview(gateway=gateway, chat_id=chat_id, message_id=message_id)
    return render_to_string("admin/botapp/post_preview.html", {"p": preview, "message_id": message_id})


class ComposedMessageForm(forms.ModelForm):
    """For models with text, media_kind, media and buttons fields, and a `post_id` field (the
    model's, or the form's own)."""

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
        data = super().clean()
        self.post_chat_id = None
        if data.get("post_id"):
            return self._clean_post(data)
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

    def _clean_post(self, data):
        if (data.get("text") or "").strip() or data.get("media_kind") or data.get("media"):
            self.add_error("post_id", "The post is the message (its text, media and formatting): leave text and media empty.")
            return data
        try:
            self.post_chat_id = post_check(post_id=data["post_id"])
        except ValidationError as exc:
            self.add_error("post_id", exc)
        return data
