"""runbot's record of the updates it handled (services/updates.py): read only, for an operator
asking "did the bot see this message?" after a restart."""

from django.contrib import admin

from botapp.admin.base import InternalAdmin
from botapp.models import HandledUpdate, UpdatePosition


@admin.register(HandledUpdate)
class HandledUpdateAdmin(InternalAdmin):
    """Each message, tap and channel post runbot claimed: when, by which run, and whether it was
    finished. More than one attempt: Telegram handed it again (recognised, not handled twice)."""

    list_display = ("chat_id", "update_id", "kind", "once", "attempts", "claimed_at", "done_at", "run")
    list_filter = ("kind", "once", "claimed_at", "done_at")
    search_fields = ("=chat_id", "=update_id", "run")
    date_hierarchy = "claimed_at"


@admin.register(UpdatePosition)
class UpdatePositionAdmin(InternalAdmin):
    """Where runbot is in Telegram's update sequences (one row per box: the bot's, each channel's)."""

    list_display = ("box", "pts", "qts", "seq", "date", "bot_id", "updated_at")
    list_filter = ("updated_at", "bot_id")
    search_fields = ("=box", "=bot_id")
