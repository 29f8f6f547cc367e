"""The Bot settings form: texts are checked before they reach users (only the placeholders the bot
fills, well-formed braces, Telegram HTML that Telegram accepts, a caption template that fits), the
backup channel is a channel other than the storage one, and the shortener key is never shown again
once saved. The admin page and the sandbox's `set` use this one form."""

import string
from urllib.parse import urlsplit

from django import forms
from django.core.exceptions import ValidationError
from unfold.widgets import UnfoldAdminPasswordWidget

from botapp.admin.compose import post_check
from botapp.config import storage_channel_load
from botapp.models import BotSettings, ForceSubChannel
from botapp.models.buttons import button_specs, button_text_problem, buttons_parse
from botapp.models.settings import retired_commands_parse
from botapp.services.captions import LONGEST, caption_template_problems
from botapp.services.composed import text_length_problem
from botapp.services.telegram_html import telegram_html_check
from botapp.services.texts import text_render
from botapp.telegram.gateway import TgUser

# The placeholders text_render fills for the user who wrote (botapp/services/texts.py).
USER_PLACEHOLDERS = ("first_name", "last_name", "username", "mention", "id", "user_id", "chat_id")
# Texts sent to one user, with those placeholders; the rest are sent as written.
PERSONAL_TEXTS = ("welcome_text", "welcome_back_text", "help_text", "about_text", "faq_text", "allow_list_text")
PLAIN_TEXTS = ("deleted_notice_text", "file_caption", "premium_text")  # file_caption: its own placeholders, checked below
# The user the texts' lengths are checked for: every placeholder at its longest (Telegram's limits).
LONGEST_USER = TgUser(
    id=2**52 - 1, first_name=LONGEST["first_name"], last_name=LONGEST["last_name"], username=LONGEST["username"]
)
PLACEHOLDER_HINT = (
    "Placeholders: {first_name}, {last_name}, {username}, {mention} (a link to the user), {id} (their Telegram id), "
    "{user_id} (their subscriber id, else {id}). Telegram HTML allowed."
)


def placeholder_problems(text: str, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with the {placeholders} of `text` (each problem once)."""
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        return [f"Braces do not match ({exc}); write {{{{ and }}}} for a literal brace."]
    names = [name for name, _, _ in fields]
    problems = [
        f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}: a placeholder takes no "
        f"conversion or format; write {{{name}}}."
        for name, spec, conversion in dict.fromkeys(fields)
        if spec or conversion
    ]
    for name in dict.fromkeys(names):
        if name not in allowed:
            known = ", ".join(f"{{{a}}}" for a in allowed) if allowed else "none here: this text is sent as written"
            problems.append(f"{{{name}}} is not a placeholder the bot fills (it fills {known}).")
    return problems


class BotSettingsForm(forms.ModelForm):
    shortener_api_key = forms.CharField(
        label="Shortener API key",
        required=False,
        widget=UnfoldAdminPasswordWidget(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Never shown once saved. Leave empty to keep the current key; type a single - to remove it.",
    )

    verify_second_shortener_key = forms.CharField(
        label="Second verification's shortener API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Never shown once saved. Leave empty to keep it; a single - removes it.",
    )
    verify_third_shortener_key = forms.CharField(
        label="Third verification's shortener API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Never shown once saved. Leave empty to keep it; a single - removes it.",
    )

    class Meta:
        model = BotSettings
        fields = ("shortener_api_key",)  # the admin adds the fieldsets' fields

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in PERSONAL_TEXTS:
            if name in self.fields:
                self.fields[name].help_text = PLACEHOLDER_HINT
        if "faq_text" in self.fields:
            self.fields["faq_text"].label = "FAQ text"  # the model's name would read "Faq text"
        if self.instance.shortener_api_key and "shortener_api_key" in self.fields:
            self.fields["shortener_api_key"].widget.attrs["placeholder"] = "•••••••• (set)"

    def clean_shortener_api_url(self):
        return self._shortener_url("shortener_api_url")

    def _shortener_url(self, name: str) -> str:
        url = (self.cleaned_data.get(name) or "").strip()
        if url and url.lower() != "none":
            parts = urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.netloc:
                raise forms.ValidationError(
                    'Give the shortener\'s API address, like https://shortener.example/api (or leave it empty, or "none", for direct links).'
                )
        return url

    def _secret(self, name: str) -> str:
        """A key typed in a password field: kept when left empty, removed by a single -."""
        typed = (self.cleaned_data.get(name) or "").strip()
        if typed == "-":
            return ""
        return typed or getattr(self.instance, name)

    def clean_shortener_api_key(self):
        return self._secret("shortener_api_key")

    def clean_verify_second_shortener_key(self):
        return self._secret("verify_second_shortener_key")

    def clean_verify_third_shortener_key(self):
        return self._secret("verify_third_shortener_key")

    def clean_verify_second_shortener_url(self):
        return self._shortener_url("verify_second_shortener_url")

    def clean_verify_third_shortener_url(self):
        return self._shortener_url("verify_third_shortener_url")

    def clean(self):
        data = super().clean()
        for name in (*PERSONAL_TEXTS, *PLAIN_TEXTS):
            if name not in self.fields or not data.get(name):
                continue
            allowed = USER_PLACEHOLDERS if name in PERSONAL_TEXTS else ()
            # The notice is sent as written (braces are plain text); the caption's placeholders are
            # checked by clean_file_caption.
            problems = placeholder_problems(data[name], allowed) if name in PERSONAL_TEXTS else []
            problems += telegram_html_check(text=data[name])
            if not problems and name != "file_caption":
                # Counted as Telegram counts (UTF-16, HTML parsed), every placeholder at its longest.
                longest = text_render(template=data[name], tg=LONGEST_USER) if name in PERSONAL_TEXTS else data[name]
                if problem := text_length_problem(text=longest):
                    problems.append(problem + (" (with 64-character names)" if longest != data[name] else ""))
            for problem in problems:
                self.add_error(name, problem)
        self._clean_welcome_post(data)
        window = ("send_window_start", "send_window_end")
        if all(name in self.fields for name in window) and (data.get(window[0]) is None) != (data.get(window[1]) is None):
            if not any(name in self.errors for name in window):
                self.add_error(
                    "send_window_end", "Give both times of the send window (when it opens and when it closes), or neither."
                )
        return data

    def _post_clean(self):
        super()._post_clean()
        # The key is never shown back (PasswordInput): when something else stops the save, say
        # that the key typed was not kept, or the operator would think it saved.
        typed = (self.data.get("shortener_api_key") or "").strip()
        if self.errors and typed and typed != "-" and "shortener_api_key" not in self.errors:
            self.add_error("shortener_api_key", "Not saved, with the rest (see the errors): type the key again.")

    def clean_premium_button_text(self):
        text = self.cleaned_data.get("premium_button_text") or ""
        if problem := button_text_problem(text=text):
            raise forms.ValidationError(problem[0].upper() + problem[1:])
        return text

    def clean_retired_commands(self):
        text = self.cleaned_data.get("retired_commands") or ""
        try:
            notes = retired_commands_parse(text=text)  # the model's validator has said what is wrong, if anything
        except ValueError:
            return text
        problems = []
        for command, note in notes.items():  # each note is a message of its own, sent as written
            for problem in [*telegram_html_check(text=note), *filter(None, [text_length_problem(text=note)])]:
                problems.append(f"/{command}: {problem}")
        if problems:
            raise forms.ValidationError(problems)
        return text

    def clean_file_caption(self):
        template = self.cleaned_data.get("file_caption") or ""
        problems = caption_template_problems(template=template)
        if problems:
            raise forms.ValidationError(problems)
        return template

    def clean_welcome_buttons(self):
        text = self.cleaned_data.get("welcome_buttons") or ""
        try:
            rows = buttons_parse(text=text)
        except ValidationError:
            return text  # the model's validator says what is wrong
        problems = [  # a tap's reply is a message of its own
            f"{spec.text}: reply: {problem}"
            for spec in button_specs(rows=rows)
            if spec.reply
            for problem in [*telegram_html_check(text=spec.reply), *filter(None, [text_length_problem(text=spec.reply)])]
        ]
        if problems:
            raise forms.ValidationError(problems)
        return text

    def _clean_welcome_post(self, data) -> None:
        """A welcome post must be there in the posts channel (read through Telegram) when saved."""
        if "welcome_post_id" not in self.fields or not data.get("welcome_post_id"):
            return
        if "posts_channel_id" in self.errors:
            return
        changed = {"welcome_post_id", "posts_channel_id"} & set(self.changed_data)
        if not changed:
            return  # checked when it was chosen; the bot falls back to the welcome text if it is gone
        channel_id = data.get("posts_channel_id") if "posts_channel_id" in self.fields else self.instance.posts_channel_id
        if channel_id is None:
            self.add_error("welcome_post_id", "Set the posts channel too: the welcome post is named by its message id there.")
            return
        try:
            post_check(post_id=data["welcome_post_id"], channel_id=channel_id)
        except ValidationError as exc:
            self.add_error("welcome_post_id", exc)

    def clean_backup_channel_id(self):
        channel_id = self.cleaned_data.get("backup_channel_id")
        storage = storage_channel_load()
        if channel_id is not None and channel_id == storage:
            raise forms.ValidationError("That is the storage channel itself: the backup needs a second channel.")
        if channel_id is not None and ForceSubChannel.objects.filter(chat_id=channel_id).exists():
            raise forms.ValidationError(
                "That is a force-subscribe channel: users join it, and would see every stored file there."
            )
        return channel_id
