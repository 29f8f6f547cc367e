"""The one interface through which Courier talks to Telegram, and the errors it raises.

Services receive a `Gateway` and never import pyrogram. Its one implementation is
`pyrogram_gateway.PyrogramGateway` (kurigram); tests and the sandbox run that same class against
the in-memory Telegram server (`offline.telegram`). Every method is synchronous and
thread-safe, so sweeps can send from a thread pool and bot handlers from their worker threads.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from botapp.telegram.limits import CALLBACK_DATA_BYTES, IDS_PER_CALL

# Telegram refuses more ids than this in one delete or forward call.
DELETE_CHUNK = IDS_PER_CALL


# --- What we send -------------------------------------------------------------------------


@dataclass(frozen=True)
class Button:
    """An inline button: either a link (`url`) or a callback (`callback_data`, at most 64 bytes)."""

    text: str
    url: str | None = None
    callback_data: str | None = None

    def __post_init__(self):
        if (self.url is None) == (self.callback_data is None):
            raise ValueError("a button has exactly one of url or callback_data")
        if self.callback_data is not None and len(self.callback_data.encode()) > CALLBACK_DATA_BYTES:
            raise ValueError(f"callback_data is at most {CALLBACK_DATA_BYTES} bytes")


Keyboard = Sequence[Sequence[Button]]


@dataclass(frozen=True)
class Media:
    kind: str  # photo | video | document | animation | audio
    file: str  # a Telegram file_id or an https:// URL

    KINDS = ("photo", "video", "document", "animation", "audio")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown media kind {self.kind!r}")


@dataclass(frozen=True)
class CopySource:
    """A stored message as a caption template sees it, read from Telegram when it is copied."""

    kind: str  # photo | video | document | animation | audio | voice | ... ; "" for a message without media
    file_name: str = ""  # documents, videos, audio, animations (a photo has none)
    file_size: int = 0  # bytes
    caption: str = ""  # its own caption, as Telegram HTML
    text: str = ""  # a message without media: its text, as Telegram HTML


# A caption for every copy, or one per message: None keeps that message's own caption.
Caption = str | Callable[[CopySource], str | None] | None


@dataclass(frozen=True)
class Sent:
    chat_id: int
    message_id: int


@dataclass(frozen=True)
class OwnMessage:
    """A message the bot sent, as `own_messages` reads it back: what it shows, in a form that a
    copy shares with its source (`content_of`)."""

    message_id: int
    date: datetime
    content: str  # "<kind>:<file unique id>" for a file (its caption aside), "text:<text>" else


@dataclass(frozen=True)
class SendItem:
    """One message of a `send_many` batch: a text, or a media file (by file id) with the text as
    its caption. `key`: the send's random_id key (`random_id_of`), "" for a fresh random_id."""

    chat_id: int
    text: str
    media: Media | None = None
    buttons: Keyboard | None = None
    protect: bool = False
    key: str = ""


def random_id_of(key: str, n: int = 0) -> int:
    """The random_id of the n-th message of the send named `key`, the same in every process and
    every attempt. Telegram sends a message once per random_id and refuses a repeat with
    RANDOM_ID_DUPLICATE: a send whose outcome is unknown (a worker killed, an answer lost) is sent
    again with the same one, and is then delivered once. The key names the row the send is for
    and when that row was made (so ids starting again in a fresh database make other ones)."""
    digest = hashlib.blake2b(f"{key}/{n}".encode(), digest_size=8, person=b"courier.rid").digest()
    return int.from_bytes(digest, "big", signed=True)


# --- What we receive ----------------------------------------------------------------------


@dataclass(frozen=True)
class TgUser:
    id: int
    first_name: str = ""
    last_name: str = ""
    username: str = ""
    language_code: str = ""
    access_hash: int | None = None  # this bot's key to the user, from Telegram's updates
    is_bot: bool = False  # Telegram's flag: referrals never count a bot


@dataclass(frozen=True)
class ReplyTo:
    """The message a user's message replies to (in the same private chat)."""

    message_id: int
    media_group_id: int | None = None  # set when it is part of an album
    forward_from_chat_id: int | None = None  # set when it was forwarded from a channel
    forward_from_message_id: int | None = None


@dataclass(frozen=True)
class ChannelPost:
    """A post in a channel the bot administers (Telegram's `channel_post`)."""

    chat_id: int
    message_id: int
    text: str = ""  # text or caption, plain
    html: str = ""  # the same as Telegram HTML (its formatting kept)
    media: Media | None = None  # kind and the file id to send it again
    media_group_id: int | None = None

    @property
    def has_media(self) -> bool:
        return self.media is not None


@dataclass(frozen=True)
class IncomingMessage:
    """A message a user sent to the bot in a private chat."""

    chat_id: int
    message_id: int
    user: TgUser
    text: str = ""  # text or caption
    has_media: bool = False
    # Set when the message was forwarded from a channel (used by /batch).
    forward_from_chat_id: int | None = None
    forward_from_message_id: int | None = None
    reply_to: ReplyTo | None = None
    # Set when it is part of an album: Telegram delivers an album's messages as separate updates.
    media_group_id: int | None = None
    # Fetched with getDifference after runbot started: it may have been handled before the restart.
    recovered: bool = False


@dataclass(frozen=True)
class CallbackQuery:
    id: str
    user: TgUser
    chat_id: int
    message_id: int
    data: str
    # The inline buttons of the message tapped, as they are now (a button can turn into another).
    buttons: tuple[tuple[Button, ...], ...] = ()


@dataclass(frozen=True)
class ChatRights:
    """What the bot may do in a channel: a member without admin rights has none of them."""

    admin: bool = False
    post: bool = False  # post messages
    edit: bool = False  # edit messages of others (buttons on any post)
    delete: bool = False  # delete messages of others
    invite: bool = False  # add users / make invite links


# --- Errors -------------------------------------------------------------------------------


class TelegramError(Exception):
    """Anything Telegram refused. Subclasses are the cases callers act on."""


@dataclass
class FloodWait(TelegramError):
    """Telegram asks us to wait `seconds` before sending again."""

    seconds: int

    def __str__(self) -> str:
        return f"FloodWait: wait {self.seconds}s"


class UserBlocked(TelegramError):
    """The user blocked the bot: never retry."""


class UserDeactivated(TelegramError):
    """The user's account is deleted: never retry."""


class ChatNotFound(TelegramError):
    """Unknown chat, or one the bot cannot reach (not a member of the channel)."""


class MessageNotFound(TelegramError):
    """The message does not exist (any more)."""


class MessageTooOld(TelegramError):
    """The message is outside the window in which a bot may delete or edit it."""


class PeerUnknown(ChatNotFound):
    """A user addressed without an access hash (imported: none stored) whom Telegram does not let
    the bot reach (PEER_ID_INVALID: they never started the bot): nothing was sent."""


class ForwardsRestricted(TelegramError):
    """The source chat forbids forwarding and saving its content (the storage channel's setting)."""


class BadRequest(TelegramError):
    """Telegram (or kurigram, before sending) refused the request itself: empty or too long text,
    a malformed or mismatched file id, an invalid id. Retrying the same request cannot help."""


class TransientError(TelegramError):
    """A server-side or network problem before Telegram acted: safe to retry with back-off."""


class OutcomeUnknown(TelegramError):
    """The request left and no answer came (timeout, a 5xx, a dropped connection): Telegram may
    have delivered it. `repeatable`: every message of it carried the random_id of its send's key
    (`random_id_of`), so sending it again with the same key delivers it at most once; otherwise
    it is never repeated (at most once)."""

    repeatable: bool = False


class AlreadySent(TelegramError):
    """Telegram refused the send as a repeat of its random_id (RANDOM_ID_DUPLICATE): an earlier
    attempt delivered it. Its message id is not known (Telegram's refusal does not carry it).
    `sent`: for a send of several messages (a copy), the ones this attempt delivered itself (ids
    known); the others were refused as repeats."""

    def __init__(self, *args, sent: list | None = None):
        super().__init__(*args)
        self.sent = list(sent or [])


@dataclass
class CopyIncomplete(TelegramError):
    """A copy of several messages stopped partway: `sent` arrived (record them), `cause` stopped the rest."""

    sent: list
    cause: TelegramError

    def __str__(self) -> str:
        return f"copy stopped after {len(self.sent)} message(s): {self.cause}"


class BotUnauthorized(Exception):  # noqa: N818 - not a TelegramError on purpose
    """Telegram no longer accepts the bot (token revoked, the bot deleted, session ended): every call
    fails the same way. Not a TelegramError, so no per-user handler swallows it: sweeps stop, and
    no user is marked blocked or deactivated because of it."""


# --- The interface ------------------------------------------------------------------------


class Gateway(abc.ABC):
    """What services may ask of Telegram."""

    @property
    @abc.abstractmethod
    def bot_username(self) -> str: ...

    @abc.abstractmethod
    def send_text(
        self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False, reply_to: int | None = None,
        key: str = "",
    ) -> Sent:  # fmt: skip
        """Send a text message; `reply_to`: as a reply to that message of the chat. `key`, for this
        and every send below: the send's random_id key (`random_id_of`; "" draws a fresh one)."""

    @abc.abstractmethod
    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False,
        key: str = "",
    ) -> Sent: ...  # fmt: skip

    def send_many(self, items: Sequence[SendItem]) -> list[Sent | TelegramError | Exception]:
        """Send each item; one result per item, in order: what was sent or the TelegramError that
        item met (one refused send does not stop the others). When the batch cannot go on
        (BotUnauthorized, or anything that is not Telegram's answer, such as the limiter's Redis
        down), what was sent stays Sent and every item not sent gets that exception: a caller
        hands those back, never the sent ones. An implementation may pack the sends into fewer
        round trips; this one sends them one by one."""
        results: list[Sent | TelegramError | Exception] = []
        for n, item in enumerate(items):
            try:
                if item.media is not None:
                    sent = self.send_media(
                        item.chat_id, item.media, caption=item.text, buttons=item.buttons, protect=item.protect, key=item.key
                    )
                else:
                    sent = self.send_text(item.chat_id, item.text, buttons=item.buttons, protect=item.protect, key=item.key)
            except TelegramError as exc:
                results.append(exc)
            except Exception as exc:  # noqa: BLE001 - nothing more goes; what was sent stays Sent
                return results + [exc] * (len(items) - n)
            else:
                results.append(sent)
        return results

    @abc.abstractmethod
    def send_album(
        self, chat_id: int, items: Sequence[Media], *, caption: str = "", protect: bool = False, key: str = ""
    ) -> list[Sent]:
        """2 to ALBUM_SIZE media (file ids) as one album (messages.sendMultiMedia, one call);
        `caption` goes under the first. Telegram groups photos with videos, documents only with
        documents, audio only with audio."""

    @abc.abstractmethod
    def upload(self, kind: str, file: BinaryIO, *, file_name: str, mime_type: str = "") -> str:
        """Upload a file to Telegram without sending it (upload.saveFilePart or saveBigFilePart,
        then messages.uploadMedia) and return its file id, which sends it to anyone from then on."""

    @abc.abstractmethod
    def copy_messages(
        self,
        chat_id: int,
        from_chat_id: int,
        message_ids: Sequence[int],
        *,
        caption: Caption = None,
        protect: bool = False,
        buttons: Keyboard | None = None,
        key: str = "",
    ) -> list[Sent]:
        """Copy messages without the "forwarded from" header, in order. `caption` (Telegram HTML)
        replaces captions of media messages: one text for all, or a function given each message's
        CopySource (None from it keeps that message's caption). `buttons` go under the copy (one
        message only: an album carries none); without them the copy has no buttons."""

    @abc.abstractmethod
    def post_read(self, chat_id: int, message_id: int) -> CopySource:
        """A message of a channel as a copy of it would carry it (its media, text or caption as
        Telegram HTML), read the way `copy_messages` reads it. Raises MessageNotFound when there
        is no such message (deleted, never posted, a service message), ChatNotFound when the
        channel cannot be read."""

    @abc.abstractmethod
    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        """Delete messages, at most DELETE_CHUNK ids per call. Returns how many Telegram deleted;
        ids that are gone or too old are skipped silently (the count shows it)."""

    def delete_private(self, messages: Sequence[tuple[int, Sequence[int]]]) -> int:
        """Delete messages in private chats, given as (chat id, message ids): what `delete_messages`
        does chat by chat, in as few calls as Telegram allows. Returns how many Telegram deleted in
        all; a FloodWait or transient error that outlasts the retries is raised for the lot."""
        return sum(self.delete_messages(chat_id, ids) for chat_id, ids in messages)

    @abc.abstractmethod
    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None: ...

    @abc.abstractmethod
    def edit_buttons(self, chat_id: int, message_id: int, buttons: Keyboard | None) -> None:
        """Replace a message's inline buttons (the bot's own, or in a channel any post, given the
        admin right to edit the messages of others)."""

    @abc.abstractmethod
    def invite_link_create(self, chat_id: int, *, expire_at: datetime | None = None, join_request: bool = False) -> str:
        """A new invite link to the channel, expiring at `expire_at` (None: never), or needing an
        admin's approval (`join_request`). The bot must be an admin allowed to invite users."""

    @abc.abstractmethod
    def pin_message(self, chat_id: int, message_id: int, *, silent: bool = True) -> None:
        """Pin the message in the chat (for both sides of a private chat); `silent`: no notification."""

    @abc.abstractmethod
    def album_ids(self, chat_id: int, message_id: int) -> list[int]:
        """The ids of the album (media group) the message belongs to, in order; [message_id] when
        it is a single message. Raises MessageNotFound when it is gone."""

    @abc.abstractmethod
    def messages_existing(self, chat_id: int, message_ids: Sequence[int]) -> list[int]:
        """Which of these message ids (at most IDS_PER_CALL) exist in the chat, in the order given;
        deleted and never-posted ids are left out. One read; raises ChatNotFound (or another
        TelegramError) when the chat cannot be read at all."""

    @abc.abstractmethod
    def message_contents(self, chat_id: int, message_ids: Sequence[int]) -> dict[int, str]:
        """{message id: what it shows} for those of the ids (at most IDS_PER_CALL) that exist in
        the chat, in OwnMessage.content's form (a copy of a message shows what it shows). One read."""

    @abc.abstractmethod
    def own_messages(
        self, chat_id: int, *, after_id: int, until: datetime, contents: Collection[str] | None = None, limit: int = 0
    ) -> list[OwnMessage]:
        """The bot's own messages in the private chat `chat_id` with an id above `after_id` and
        sent at `until` or before (only those showing one of `contents`, when given), oldest
        first: read back by id, IDS_PER_CALL ids a call, up the bot's message box (private chats
        share one sequence of ids), to the first message sent after `until`, the box's end, or
        `limit` messages found. What finds a copy whose answer was lost (its message id never
        known). Raises TelegramError when Telegram refuses the reads."""

    @abc.abstractmethod
    def own_messages_in(
        self, chat_ids: Collection[int], *, after_id: int, until: datetime, content: str, scan_max: int, box_to: int = 0
    ) -> dict[int, int]:
        """{chat: id} of the first of the bot's own messages showing `content` (OwnMessage.content's
        form) in each of the private chats `chat_ids` that has one, among those above `after_id`
        and sent at `until` or before: one read up the bot's message box for them all, as
        `own_messages` reads it, at most `scan_max` ids (`box_to`: an id known to exist, below which
        a run of deleted messages is not the box's end). What finds a broadcast's messages whose
        sends were confirmed only as repeats (their ids never known). Raises TelegramError when
        Telegram refuses the reads."""

    @abc.abstractmethod
    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None: ...

    @abc.abstractmethod
    def is_member(self, chat_id: int, user_id: int) -> bool:
        """Whether the user is a member of the channel/group (joined, admin or owner)."""

    @abc.abstractmethod
    def chat_rights(self, chat_id: int) -> ChatRights:
        """The bot's own rights in the channel. Raises ChatNotFound when the channel does not exist
        or the bot cannot see it (not a member, or removed)."""

    @abc.abstractmethod
    def peers_remember(self, access_hashes: dict[int, int | None]) -> None:
        """Access hashes a sweep loaded with its batch (user id -> hash), so that sending to them
        asks neither Telegram nor the database again."""


def chunked(ids: Sequence[int], size: int = DELETE_CHUNK) -> Iterable[list[int]]:
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])
