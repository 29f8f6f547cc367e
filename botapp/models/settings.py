"""The bot's behaviour, edited in the admin."""

import logging
import re
import zoneinfo

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction

from botapp.cache import HotValue
from botapp.models.buttons import button_text_problem, button_url_ok, buttons_parse
from botapp.models.files import STREAM_LIFETIME_HOURS_MAX, TELEGRAM_DELETE_WINDOW_MINUTES
from botapp.models.ranges import (
    BYPASS_SECONDS_MAX,
    DAILY_TOKEN_LIMIT_MAX,
    TOKEN_TTL_MINUTES_MAX,
    VERIFICATION_HOURS_MAX,
    channel_id_validate,
)
from botapp.telegram.limits import MESSAGE_ID_MAX

log = logging.getLogger(__name__)

CACHE_KEY = "botsettings"
FAIR_USE_PER_MINUTE_MAX = 600
FAIR_USE_PER_DAY_MAX = 100_000
ALLOW_LIST_TEXT = "This bot is private: it answers only the people its owner has allowed."
AGAIN_BUTTON_TEXT = "♻️ Get files again"
REFERRALS_NEEDED_MAX = 10_000


def one_button_validate(value: str) -> None:
    """A channel-post button: empty, or one `Text | https://…` (the admin shows what is wrong)."""
    rows = buttons_parse(text=value)
    if len(rows) > 1 or any(len(row) > 1 for row in rows):
        raise ValidationError('One button: "Text | https://example.com".')


def buttons_validate(value: str) -> None:
    buttons_parse(text=value)  # a ValidationError naming every bad line


def marker_validate(value: str) -> None:
    """A channel-post marker is one word a post starts with."""
    if not value.strip() or any(ch.isspace() for ch in value.strip()):
        raise ValidationError("The marker is one word a post starts with, e.g. /chat.")


# A retired command: what an operator's bot used to answer, e.g. "/send | /send is retired: …".
RETIRED_COMMAND_RE = re.compile(r"\A/([A-Za-z0-9_]{1,32})\Z")  # Telegram's bot commands: 1-32 of a-z, 0-9, _


def retired_commands_parse(*, text: str) -> dict[str, str]:
    """`/command | note` per line -> {command (lower case, no slash): note}. Empty lines are left
    out; a line that is not of that shape raises ValueError naming it."""
    notes = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        command, bar, note = (part.strip() for part in line.partition("|"))
        match = RETIRED_COMMAND_RE.match(command)
        if not bar or match is None or not note:
            raise ValueError(f'Line {number}: write "/command | the note it answers with" (e.g. "/send | /send is retired").')
        notes[match[1].lower()] = note
    return notes


def retired_commands_validate(value: str) -> None:
    try:
        retired_commands_parse(text=value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def time_zone_validate(value: str) -> None:
    """An IANA time zone name (Europe/Berlin, America/New_York, UTC), as zoneinfo knows it."""
    if not value:
        return
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"{value} is not a time zone name: write one like Europe/Berlin, America/New_York or UTC."
        ) from None


def button_url_validate(value: str) -> None:
    if value and not button_url_ok(url=value):
        raise ValidationError("Give a link Telegram accepts on a button: https://t.me/yourchannel (or http(s)://…, tg://…).")


def button_label_validate(value: str) -> None:
    """A button's text: not empty, and within Telegram's length (UTF-16)."""
    if not value.strip():
        raise ValidationError("Give the button a text.")
    if problem := button_text_problem(text=value):
        raise ValidationError(problem[0].upper() + problem[1:])


def button_label_field(verbose_name: str, *, default: str, help_text: str = "") -> models.CharField:
    """A button's text an operator sets: within Telegram's length, checked (button_label_validate)."""
    return models.CharField(verbose_name, max_length=64, default=default, validators=[button_label_validate], help_text=help_text)


class BotSettings(models.Model):
    """The bot's behaviour, edited in the admin. One row (pk=1); `BotSettings.load()` returns it,
    from the shared cache (Redis) when it can: runbot reads it on every /start."""

    bot_username = models.CharField(
        max_length=64, blank=True, help_text="Filled by runbot at start-up; used to build deep links."
    )
    auto_delete_minutes = models.PositiveIntegerField(
        "auto-delete after (minutes)",
        default=30,
        validators=[MaxValueValidator(TELEGRAM_DELETE_WINDOW_MINUTES)],
        help_text="Delete delivered files after this many minutes (0: never). At most 2880 (48 h): Telegram's limit.",
    )
    file_caption = models.TextField(
        blank=True,
        help_text="Caption for delivered files (Telegram HTML): {filename}, {filesize}, {previouscaption}, {mention}, "
        "{first_name}; at most 1024 characters with the longest values. Empty keeps each file's own caption.",
    )
    protect_content = models.BooleanField(default=False, help_text="Delivered files cannot be forwarded or saved.")
    backup_channel_id = models.BigIntegerField(
        "backup channel id",
        null=True,
        blank=True,
        validators=[channel_id_validate],
        help_text="A second private channel (-100…, the bot an admin there): files admins store are copied "
        "there too, and delivered from it when the storage channel's message is gone. Empty: no backups.",
    )
    verification_enabled = models.BooleanField(default=False)
    verification_hours = models.PositiveIntegerField(
        "verification lasts (hours)",
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(VERIFICATION_HOURS_MAX)],
        help_text=f"How long a verification lasts: 1 to {VERIFICATION_HOURS_MAX} hours (a year).",
    )
    token_ttl_minutes = models.PositiveIntegerField(
        "unused token lifetime (minutes)",
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(TOKEN_TTL_MINUTES_MAX)],
        help_text=f"How long an unused token stays valid: 1 to {TOKEN_TTL_MINUTES_MAX} minutes (a week).",
    )
    daily_token_limit = models.PositiveIntegerField(
        "verification links per user per day",
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(DAILY_TOKEN_LIMIT_MAX)],
        help_text=f"1 to {DAILY_TOKEN_LIMIT_MAX}.",
    )
    bypass_seconds = models.PositiveIntegerField(
        "bypass threshold (seconds)",
        default=20,
        validators=[MaxValueValidator(BYPASS_SECONDS_MAX)],
        help_text=f"Returning with a token faster than this is a bypass: 0 (never) to {BYPASS_SECONDS_MAX} seconds.",
    )
    shortener_api_url = models.CharField(
        "shortener API URL",
        max_length=255,
        blank=True,
        help_text='e.g. https://shortener.example/api, or empty / "none" for the direct link.',
    )
    shortener_api_key = models.CharField("shortener API key", max_length=255, blank=True)
    verify_second_gap_hours = models.PositiveIntegerField(
        "second verification after (hours)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(VERIFICATION_HOURS_MAX)],
        help_text="Within one verification period (above), verify a second time this long after the first. "
        "Empty: once per period.",
    )
    verify_third_gap_hours = models.PositiveIntegerField(
        "third verification after (hours)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(VERIFICATION_HOURS_MAX)],
        help_text="A third time this long after the second (needs the second). Empty: no third.",
    )
    verify_second_shortener_url = models.CharField(
        "second verification's shortener API URL", max_length=255, blank=True, db_default="",
        help_text="Its own shortener; empty: the shortener above.",
    )  # fmt: skip
    verify_second_shortener_key = models.CharField(
        "second verification's shortener API key", max_length=255, blank=True, db_default=""
    )
    verify_third_shortener_url = models.CharField(
        "third verification's shortener API URL", max_length=255, blank=True, db_default="",
        help_text="Its own shortener; empty: the shortener above.",
    )  # fmt: skip
    verify_third_shortener_key = models.CharField(
        "third verification's shortener API key", max_length=255, blank=True, db_default=""
    )
    verification_log_channel_id = models.BigIntegerField(
        "verification log channel id",
        null=True,
        blank=True,
        validators=[channel_id_validate],
        help_text="A channel (-100…, the bot an admin there) where each verification, bypass and ban is posted, "
        "a few lines per message. Empty: no log.",
    )
    referrals_needed = models.PositiveIntegerField(
        "referrals per reward",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(REFERRALS_NEEDED_MAX)],
        help_text="Every this many counted referrals give the referrer the premium time below. Empty: no reward.",
    )
    referral_premium_hours = models.PositiveIntegerField(
        "referral reward (hours of premium)",
        default=168,
        db_default=168,
        validators=[MinValueValidator(1), MaxValueValidator(VERIFICATION_HOURS_MAX)],
    )
    referral_hold_count = models.PositiveIntegerField(
        "hold referrals from this many",
        default=5,
        db_default=5,
        validators=[MinValueValidator(2), MaxValueValidator(REFERRALS_NEEDED_MAX)],
        help_text="A referral is held for review when this many of the referrer's referees (it included) first came "
        "to the bot within the minutes below.",
    )
    referral_hold_minutes = models.PositiveIntegerField(
        "within (minutes)", default=10, db_default=10, validators=[MinValueValidator(1), MaxValueValidator(24 * 60)]
    )
    redeem_code_days = models.PositiveIntegerField(
        "redeem codes valid for (days)",
        default=30,
        db_default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="How long a code /gencode makes can be redeemed.",
    )
    redeem_max_failures = models.PositiveIntegerField(
        "wrong codes allowed",
        default=5,
        db_default=5,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="A user who sends this many wrong codes to /redeem may not redeem (not even a right code) for the "
        "cool-off below.",
    )
    redeem_cooloff_minutes = models.PositiveIntegerField(
        "redeem cool-off (minutes)", default=60, db_default=60, validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 60)]
    )
    how_to_verify_url = models.URLField('"How to verify" link', blank=True)
    welcome_text = models.TextField(default="Hello {first_name}! I deliver files shared through my links.")
    welcome_buttons = models.TextField(
        blank=True,
        validators=[buttons_validate],
        help_text='Buttons under the welcome: "Text | https://url" (add "| key" to track clicks), or "Text | tap:key" '
        "for a button that answers in the chat (docs/onboarding.md).",
    )
    welcome_post_id = models.PositiveIntegerField(
        "welcome post",
        null=True,
        blank=True,
        validators=[MaxValueValidator(MESSAGE_ID_MAX)],
        help_text="A post of the posts channel (its message id) sent as the welcome, with its media and formatting, "
        "instead of the welcome text. Empty: the welcome text.",
    )
    posts_channel_id = models.BigIntegerField(
        "posts channel id",
        null=True,
        blank=True,
        validators=[channel_id_validate],
        help_text="The channel (-100…, the bot an admin there) where you keep prepared posts: the welcome, sequence steps "
        "and broadcasts can be a copy of one of its posts, named by its message id.",
    )
    welcome_back_text = models.TextField(
        '"welcome back" text',
        default="Welcome back, {first_name}!",
        help_text="What a returning user's /start gets instead of a second welcome (their onboarding is not sent again).",
    )
    help_text = models.TextField(default="Open a file link to get its files. /about, /faq, /stop to stop messages.")
    about_text = models.TextField(default="Courier delivers files through Telegram links.")
    faq_text = models.TextField(default="Why are files deleted? To keep your chat clean: tap the button to get them again.")
    channel_url = models.CharField(
        "channel link",
        max_length=255,
        blank=True,
        validators=[button_url_validate],
        help_text="Your channel's link (https://t.me/…): /about and /faq carry a button to it. Empty: no button.",
    )
    channel_button_text = button_label_field("channel button text", default="Join Channel")
    deleted_notice_text = models.TextField('"deleted" notice text', default="Previous message was deleted.")
    again_button_text = button_label_field(
        '"get files again" button text',
        default=AGAIN_BUTTON_TEXT,
        help_text='The button under the "deleted" notice that opens the file link again.',
    )
    premium_skips_force_subscribe = models.BooleanField(
        "premium users skip force-subscribe", default=False, help_text="Premium users also skip the channels to join."
    )
    premium_text = models.TextField(
        '"Get premium" text',
        blank=True,
        help_text="Shown under the Verify prompt and in /myplan, e.g. how to buy premium. Empty: nothing.",
    )
    premium_button_text = models.CharField('"Get premium" button text', max_length=64, default="⭐ Get premium")
    premium_button_url = models.URLField(
        '"Get premium" link', blank=True, help_text="The button beside Verify opens this. Empty: no button."
    )
    channel_post_marker = models.CharField(
        "channel-post marker",
        max_length=32,
        default="/chat",
        validators=[marker_validate],
        help_text="A post in BROADCAST_CHANNEL_ID that starts with this is broadcast to every active user, without it.",
    )
    channel_post_button = models.CharField(
        "channel-post button",
        max_length=512,
        blank=True,
        validators=[one_button_validate],
        help_text='An optional button under those broadcasts: "Text | https://example.com". Empty: none.',
    )

    class ChannelPostLinks(models.TextChoices):
        OFF = "off", "Off"
        BUTTON = "button", "Share button on the post (a reply when the bot cannot edit it)"
        REPLY = "reply", "A reply to the post"

    channel_post_links = models.CharField(
        "links for storage-channel posts",
        max_length=8,
        choices=ChannelPostLinks.choices,
        default=ChannelPostLinks.OFF,
        help_text="A post made directly in the storage channel gets its deep link: as a Share button on the post, or as a reply.",
    )
    retired_commands = models.TextField(
        blank=True,
        default="/send | /send is no longer available. Open a file link to get files; /help lists what I can do.",
        validators=[retired_commands_validate],
        help_text='Commands your previous bot had, one per line: "/command | the note it answers with". '
        "A command the bot still has is answered as usual.",
    )
    legacy_channel_id = models.BigIntegerField(
        "legacy storage channel id",
        null=True,
        blank=True,
        validators=[channel_id_validate],
        help_text="The channel (-100…) of the file-store bot you moved from: its links (start=<base64 of get-…>) keep working. "
        "Empty: such links are answered as not valid.",
    )

    send_window_start = models.TimeField(
        "send window opens",
        null=True,
        blank=True,
        help_text="Sequence steps and broadcasts go out only from this time (e.g. 08:00) to the closing time. "
        "Both empty: at any time.",
    )
    send_window_end = models.TimeField(
        "send window closes",
        null=True,
        blank=True,
        help_text="e.g. 22:00. Earlier than the opening crosses midnight (22:00 to 06:00). A step or broadcast due outside "
        "the window waits for its opening; replies to users are never held.",
    )
    send_window_tz = models.CharField(
        "send window time zone",
        max_length=64,
        blank=True,
        validators=[time_zone_validate],
        help_text="The zone of those times, e.g. Europe/Berlin. Empty: the project's TIME_ZONE. Telegram does not tell "
        "the bot a user's own time zone.",
    )
    optout_enabled = models.BooleanField(
        "opt-out button",
        default=False,
        help_text="A button under every broadcast and sequence step: tapping it and confirming does what /stop does.",
    )
    optout_label = button_label_field("opt-out button text", default="Unsubscribe")

    class StreamLinks(models.TextChoices):
        OFF = "off", "Off"
        ON = "on", "On: everyone who gets the files"
        PREMIUM = "premium", "Premium users only"

    stream_links = models.CharField(
        "stream and download links",
        max_length=8,
        choices=StreamLinks.choices,
        default=StreamLinks.OFF,
        db_default=StreamLinks.OFF,  # the previous release's inserts name no such column (docs/operating.md)
        help_text="A ▶️ Stream / ⬇️ Download button under delivered files, opening them in a browser (needs the "
        "streaming process and STREAM_PUBLIC_URL: docs/operating.md). Each stored link may say otherwise.",
    )
    stream_lifetime_hours = models.PositiveIntegerField(
        "stream links last (hours)",
        default=24,
        db_default=24,
        validators=[MinValueValidator(1), MaxValueValidator(STREAM_LIFETIME_HOURS_MAX)],
        help_text="How long a stream or download link works once given; the user gets a new one by opening the file link again.",
    )

    # Fair use (services/fair_use.py) and the allow-list (services/allow_list.py). Each with a
    # database default too: a release before them keeps writing this row.
    fair_use_enabled = models.BooleanField(
        "fair use limits",
        default=False,
        db_default=False,
        help_text="Limit what one user can make the bot do (below). Admins are never limited.",
    )
    fair_use_commands_per_minute = models.PositiveIntegerField(
        "messages per minute",
        default=20,
        db_default=20,
        validators=[MinValueValidator(1), MaxValueValidator(FAIR_USE_PER_MINUTE_MAX)],
        help_text="Commands, texts and button taps one user may send in any minute; more are not answered "
        f"(the user is told once, with when to try again). 1 to {FAIR_USE_PER_MINUTE_MAX}.",
    )
    fair_use_deliveries_per_minute = models.PositiveIntegerField(
        "file deliveries per minute",
        default=5,
        db_default=5,
        validators=[MinValueValidator(1), MaxValueValidator(FAIR_USE_PER_MINUTE_MAX)],
        help_text=f"File links one user may have delivered in any minute. 1 to {FAIR_USE_PER_MINUTE_MAX}.",
    )
    fair_use_deliveries_per_day = models.PositiveIntegerField(
        "file deliveries per day",
        default=100,
        db_default=100,
        validators=[MaxValueValidator(FAIR_USE_PER_DAY_MAX)],
        help_text=f"File links one user may have delivered in a day (from midnight, TIME_ZONE). 0: no daily limit; "
        f"at most {FAIR_USE_PER_DAY_MAX}.",
    )
    fair_use_share_percent = models.PositiveIntegerField(
        "one user's share of the 30/s (%)",
        default=10,
        db_default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="The most of Telegram's 30 messages/s the bot spends on one user: their messages are spaced "
        "accordingly. Telegram's own one message/s per chat is about 3%, so only a lower figure changes anything.",
    )
    fair_use_strikes = models.PositiveIntegerField(
        "limit hits before a ban",
        default=3,
        db_default=3,
        validators=[MaxValueValidator(100)],
        help_text="A user told this many times within an hour that they hit a limit is banned from files for a while: "
        "1 h, then 6 h, 24 h, 7 days for each ban after. 0: never banned for it.",
    )
    allow_list_enabled = models.BooleanField(
        "owner-only mode",
        default=False,
        db_default=False,
        help_text="The bot answers only admins and the users on the allow-list (Allowed users; /authorize). "
        "Switching it on or off changes no stored data.",
    )
    allow_list_text = models.TextField(
        "text for everyone else",
        default=ALLOW_LIST_TEXT,
        db_default=ALLOW_LIST_TEXT,
        help_text="What a user who is not on the allow-list gets while owner-only mode is on (Telegram HTML).",
    )

    class Meta:
        verbose_name = "bot settings"
        verbose_name_plural = "bot settings"

    def __str__(self) -> str:
        return "Current settings"  # the console's header: "Bot settings › Current settings"

    def save(self, *args, **kwargs):
        self.pk = 1
        super().save(*args, **kwargs)
        # Now, and again once the transaction commits (the admin saves inside one): a process that
        # read the old row in between cannot leave it cached.
        _cache_forget()
        transaction.on_commit(_cache_forget)

    def clean(self):
        # One time without the other is no window (always open): the settings page asks for both
        # (BotSettingsForm), the sandbox's `set` takes one at a time.
        if self.send_window_start is not None and self.send_window_start == self.send_window_end:
            raise ValidationError(
                {"send_window_end": "The window opens and closes at the same time: leave both empty to send at any time."}
            )
        if self.verify_third_gap_hours and not self.verify_second_gap_hours:
            raise ValidationError({"verify_third_gap_hours": "A third verification needs a second one: set its gap too."})
        gaps = (self.verify_second_gap_hours or 0) + (self.verify_third_gap_hours or 0)
        if self.verify_second_gap_hours and self.verification_hours and gaps >= self.verification_hours:
            raise ValidationError(
                {
                    "verify_second_gap_hours": f"The gaps add up to {gaps} hours, the whole period "
                    f"({self.verification_hours} hours, above) or more: the later steps would never come."
                }
            )

    def retired_command_note(self, command: str) -> str | None:
        """The note a retired command answers with (`command` without its slash), or None."""
        try:
            return retired_commands_parse(text=self.retired_commands).get(command.lower())
        except ValueError:  # saved before the check, or by hand: answered as an unknown command
            return None

    @classmethod
    def load(cls) -> "BotSettings":
        """The settings row, from this process's copy or the shared cache when it is there (no
        query; botapp.cache.HotValue), else from the database."""
        names = {f.attname for f in cls._meta.concrete_fields}
        # Fields unknown to this code (an older or newer release) are left out; new ones keep their default.
        obj = cls(**{k: v for k, v in SETTINGS.get().items() if k in names})
        obj._state.adding, obj._state.db = False, "default"
        return obj


def _settings_values() -> dict:
    obj, _ = BotSettings.objects.get_or_create(pk=1)
    return {f.attname: getattr(obj, f.attname) for f in BotSettings._meta.concrete_fields}


SETTINGS = HotValue(CACHE_KEY, _settings_values, what="bot settings")


def _cache_forget() -> None:
    SETTINGS.forget()
