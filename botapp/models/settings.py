"""The bot's behaviour, edited in the admin."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from botapp.models.files import TELEGRAM_DELETE_WINDOW_MINUTES


class BotSettings(models.Model):
    """The bot's behaviour, edited in the admin. One row (pk=1); `BotSettings.load()` returns it."""

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
        return "Bot settings"

    def save(self, *args, **kwargs):
        from django.core.cache import cache

        self.pk = 1
        super().save(*args, **kwargs)
        cache.delete("courier:bot_username")  # see services.files.bot_username_cached

    @classmethod
    def load(cls) -> "BotSettings":
        obj, _ = cls.objects.get_or_create(pk=1)
        return obj
