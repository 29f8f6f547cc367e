"""runbot's place in Telegram's update stream, and the updates it took on: so that after a crash it
asks Telegram for exactly what it had not handled, and recognises an update Telegram sends again
(docs/reliability.md#updates)."""

from django.db import models


class UpdatePosition(models.Model):
    """Where runbot has got to in one of Telegram's update sequences: every update up to it has
    been handled. `box` 0 is the bot's own sequence (messages in private chats: `pts`; bot events:
    `qts`; `date` and `seq` as Telegram gave them); a channel's row is keyed by its chat id
    (-100…) and keeps that channel's `pts`. Written by runbot about once a second while updates
    come (botapp/telegram/position.py)."""

    ACCOUNT = 0

    box = models.BigIntegerField(primary_key=True)
    pts = models.BigIntegerField()
    qts = models.BigIntegerField(default=0)
    date = models.BigIntegerField(default=0)  # Unix time, as Telegram sends it
    seq = models.IntegerField(default=0)
    bot_id = models.BigIntegerField(default=0)  # whose sequences these are (the bot's Telegram user id)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"box {self.box}: pts {self.pts}"


class HandledUpdate(models.Model):
    """An update runbot took on, recorded (claimed) before it is handled and marked done after
    (services/updates.py: `update_claim`). The same message (chat and message id), callback query
    or channel post coming again is recognised: handled already, or being handled by this run, it
    is not handled again; claimed by a run that died before it was done, it is handled again only
    when its handling can be repeated (`once` is false: its sends carry fixed random_ids), never when
    it is `once` (admin commands, a broadcast started from a channel post)."""

    class Kind(models.IntegerChoices):
        MESSAGE = 1, "message"
        CALLBACK = 2, "callback query"
        CHANNEL_POST = 3, "channel post"

    kind = models.PositiveSmallIntegerField(choices=Kind.choices)
    chat_id = models.BigIntegerField()
    update_id = models.BigIntegerField()  # the message id, or the callback query's id
    once = models.BooleanField()  # never handled a second time, even when the first try died midway
    run = models.CharField(max_length=32)  # the runbot run that handles it (services/updates.py: update_run)
    token = models.BigIntegerField()  # the claim that is handling it now
    attempts = models.PositiveIntegerField(default=1)  # times it came: more than 1 are recognised repeats
    claimed_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # update_claim's INSERT … ON CONFLICT (kind, chat_id, update_id): one row per update.
            models.UniqueConstraint(fields=["kind", "chat_id", "update_id"], name="handled_update_once"),
        ]
        indexes = [
            # handled_updates_prune: claimed_at < cutoff.
            models.Index(fields=["claimed_at"], name="handled_update_claimed"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.chat_id}/{self.update_id}"
