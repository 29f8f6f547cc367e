"""Posts commands (a channel's latest posts mentioning a word, the drip bot's /results) and the
posts runbot kept of their channels."""

from django.contrib import admin

from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.models import KeptChannelPost, PostsCommand


@admin.register(PostsCommand)
class PostsCommandAdmin(ModelAdmin):
    list_display = ("__str__", "channel_id", "channel_username", "word", "count", "cache_minutes", "enabled")
    list_filter = ("enabled",)
    search_fields = ("name", "word", "=channel_id", "channel_username")


@admin.register(KeptChannelPost)
class KeptChannelPostAdmin(InternalAdmin):
    """What runbot received from the commands' channels; a post deleted here is no longer listed."""

    deletable = True
    list_display = ("chat_id", "message_id", "text", "kept_at")
    list_filter = ("chat_id", "kept_at")
    search_fields = ("=chat_id", "text")
