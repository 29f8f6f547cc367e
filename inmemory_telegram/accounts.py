"""Several accounts on one in-memory Telegram: the main bot (runbot's), extra bots an operator adds
(stream bots), each its own token, account, signed-in keys and budget of file reads, and people's
own accounts (user sessions: core.ServerCore.signed_in, methods/auth.py). A key is signed in to one
bot or one person (core.ServerCore._caller_set checks what each may call); here: which bot a
request comes from, whether it administers a channel, and the access hashes and file references
that are an account's own. A mixin of core.ServerCore (its `bot`, `bots`, `authorized`,
`signed_in`, `channels`, `lock`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from inmemory_telegram import render, wire
from inmemory_telegram.rates import Window
from inmemory_telegram.session import Endpoint
from inmemory_telegram.state import Bot, Channel, channel_raw_id

# Extra bots (bot_add: the stream bots an operator adds, each its own token and account) are
# modelled for what they do: sign in, read the channels they administer and their files. Their
# own private chats and update stream are not modelled (such a bot has met no user: a user it
# names is PEER_ID_INVALID); any other method from one of them is refused as not implemented (and
# logged), never answered with the main bot's state.
EXTRA_BOT_METHODS = frozenset({
    "help.GetConfig", "auth.ImportAuthorization", "auth.ExportAuthorization", "updates.GetState", "users.GetFullUser",
    "users.GetUsers", "channels.GetChannels", "channels.GetMessages", "channels.GetParticipant", "upload.GetFile",
})  # fmt: skip

# Whose a file's access hash and file reference are. Telegram documents that a peer's access hash
# is the account's own (core.telegram.org/api/peers), the Bot API that a file_id "can't be used by
# another bot", and mtcute's file-id reference calls the access hash in a file id "user-bound";
# MTProto's docs call a document's access_hash a "check sum, dependent on document ID" and say
# nothing of accounts for file references. Inferred, the stricter reading: each bot gets its own
# access hash and its own file reference for a file (and its own access hash for a channel), so a
# location one bot read is FILE_ID_INVALID for another, and a reference of another's expired. A
# person's account (a user session) likewise gets its own, the main bot's serving it nothing.
ACCOUNT_BOUND_FILES = True


class Accounts:
    """Which bot acts, and what is its own (module docstring)."""

    def bot_of(self, endpoint: Endpoint) -> Bot | None:
        """The bot `endpoint`'s key is signed in to on its DC (None: not signed in)."""
        bot_id = self.authorized.get((endpoint.dc_id, wire.key_id(endpoint.auth_key)))
        return None if bot_id is None else self.bots[bot_id]

    def acting_bot(self) -> Bot:
        """The bot whose request this thread answers (the main bot outside a request: the controls)."""
        endpoint = getattr(self._answering, "endpoint", None)
        bot = None if endpoint is None else self.bot_of(endpoint)
        return self.bot if bot is None else bot

    def acting_account(self) -> int:
        """The id of the account whose request this thread answers: a person's (a user session's
        key signed in to it) or the acting bot's."""
        endpoint = getattr(self._answering, "endpoint", None)
        person = None if endpoint is None else self.signed_in.get(wire.key_id(endpoint.auth_key))
        return self.acting_bot().id if person is None else person

    def is_admin(self, channel: Channel, bot: Bot | None = None) -> bool:
        """Whether `bot` (default: the acting bot) administers `channel`."""
        bot = bot or self.acting_bot()
        return channel.bot_is_admin if bot is self.bot else bot.id in channel.bot_admins

    def bound_hash(self, value: int, account: int | None = None) -> int:
        """The access hash account `account` (an id; default: the acting account) knows for an
        object whose main bot's hash is `value` (ACCOUNT_BOUND_FILES): its own, fixed, and no
        other account's."""
        account = self.acting_account() if account is None else account
        if account == self.bot.id or not ACCOUNT_BOUND_FILES:
            return value
        digest = hashlib.blake2b(value.to_bytes(8, "big", signed=True), key=account.to_bytes(8, "big"), digest_size=8)
        return (int.from_bytes(digest.digest(), "big") >> 1) or 1

    def bound_reference(self, reference: bytes, account: int | None = None) -> bytes:
        """The file reference `account` (default: the acting account) gets for a file whose
        current reference (the main bot's) is `reference`: renewed with it, and no other
        account's (ACCOUNT_BOUND_FILES)."""
        account = self.acting_account() if account is None else account
        if account == self.bot.id or not ACCOUNT_BOUND_FILES:
            return reference
        return hashlib.blake2b(reference, key=account.to_bytes(8, "big"), digest_size=len(reference) or 8).digest()

    def file_view(self, account: int | None = None) -> render.FileView | None:
        """How files look to `account` (default: the acting account) in what it is sent (None: as
        stored)."""
        account = self.acting_account() if account is None else account
        if account == self.bot.id:
            return None
        return lambda file: (self.bound_hash(file.access_hash, account), self.bound_reference(file.file_reference, account))

    def file_reads_of(self, bot: Bot) -> Window:
        """`bot`'s budget of file reads (limits.FILE_READ_RATE, per account: inferred)."""
        window = self.file_reads.get(bot.id)
        if window is None:
            window = self.file_reads[bot.id] = Window(self.file_read_rate)
        return window

    def bot_add(self, token: str, *, username: str = "", admin_of: Iterable[int] = ()) -> int:
        """Another bot (a stream bot an operator made in @BotFather): its own token and account,
        its id the token's number (as Telegram's tokens start with it), an admin of the channels
        `admin_of` only. Returns its id. What it may do: EXTRA_BOT_METHODS."""
        bot_id = int(token.split(":", 1)[0])
        with self.lock:
            if bot_id in self.bots:
                raise ValueError(f"bot {bot_id} exists")
            self.bots[bot_id] = Bot(id=bot_id, username=username or f"Stream{bot_id}Bot", first_name="Stream", token=token)
            for chat_id in admin_of:
                self.channels[channel_raw_id(chat_id)].bot_admins.add(bot_id)
        return bot_id

    def bot_admin_set(self, chat_id: int, bot_id: int, admin: bool) -> None:
        """The channel's owner makes an extra bot an admin of `chat_id`, or removes it."""
        with self.lock:
            admins = self.channels[channel_raw_id(chat_id)].bot_admins
            if admin:
                admins.add(bot_id)
            else:
                admins.discard(bot_id)
