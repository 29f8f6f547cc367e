"""Records -> the TL objects Telegram sends (what kurigram's parser reads)."""

from __future__ import annotations

from collections.abc import Callable

from pyrogram import raw

from inmemory_telegram import limits
from inmemory_telegram.state import Bot, Channel, File, Message, User, channel_raw_id

DC_ID = limits.HOME_DC  # the bot's data centre


def ts(moment) -> int:
    return int(moment.timestamp())


def bot_tl(bot: Bot) -> raw.types.User:
    return raw.types.User(
        id=bot.id,
        is_self=True,
        bot=True,
        access_hash=1,
        first_name=bot.first_name,
        username=bot.username,
        bot_info_version=1,
    )


def self_tl(user: User) -> raw.types.User:
    """A signed-in account's own user, as its session sees it."""
    tl = user_tl(user)
    tl.is_self = True
    return tl


def user_tl(user: User) -> raw.types.User:
    return raw.types.User(
        id=user.id,
        access_hash=user.access_hash,
        first_name=user.first_name or None,
        last_name=user.last_name or None,
        username=user.username or None,
        lang_code=user.language_code or None,
        deleted=user.deactivated or None,
    )


def channel_tl(channel: Channel, *, access_hash: int | None = None) -> raw.types.Channel:
    """`access_hash`: the one the account it goes to knows (None: the main bot's)."""
    return raw.types.Channel(
        id=channel.raw_id,
        title=channel.title,
        photo=raw.types.ChatPhotoEmpty(),
        date=0,
        access_hash=channel.access_hash if access_hash is None else access_hash,
        broadcast=True,
        noforwards=channel.noforwards or None,
        restriction_reason=[],
        username=channel.username or None,
        usernames=[],
    )


def peer_tl(chat_id: int):
    if chat_id > 0:
        return raw.types.PeerUser(user_id=chat_id)
    return raw.types.PeerChannel(channel_id=channel_raw_id(chat_id))


# What the account it goes to knows of a file: its access hash and its file reference (None: the main
# bot's own, the file's). accounts.Accounts.bound_hash / bound_reference give another account's.
FileView = Callable[[File], tuple[int, bytes]]


def media_tl(file: File, view: FileView | None = None):
    access_hash, file_reference = (file.access_hash, file.file_reference) if view is None else view(file)
    if file.kind == "photo":
        return raw.types.MessageMediaPhoto(
            photo=raw.types.Photo(
                id=file.id,
                access_hash=access_hash,
                file_reference=file_reference,
                date=0,
                sizes=[raw.types.PhotoSize(type="x", w=800, h=600, size=file.size)],
                dc_id=file.dc_id,
            )
        )
    attributes = [raw.types.DocumentAttributeFilename(file_name=file.name.rsplit("/", 1)[-1] or "file")]
    if file.kind == "animation":
        attributes += [raw.types.DocumentAttributeAnimated(), raw.types.DocumentAttributeVideo(duration=1, w=320, h=240)]
    elif file.kind == "video":
        attributes.append(raw.types.DocumentAttributeVideo(duration=1, w=640, h=360, supports_streaming=True))
    elif file.kind == "audio":
        attributes.append(raw.types.DocumentAttributeAudio(duration=1, title=file.name))
    return raw.types.MessageMediaDocument(
        document=raw.types.Document(
            id=file.id,
            access_hash=access_hash,
            file_reference=file_reference,
            date=0,
            mime_type=file.mime_type,
            size=file.size,
            dc_id=file.dc_id,
            attributes=attributes,
        )
    )


def message_tl(msg: Message, *, bot_id: int, view: FileView | None = None):
    peer = peer_tl(msg.chat_id)
    reply = raw.types.MessageReplyHeader(reply_to_msg_id=msg.reply_to) if msg.reply_to else None
    if msg.service:
        return raw.types.MessageService(
            id=msg.id,
            peer_id=peer,
            date=ts(msg.date),
            action=msg.action or raw.types.MessageActionChatEditTitle(title="Storage"),
            out=(msg.out and msg.chat_id > 0) or None,
            from_id=raw.types.PeerUser(user_id=msg.sender_id) if msg.sender_id else None,
            reply_to=reply,
            silent=msg.silent or None,
        )
    fwd = None
    if msg.forward_from is not None:
        fwd = raw.types.MessageFwdHeader(
            date=ts(msg.date), from_id=peer_tl(msg.forward_from[0]), channel_post=msg.forward_from[1]
        )
    return raw.types.Message(
        id=msg.id,
        peer_id=peer,
        date=ts(msg.date),
        message=msg.text,
        out=(msg.out and msg.chat_id > 0) or None,
        post=msg.chat_id < 0 or None,
        from_id=raw.types.PeerUser(user_id=msg.sender_id) if msg.sender_id else None,
        media=media_tl(msg.file, view) if msg.file else None,
        entities=msg.entities or None,
        reply_markup=msg.reply_markup,
        noforwards=msg.noforwards or None,
        fwd_from=fwd,
        grouped_id=msg.grouped_id,
        reply_to=reply,
        pinned=msg.pinned or None,
        restriction_reason=[],
    )
