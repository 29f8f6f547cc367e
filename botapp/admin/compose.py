"""What every composed message's form checks (broadcasts, sequence steps): Telegram's limits, with
the checks every other entry point makes (botapp/services/composed.py, whose form this extends). A
message can instead be a post of the posts channel (`post_id`): read through Telegram to check that
it exists, its text and media then come from the post."""

from django.core.exceptions import ValidationError
from django.template.loader import render_to_string

from botapp.config import ConfigError, bot_config_load
from botapp.models import BotSettings
from botapp.models.buttons import buttons_parse
from botapp.services import composed
from botapp.services.posts import post_preview, post_read_checked
from botapp.telegram.console import console_gateway
from botapp.telegram.gateway import BotUnauthorized


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


def message_preview_html(*, message) -> str:
    """A composed message (a broadcast, a sequence step: text, media, buttons) as users will see
    it, with what is wrong with its buttons, if anything."""
    try:
        rows = buttons_parse(text=message.buttons)
    except ValidationError as exc:
        rows, error = [], "; ".join(exc.messages)
    else:
        error = ""
    return render_to_string("admin/botapp/broadcast_preview.html", {"b": message, "rows": rows, "error": error})


class ComposedMessageForm(composed.ComposedMessageForm):
    """The services' composed message (botapp/services/composed.py), or a post of the posts
    channel (`post_id`: the model's field, or the form's own). The text field carries the composer
    (botapp/static/courier/composer.js): a formatting toolbar and a live preview."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "text" in self.fields:
            self.fields["text"].widget.attrs["data-composer"] = "telegram-html"

    def clean_composed(self, data):
        self.post_chat_id = None
        if data.get("post_id"):
            return self._clean_post(data)
        return super().clean_composed(data)

    def _clean_post(self, data):
        if (data.get("text") or "").strip() or data.get("media_kind") or data.get("media"):
            self.add_error("post_id", "The post is the message (its text, media and formatting): leave text and media empty.")
            return data
        try:
            self.post_chat_id = post_check(post_id=data["post_id"])
        except ValidationError as exc:
            self.add_error("post_id", exc)
        return data
