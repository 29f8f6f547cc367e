"""What the methods of several namespaces share: their table, the peers a request names, the
checks Telegram makes before it delivers anything, and the answers several methods give alike."""

from __future__ import annotations

import urllib.parse

from pyrogram import raw

from inmemory_telegram import limits, render
from inmemory_telegram.core import ServerCore
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.state import Channel, Event, Message, User


class Table(dict):
    """TL function name ("messages.SendMessage") -> handler(server, query), run under the server's
    lock: it returns the TL result or raises RpcFault with Telegram's error."""

    def method(self, name: str):
        def register(fn):
            self[name] = fn
            return fn

        return register


def now_ts(server: ServerCore) -> int:
    return int(server.now().timestamp())


# A bot may name a user with access hash 0: Telegram's own Bot API server (tdlib's
# ContactsManager::get_input_user and get_input_peer_user) sends inputUser(id, 0) and
# inputPeerUser(id, 0) from a bot for every user it holds no hash for, and Bot API bots message
# their users by id alone. Which users Telegram lets a bot reach so is not documented: inferred,
# and kept strict, as those who have a private chat with the bot (they started it) or who blocked
# it (they answer USER_IS_BLOCKED, as with their hash); anyone else answers ZERO_HASH_UNREACHED,
# the error Telegram gives for a peer it cannot resolve (the Bot API's "Bad Request: chat not
# found" for a user who never started the bot is tdlib's PEER_ID_INVALID).
ZERO_HASH = 0
ZERO_HASH_UNREACHED = "PEER_ID_INVALID"


def resolve_user(server: ServerCore, peer) -> User:
    if server.acting_bot() is not server.bot:  # an extra bot has met no user (accounts.py)
        raise RpcFault("PEER_ID_INVALID")
    if isinstance(peer, (raw.types.InputPeerUser, raw.types.InputUser)):
        user = server.users.get(peer.user_id)
        if user is not None and peer.access_hash == user.access_hash:
            return user
        if peer.access_hash == ZERO_HASH:
            if user is not None and (user.private_chat or user.blocked_bot):
                return user
            raise RpcFault(ZERO_HASH_UNREACHED)
    raise RpcFault("PEER_ID_INVALID")


def resolve_channel(server: ServerCore, peer) -> Channel:
    if isinstance(peer, (raw.types.InputPeerChannel, raw.types.InputChannel)):
        channel = server.channels.get(peer.channel_id)
        if channel is not None and peer.access_hash == server.bound_hash(channel.access_hash):
            return channel
        raise RpcFault("CHANNEL_INVALID")
    raise RpcFault("PEER_ID_INVALID")


def resolve_chat(server: ServerCore, peer) -> tuple[int, User | None, Channel | None]:
    if isinstance(peer, raw.types.InputPeerUser):
        user = resolve_user(server, peer)
        return user.id, user, None
    if isinstance(peer, raw.types.InputPeerChannel):
        channel = resolve_channel(server, peer)
        return channel.api_id, None, channel
    raise RpcFault("PEER_ID_INVALID")


def writable(server: ServerCore, peer, *, paid: bool = False, messages: int = 1) -> tuple[int, User | None, Channel | None]:
    """The chat a send of `messages` goes to, after the checks Telegram makes before delivering anything."""
    chat_id, user, channel = resolve_chat(server, peer)
    if user is not None:
        if user.deactivated:
            raise RpcFault("INPUT_USER_DEACTIVATED")
        if user.blocked_bot:
            raise RpcFault("USER_IS_BLOCKED")
    elif not (channel.bot_is_admin and channel.bot_can_post):
        raise RpcFault("CHAT_WRITE_FORBIDDEN")
    server.check_rate(chat_id, paid=paid, messages=messages)
    return chat_id, user, channel


def new_message_updates(server: ServerCore, messages: list[Message], random_ids: list[int], user, channel):
    updates = [raw.types.UpdateMessageID(id=m.id, random_id=r) for m, r in zip(messages, random_ids, strict=False)]
    for m in messages:
        tl = render.message_tl(m, bot_id=server.bot.id)
        if m.chat_id > 0:
            updates.append(raw.types.UpdateNewMessage(message=tl, pts=server.pts, pts_count=1))
        else:
            updates.append(raw.types.UpdateNewChannelMessage(message=tl, pts=channel.pts, pts_count=1))
    return server.updates_tl(updates, users=[user] if user else [], channels=[channel] if channel else [])


def check_text(text: str, *, caption: bool) -> None:
    if caption:
        if limits.utf16_length(text) > limits.CAPTION_LENGTH:
            raise RpcFault("MEDIA_CAPTION_TOO_LONG")
        return
    if not text.strip():
        raise RpcFault("MESSAGE_EMPTY")
    if limits.utf16_length(text) > limits.TEXT_LENGTH:
        raise RpcFault("MESSAGE_TOO_LONG")


def check_markup(markup) -> None:
    for row in buttons_of_raw(markup):
        for b in row:
            data = getattr(b.type, "data", None)
            if data is not None and len(data) > limits.CALLBACK_DATA_BYTES:  # bytes (TL bytes)
                raise RpcFault("BUTTON_DATA_INVALID")
            url = getattr(b.type, "url", None)
            if url is not None and not button_url_valid(url):
                raise RpcFault("BUTTON_URL_INVALID")


def button_url_valid(url: str) -> bool:
    """A link button takes an "HTTP or tg:// URL" (Bot API, InlineKeyboardButton.url);
    BUTTON_URL_INVALID is the error messages.sendMessage lists for it. That a URL without a host
    (https://, tg://) is refused too is inferred."""
    parts = urllib.parse.urlsplit(url.strip())
    return parts.scheme.lower() in ("http", "https", "tg") and bool(parts.netloc)


def buttons_of_raw(markup):
    return [row.buttons for row in markup.rows] if isinstance(markup, raw.types.ReplyInlineMarkup) else []


def messages_result(server, found, ids, *, channel: Channel | None = None):
    tl, users = [], {}
    bot, view = server.acting_bot(), server.file_view()
    for msg, wanted in zip(found, ids, strict=False):
        if msg is None or msg.deleted:
            tl.append(raw.types.MessageEmpty(id=wanted))
            continue
        if msg.file is not None and server.now() - msg.file.reference_at >= limits.FILE_REFERENCE_LIFETIME:
            msg.file.reference_renew(server.now())  # read again: a fresh file reference
        tl.append(render.message_tl(msg, bot_id=bot.id, view=view))
        if msg.chat_id > 0:
            users[msg.chat_id] = server.users[msg.chat_id]
    user_tl = [render.bot_tl(bot), *(render.user_tl(u) for u in users.values())]
    if channel is not None:
        chat = render.channel_tl(channel, access_hash=server.bound_hash(channel.access_hash))
        return raw.types.messages.ChannelMessages(
            pts=channel.pts, count=len(tl), messages=tl, topics=[], chats=[chat], users=user_tl
        )
    return raw.types.messages.Messages(messages=tl, topics=[], chats=[], users=user_tl)


def delete(server, messages: list[Message]) -> int:
    now = server.now()
    done: dict[int, list[int]] = {}
    for msg in messages:
        if msg is None or msg.deleted:
            continue
        if msg.chat_id > 0 and now - msg.date > limits.DELETE_WINDOW:
            continue  # the bot's 48 h are over: Telegram leaves the message (the count shows it)
        msg.deleted = True
        if msg.file is not None:
            msg.file.reference_renew(now)  # the reference it gave is void (limits.FILE_REFERENCE_LIFETIME)
        done.setdefault(msg.chat_id, []).append(msg.id)
    for chat_id, ids in done.items():
        server.emit(Event("delete", chat_id, ids))
    return sum(len(ids) for ids in done.values())
