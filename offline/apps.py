from django.apps import AppConfig


class OfflineConfig(AppConfig):
    """The in-memory Telegram and the sandbox: their management commands (`telegram_server`,
    `sandbox`); no models."""

    name = "offline"
    verbose_name = "Courier offline tooling"
