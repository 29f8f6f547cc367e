"""The ids a scheduled-message system's clients use (shared/seeds/003): subscribers and their messages.

That system gave each user who subscribed an id of its own (`user_id`, a UUID, or whatever its
database holds) and let clients schedule messages to those ids. Courier keeps both so that its
clients keep working: a subscriber is a Telegram user with that id, and a subscriber message is a
scheduled message of Courier's (a Broadcast of kind `message`) with the id and the recipient list
the client gave.
"""

from django.db import models

from botapp import clock
from botapp.models.broadcasts import Broadcast
from botapp.models.users import TelegramUser


class Subscriber(models.Model):
    subscriber_id = models.CharField(
        max_length=255, unique=True, help_text="The id clients address the user by (the old system's user_id)."
    )
    user = models.OneToOneField(TelegramUser, on_delete=models.CASCADE, related_name="subscriber")
    chat_name = models.TextField(help_text="The name given when the user subscribed.")
    created_at = models.DateTimeField(default=clock.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.subscriber_id} ({self.user_id})"


class SubscriberMessage(models.Model):
    message_id = models.CharField(max_length=255, unique=True, help_text="The message's id as clients know it (a UUID).")
    broadcast = models.OneToOneField(Broadcast, on_delete=models.CASCADE, related_name="subscriber_message")
    target_ids = models.JSONField(default=list, help_text="The subscriber ids the client listed, as given.")
    scheduled_for = models.DateTimeField(help_text="The time the client gave (a time past sends at once).")
    created_at = models.DateTimeField(default=clock.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.message_id
