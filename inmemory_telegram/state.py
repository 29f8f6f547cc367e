"""What the in-memory Telegram knows: the bot (and any extra bots of the same owner: stream bots),
its users, its channels, every message and file.

Records only; the server (core.ServerCore) owns them under one lock, and `render.py` turns them
into the TL objects Telegram would send.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime

from pyrogram import raw

from inmemory_telegram.content import generated

CHANNEL_ID_SHIFT = -1_000_000_000_000  # Bot API id of channel c is -100<c>: -(10**12) - c


def channel_api_id(raw_id: int) -> int:
    return CHANNEL_ID_SHIFT - raw_id


def channel_raw_id(api_id: int) -> int:
    return CHANNEL_ID_SHIFT - api_id


def new_hash() -> int:
    return secrets.randbits(63) or 1


# --- what a test or the sandbox hands in and reads back -----------------------------------------
# The model's own small types: a harness may hand in its own objects with the same fields (a user
# with id and names, media with kind and file), and compares what it reads back with these.


@dataclass(frozen=True)
class Profile:
    """Who a user is, as their Telegram app tells Telegram: what a user writing to the bot brings."""

    id: int
    first_name: str = ""
    last_name: str = ""
    username: str = ""
    language_code: str = ""


@dataclass(frozen=True)
class Media:
    """A message's file as a test names it: its kind and its name (or the URL it was fetched from)."""

    kind: str  # photo | video | document | animation | audio
    file: str


@dataclass(frozen=True)
class Button:
    """An inline button under a message: a link (`url`) or a callback (`callback_data`)."""

    text: str
    url: str | None = None
    callback_data: str | None = None


@dataclass
class Account:
    """A person's own Telegram account, signed in by phone number (a user session, not the bot):
    the login code Telegram last sent to their apps, and their two-step verification password."""

    user_id: int
    phone: str  # digits only, as clients send it
    password: str = ""  # two-step verification ("": none)
    code: str = ""  # the login code last sent (auth.sendCode), "" once used
    code_hash: str = ""  # the phone_code_hash that goes with it


@dataclass
class Bot:
    id: int
    username: str
    first_name: str
    token: str
    revoked: bool = False  # the token was revoked in @BotFather: every session gets 401
    deactivated: bool = False  # the bot's account itself was deleted


@dataclass
class User:
    id: int
    first_name: str = ""
    last_name: str = ""
    username: str = ""
    language_code: str = ""
    access_hash: int = field(default_factory=new_hash)
    blocked_bot: bool = False
    deactivated: bool = False
    # Telegram lets a bot reach a user only after the user wrote to it (or the bot saw them in a chat).
    known_to_bot: bool = False
    # The user has a private chat with the bot: they started it (wrote to it) at some time, under
    # whichever session or server of the bot's; what a zero access hash reaches (methods/common.py).
    private_chat: bool = False


@dataclass
class Channel:
    raw_id: int
    title: str
    access_hash: int = field(default_factory=new_hash)
    username: str = ""  # a public channel's (t.me/<username>): anyone may read its history
    bot_is_admin: bool = True  # the main bot (runbot's) administers it
    bot_admins: set[int] = field(default_factory=set)  # extra bots (ServerCore.bot_add) that administer it
    members: set[int] = field(default_factory=set)
    join_requests: set[int] = field(default_factory=set)
    noforwards: bool = False  # "restrict saving content": forwards and copies are refused
    bot_can_edit: bool = True  # the admin right "edit messages of others" (reply markup of any post)
    bot_can_post: bool = True  # the admin right "post messages" (a channel admin without it cannot send there)
    bot_can_invite: bool = True  # the admin right "invite users via link" (exportChatInvite)
    next_id: int = 1
    pts: int = 1
    posts: list = field(default_factory=list)  # (pts, Message): posts the bot was told of, for getChannelDifference
    invites: dict = field(default_factory=dict)  # link -> Invite the bot exported

    @property
    def api_id(self) -> int:
        return channel_api_id(self.raw_id)


@dataclass
class Invite:
    """An invite link the bot exported for a channel (messages.exportChatInvite)."""

    link: str
    date: datetime
    expire_date: datetime | None = None
    request_needed: bool = False
    revoked: bool = False


@dataclass
class File:
    """A photo or document as Telegram stores it, addressed by id + access_hash + file_reference."""

    id: int
    kind: str  # photo | video | document | animation | audio
    name: str  # a file name, or the URL it was fetched from
    access_hash: int = field(default_factory=new_hash)
    file_reference: bytes = field(default_factory=lambda: secrets.token_bytes(8))
    size: int = 1024
    mime_type: str = "application/octet-stream"
    sha256: str = ""  # of the bytes uploaded (empty for files made by a test or fetched from a URL)
    dc_id: int = 2  # the data centre it is kept on (limits.HOME_DC: the bot's own)
    reference_at: datetime | None = None  # when `file_reference` was issued (the server's clock)
    # Its bytes: as uploaded, or None for a file a test or the sandbox made of `size` bytes, whose
    # bytes are generated from its id (content.py) and cost no memory.
    content: bytes | None = None

    def part_length(self, offset: int, length: int) -> int:
        """How many of bytes [offset, offset + length) the file has: cut at its end."""
        return max(0, min(length, self.size - offset))

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the file, cut at its end."""
        length = self.part_length(offset, length)
        if self.content is not None:
            return self.content[offset : offset + length]
        return generated(self.id, offset, length)

    def reference_renew(self, now: datetime) -> None:
        """A new file reference: the old one is void."""
        self.file_reference = secrets.token_bytes(8)
        self.reference_at = now


@dataclass
class Upload:
    """A file being uploaded in parts (upload.saveFilePart / saveBigFilePart) before
    messages.uploadMedia or a send turns it into a File."""

    big: bool
    total: int | None = None  # saveBigFilePart says how many parts there are
    parts: dict[int, bytes] = field(default_factory=dict)


@dataclass
class Message:
    chat_id: int  # Bot API style: a user id, or -100… for a channel
    id: int
    date: datetime
    out: bool  # sent by the bot
    text: str = ""
    entities: list = field(default_factory=list)  # raw MessageEntity objects, as sent
    file: File | None = None
    reply_markup: object | None = None  # raw ReplyInlineMarkup, as sent
    noforwards: bool = False
    service: bool = False  # "user joined" and the like: nothing to copy
    forward_from: tuple[int, int] | None = None  # (channel api id, message id) shown in the header
    sender_id: int | None = None  # who wrote it (None: a channel post)
    deleted: bool = False
    paid: bool = False  # sent with the paid-broadcast flag
    grouped_id: int | None = None  # the album (media group) it belongs to
    reply_to: int | None = None  # the message it replies to, in the same chat
    pinned: bool = False
    action: object | None = None  # a service message's raw MessageAction (None: a title edit)
    silent: bool = False  # sent without a notification

    # --- what a test or the sandbox reads ------------------------------------------------------------

    @property
    def from_bot(self) -> bool:
        return self.out

    @property
    def protect(self) -> bool:
        return self.noforwards

    @property
    def media(self) -> Media | None:
        return media_of(self.file)

    @property
    def buttons(self) -> tuple[tuple[Button, ...], ...]:
        return buttons_of(self.reply_markup)


@dataclass
class Event:
    """One thing the bot did that a user could see."""

    action: str  # send | copy | delete | edit | answer
    chat_id: int
    message_ids: list[int] = field(default_factory=list)
    text: str = ""
    media: Media | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()
    alert: bool = False  # an answer shown as an alert rather than a toast
    reply_to: int | None = None  # the message a send replies to
    # When it happened (time.monotonic(), the machine's clock): read by benchmarks, never compared.
    at: float = field(default_factory=time.monotonic, compare=False, repr=False)


@dataclass(frozen=True)
class Call:
    method: str  # "messages.SendMessage"
    chat_id: int | None
    at: float  # time.monotonic()
    access_hash: int | None = None  # the hash the call named its user with (0: by id alone); None: no user


def buttons_of(markup) -> tuple[tuple[Button, ...], ...]:
    """The buttons of a raw ReplyInlineMarkup."""
    if not isinstance(markup, raw.types.ReplyInlineMarkup):
        return ()
    rows = []
    for row in markup.rows:
        buttons = []
        for b in row.buttons:
            kind = b.type
            if isinstance(kind, raw.types.InlineButtonTypeUrl):
                buttons.append(Button(b.text, url=kind.url))
            elif isinstance(kind, raw.types.InlineButtonTypeCallback):
                buttons.append(Button(b.text, callback_data=kind.data.decode()))
        rows.append(tuple(buttons))
    return tuple(rows)


def media_of(file: File | None) -> Media | None:
    return Media(file.kind, file.name) if file is not None else None
