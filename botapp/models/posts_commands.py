"""Commands the operator defines that answer with a channel's latest posts mentioning a word (the
drip bot's /results, shared/seeds/002), and the posts runbot keeps of those channels to answer them."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from botapp import clock
from botapp.models.ranges import channel_id_validate

POSTS_SHOWN_MAX = 20  # posts one answer lists: twenty snippets still fit Telegram's 4096 characters
CACHE_MINUTES_MAX = 7 * 24 * 60


class PostsCommand(models.Model):
    """`/<name>`: the latest `count` posts of a channel whose text contains `word`, newest first,
    each with its link; the answer is kept `cache_minutes`. The channel is one the bot administers
    (`channel_id`: runbot keeps the posts it receives) or a public one it is not in
    (`channel_username`: read through the operator's user session, botapp/telegram/user_session.py)."""

    name = models.CharField(
        max_length=32,
        unique=True,
        validators=[RegexValidator(r"^[a-z0-9_]{1,32}\Z", "1 to 32 of a-z, 0-9 and _ (Telegram's bot commands), no slash.")],
        help_text="The command without its slash, e.g. results. A command the bot has already (start, help, …) "
        "is answered as usual.",
    )
    channel_id = models.BigIntegerField(
        "channel id",
        null=True,
        blank=True,
        validators=[channel_id_validate],
        help_text="The channel (-100…) whose posts it lists, when the bot is an admin there: it keeps the posts it "
        "receives from then on (Telegram gives a bot no channel history). runbot reads the channels when it starts: "
        "restart it after adding one.",
    )
    channel_username = models.CharField(
        "public channel",
        max_length=32,
        blank=True,
        validators=[
            RegexValidator(
                r"^[A-Za-z][A-Za-z0-9_]{3,30}[A-Za-z0-9]\Z", "A channel's username: 5 to 32 of a-z, 0-9 and _, no @ or link."
            )
        ],
        help_text="Or a public channel the bot is not in, by its username (wazirforexalerts for t.me/wazirforexalerts): "
        "read through a user session, which `manage.py login_user_session` logs in once.",
    )
    word = models.CharField(
        max_length=64, blank=True, help_text="Only posts whose text contains this (any case), e.g. position. Empty: every post."
    )
    count = models.PositiveSmallIntegerField(
        "posts shown", default=5, validators=[MinValueValidator(1), MaxValueValidator(POSTS_SHOWN_MAX)]
    )
    cache_minutes = models.PositiveIntegerField(
        "answer kept (minutes)",
        default=60,
        validators=[MaxValueValidator(CACHE_MINUTES_MAX)],
        help_text="The same answer is given for this long (0: worked out every time); newer posts show after it.",
    )
    title = models.CharField(max_length=255, default="Latest results", help_text="The answer's first line.")
    empty_text = models.CharField(
        '"nothing yet" text', max_length=255, default="Nothing to show yet.", help_text="The answer when no post matches."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"/{self.name}"

    def clean(self) -> None:
        if (self.channel_id is None) == (not self.channel_username):
            raise ValidationError("Give the channel's id (the bot is an admin there) or a public channel's username, not both.")


class KeptChannelPost(models.Model):
    """A post of a PostsCommand's channel, as runbot received it."""

    chat_id = models.BigIntegerField()
    message_id = models.PositiveIntegerField()
    text = models.TextField(blank=True, help_text="Its text or caption, plain.")
    kept_at = models.DateTimeField(default=clock.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat_id", "message_id"], name="keptpost_chat_message_unique")]
        # posts_command_answer: WHERE chat_id = %s [AND text ILIKE %s] ORDER BY message_id DESC LIMIT n
        # walks the unique constraint's index backwards.

    def __str__(self) -> str:
        return f"{self.chat_id}/{self.message_id}"
