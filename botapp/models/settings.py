"""The bot's behaviour, edited in the admin."""

import logging

from django.core.cache import cache
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from redis import RedisError

from botapp.models.files import TELEGRAM_DELETE_WINDOW_MINUTES

log = logging.getLogger(__name__)

CACHE_KEY = "botsettings"


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
    file_caption = models.TextField(blank=True, help_text="Caption for delivered files; empty keeps the original.")
    protect_content = models.BooleanField(default=False, help_text="Delivered files cannot be forwarded or saved.")
    verification_enabled = models.BooleanField(default=False)
    verification_hours = models.PositiveIntegerField(
        "verification lasts (hours)", default=24, validators=[MinValueValidator(1)], help_text="How long a verification lasts."
    )
    token_ttl_minutes = models.PositiveIntegerField(
        "unused token lifetime (minutes)",
        default=60,
        validators=[MinValueValidator(1)],
        help_text="How long an unused token stays valid.",
    )
    daily_token_limit = models.PositiveIntegerField(
        "verification links per user per day", default=5, validators=[MinValueValidator(1)]
    )
    bypass_seconds = models.PositiveIntegerField(
        "bypass threshold (seconds)", default=20, help_text="Returning with a token faster than this is a bypass."
    )
    shortener_api_url = models.CharField(
        "shortener API URL",
        max_length=255,
        blank=True,
        help_text='e.g. https://shortener.example/api, or empty / "none" for the direct link.',
    )
    shortener_api_key = models.CharField("shortener API key", max_length=255, blank=True)
    how_to_verify_url = models.URLField('"How to verify" link', blank=True)
    welcome_text = models.TextField(default="Hello {first_name}! I deliver files shared through my links.")
    help_text = models.TextField(default="Open a file link to get its files. /about, /faq, /stop to stop messages.")
    about_text = models.TextField(default="Courier delivers files through Telegram links.")
    faq_text = models.TextField(default="Why are files deleted? To keep your chat clean: tap the button to get them again.")
    deleted_notice_text = models.TextField('"deleted" notice text', default="Previous message was deleted.")

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

    @classmethod
    def load(cls) -> "BotSettings":
        """The settings row, from the cache when it is there (no query), else from the database."""
        names = {f.attname for f in cls._meta.concrete_fields}
        try:
            values = cache.get(CACHE_KEY)
        except RedisError as exc:
            log.warning("cache unreachable, reading bot settings from the database: %s", exc)
            values = None
        if values is not None:
            # Fields unknown to this code (an older or newer release) are left out; new ones keep their default.
            obj = cls(**{k: v for k, v in values.items() if k in names})
            obj._state.adding, obj._state.db = False, "default"
            return obj
        obj, _ = cls.objects.get_or_create(pk=1)
        try:
            cache.set(CACHE_KEY, {name: getattr(obj, name) for name in names})
        except RedisError as exc:
            log.warning("cache unreachable, bot settings not cached: %s", exc)
        return obj


def _cache_forget() -> None:
    try:
        cache.delete(CACHE_KEY)
    except RedisError as exc:  # the entry expires on its own (CACHES TIMEOUT)
        log.error("cache unreachable, bot settings stay cached until the entry expires: %s", exc)
