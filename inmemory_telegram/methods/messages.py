"""messages.*: what a bot sends, forwards, reads, edits, deletes, pins and links to."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

from pyrogram import raw

from inmemory_telegram import limits, render
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
    check_markup,
    check_text,
    delete,
    messages_result,
    new_message_updates,
    now_ts,
    resolve_channel,
    resolve_chat,
    writable,
)
from inmemory_telegram.methods.upload import document_kind, uploaded_file
from inmemory_telegram.state import Event, File, Invite, buttons_of, media_of

METHODS = Table()


@METHODS.method("messages.SendMessage")
def send_message(server, query):
    check_text(query.message, caption=False)
    return send(server, query, file=None)


def send(server, query, *, file):
    """What sendMessage and sendMedia share: checks, the random_id, the message, its updates."""
    check_markup(query.reply_markup)
    paid = bool(query.allow_paid_floodskip)
    chat_id, user, channel = writable(server, query.peer, paid=paid)
    server.claim_random_ids([query.random_id])
    reply_to = getattr(query.reply_to, "reply_to_msg_id", None)
    if reply_to is not None:
        replied = server.stored(chat_id, reply_to)
        if replied is None or replied.deleted:
            raise RpcFault("REPLY_MESSAGE_ID_INVALID")  # inferred: the reply_to_msg_id names no message there
    msg = server.new_message(
        chat_id,
        out=True,
        text=query.message,
        entities=list(query.entities or []),
        file=file,
        reply_markup=query.reply_markup,
        noforwards=bool(query.noforwards),
        sender_id=server.bot.id if chat_id > 0 else None,
        paid=paid,
        reply_to=reply_to,
    )
    server.emit(
        Event(
            "send",
            chat_id,
            [msg.id],
            text=msg.text,
            media=media_of(file),
            buttons=buttons_of(msg.reply_markup),
            reply_to=reply_to,
        )
    )
    return new_message_updates(server, [msg], [query.random_id], user, channel)


EXTERNAL_KINDS = {".mp4": "video", ".gif": "animation", ".mp3": "audio", ".ogg": "audio", ".m4a": "audio"}


def media_file(server, media):
    if isinstance(media, (raw.types.InputMediaDocument, raw.types.InputMediaPhoto)):
        ref = media.id
        file = server.files.get(getattr(ref, "id", None))
        if file is None or ref.access_hash != file.access_hash:
            raise RpcFault("MEDIA_EMPTY")
        if ref.file_reference != file.file_reference:
            raise RpcFault("FILE_REFERENCE_EXPIRED")
        return file
    if isinstance(media, raw.types.InputMediaPhotoExternal):
        return server.new_file("photo", media.url)
    if isinstance(media, raw.types.InputMediaDocumentExternal):
        # Inferred: Telegram sniffs a fetched file's type; the extension stands in for that here.
        suffix = "." + media.url.rsplit(".", 1)[-1].lower() if "." in media.url.rsplit("/", 1)[-1] else ""
        return server.new_file(EXTERNAL_KINDS.get(suffix, "document"), media.url)
    raise RpcFault("MEDIA_INVALID")


@METHODS.method("messages.SendMedia")
def send_media(server, query):
    check_text(query.message, caption=True)
    return send(server, query, file=any_media_file(server, query.media))


def any_media_file(server, media) -> File:
    """media_file, plus files uploaded in parts just before (InputMediaUploaded*)."""
    if isinstance(media, raw.types.InputMediaUploadedPhoto):
        return uploaded_file(server, media.file, kind="photo", mime_type="image/jpeg")
    if isinstance(media, raw.types.InputMediaUploadedDocument):
        kind = "document" if media.force_file else document_kind(media.attributes)
        file = uploaded_file(server, media.file, kind=kind, mime_type=media.mime_type)
        names = [a.file_name for a in media.attributes if isinstance(a, raw.types.DocumentAttributeFilename)]
        file.name = names[0] if names else file.name
        return file
    return media_file(server, media)


@METHODS.method("messages.UploadMedia")
def upload_media(server, query):
    """Store a file for later sends, sending nothing. A bot names no chat (inputPeerEmpty, as
    core.telegram.org/method/messages.uploadMedia says) or one it can write to."""
    if not isinstance(query.peer, raw.types.InputPeerEmpty):
        resolve_chat(server, query.peer)
    return render.media_tl(any_media_file(server, query.media))


@METHODS.method("messages.SendMultiMedia")
def send_multi_media(server, query):
    """An album: 2 to 10 media of one group (photos with videos; documents only with documents;
    audio only with audio), each with its own caption, one request."""
    items = list(query.multi_media)
    if len(items) > limits.ALBUM_SIZE:
        raise RpcFault("MULTI_MEDIA_TOO_LONG")
    if len(items) < 2:
        raise RpcFault("MEDIA_INVALID")  # inferred: the Bot API documents 2-10 items
    for item in items:
        check_text(item.message, caption=True)
    files = [any_media_file(server, item.media) for item in items]
    if None in {limits.ALBUM_GROUPS.get(f.kind) for f in files} or len({limits.ALBUM_GROUPS[f.kind] for f in files}) > 1:
        raise RpcFault("MEDIA_INVALID")  # inferred error name for kinds that may not share an album
    paid = bool(query.allow_paid_floodskip)
    # An album counts each of its messages against the overall rates (rates.COUNT_PER_MESSAGE).
    chat_id, user, channel = writable(server, query.peer, paid=paid, messages=len(items))
    server.claim_random_ids([item.random_id for item in items])
    grouped_id = next(server._group_ids)
    messages = []
    for item, file in zip(items, files, strict=True):
        msg = server.new_message(
            chat_id,
            out=True,
            text=item.message,
            entities=list(item.entities or []),
            file=file,
            noforwards=bool(query.noforwards),
            sender_id=server.bot.id if chat_id > 0 else None,
            paid=paid,
            grouped_id=grouped_id,
        )
        messages.append(msg)
        server.emit(Event("send", chat_id, [msg.id], text=msg.text, media=media_of(file)))
    return new_message_updates(server, messages, [item.random_id for item in items], user, channel)


@METHODS.method("messages.ForwardMessages")
def forward_messages(server, query):
    if len(query.id) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")  # inferred name; the 100-id limit is documented
    from_id, _, from_channel = resolve_chat(server, query.from_peer)
    if from_channel is not None and not from_channel.bot_is_admin:
        raise RpcFault("CHANNEL_PRIVATE")  # inferred: a private channel the bot was removed from
    if from_channel is not None and from_channel.noforwards:
        raise RpcFault("CHAT_FORWARDS_RESTRICTED")
    # Each id counts against the overall rates (rates.COUNT_PER_MESSAGE), as a message delivered.
    chat_id, user, channel = writable(server, query.to_peer, paid=bool(query.allow_paid_floodskip), messages=len(query.id))
    server.claim_random_ids(query.random_id)
    sent, random_ids = [], []
    groups: dict[int, int] = {}  # an album forwarded in one call stays an album, with a grouped_id of its own
    for source_id, random_id in zip(query.id, query.random_id, strict=False):
        source = server.stored(from_id, source_id)
        if source is None or source.deleted or source.service:
            continue  # Telegram skips ids it cannot forward and forwards the rest
        header = None if query.drop_author else ((from_id, source_id) if from_id < 0 else None)
        msg = server.new_message(
            chat_id,
            out=True,
            text="" if (query.drop_media_captions and source.file) else source.text,
            entities=list(source.entities),
            file=source.file,
            noforwards=bool(query.noforwards),
            forward_from=header,
            sender_id=server.bot.id if chat_id > 0 else None,
            paid=bool(query.allow_paid_floodskip),
            grouped_id=groups.setdefault(source.grouped_id, next(server._group_ids)) if source.grouped_id else None,
        )
        sent.append(msg)
        random_ids.append(random_id)
        server.emit(Event("copy", chat_id, [msg.id], text=msg.text, media=media_of(msg.file)))
    if not sent:
        raise RpcFault("MESSAGE_ID_INVALID")
    return new_message_updates(server, sent, random_ids, user, channel)


@METHODS.method("messages.GetHistory")
def get_history(server, query):
    """A channel's posts, newest first, as a person's account reads them: any public channel's
    (one with a username), a private one's only as a member. Bots may not call it at all
    (core.USER_ONLY: BOT_METHOD_INVALID, as core.telegram.org/method/messages.getHistory lists)."""
    channel = resolve_channel(server, query.peer)
    if not channel.username and server.caller.id not in channel.members:
        raise RpcFault("CHANNEL_PRIVATE")
    posts = sorted((m for m in server.channel_messages[channel.raw_id].values() if not m.deleted), key=lambda m: -m.id)
    if query.offset_id:
        posts = [m for m in posts if m.id < query.offset_id]
    if query.max_id:
        posts = [m for m in posts if m.id < query.max_id]
    if query.min_id:
        posts = [m for m in posts if m.id > query.min_id]
    limit = min(query.limit, limits.HISTORY_LIMIT) if query.limit > 0 else limits.HISTORY_LIMIT
    page = posts[max(query.add_offset, 0) :][:limit]
    return raw.types.messages.ChannelMessages(
        pts=channel.pts,
        count=len(posts),
        messages=[render.message_tl(m, bot_id=server.bot.id, view=server.file_view()) for m in page],
        topics=[],
        chats=[render.channel_tl(channel, access_hash=server.bound_hash(channel.access_hash))],
        users=[],
    )


@METHODS.method("messages.GetMessages")
def get_messages(server, query):
    found = []
    for ref in query.id:
        msg = server.box.get(getattr(ref, "id", 0))
        if isinstance(ref, raw.types.InputMessageReplyTo):  # the message that `ref.id` replies to
            msg = server.box.get(msg.reply_to) if msg is not None and msg.reply_to else None
        found.append(msg)
    return messages_result(server, found, [getattr(r, "id", 0) for r in query.id])


@METHODS.method("messages.DeleteMessages")
def delete_messages(server, query):
    if len(query.id) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")  # inferred name
    count = delete(server, [server.box.get(i) for i in query.id])
    server.pts += count
    return raw.types.messages.AffectedMessages(pts=server.pts, pts_count=count)


@METHODS.method("messages.EditMessage")
def edit_message(server, query):
    chat_id, user, channel = resolve_chat(server, query.peer)
    msg = server.stored(chat_id, query.id)
    if msg is None or msg.deleted:
        raise RpcFault("MESSAGE_ID_INVALID")
    if not msg.out:
        # A bot edits its own messages; in a channel also the posts of others, with the admin right
        # "edit messages of others" (core.telegram.org: messages.editMessage, MESSAGE_AUTHOR_REQUIRED).
        if channel is None:
            raise RpcFault("MESSAGE_ID_INVALID")
        if not (channel.bot_is_admin and channel.bot_can_edit):
            raise RpcFault("MESSAGE_AUTHOR_REQUIRED")
    text = query.message if query.message is not None else msg.text
    markup = query.reply_markup
    if text == msg.text and (markup.write() if markup else b"") == (msg.reply_markup.write() if msg.reply_markup else b""):
        raise RpcFault("MESSAGE_NOT_MODIFIED")
    check_text(text, caption=msg.file is not None)
    check_markup(markup)
    server.check_rate(chat_id, paid=False)
    # An edit of the buttons alone (no message) leaves the text and its formatting as they were.
    entities = list(query.entities or []) if query.message is not None else msg.entities
    msg.text, msg.entities, msg.reply_markup = text, entities, markup
    server.emit(Event("edit", chat_id, [msg.id], text=text, buttons=buttons_of(markup)))
    tl = render.message_tl(msg, bot_id=server.bot.id)
    if chat_id > 0:
        server.pts += 1
        update = raw.types.UpdateEditMessage(message=tl, pts=server.pts, pts_count=1)
    else:
        channel.pts += 1
        update = raw.types.UpdateEditChannelMessage(message=tl, pts=channel.pts, pts_count=1)
    return server.updates_tl([update], users=[user] if user else [], channels=[channel] if channel else [])


@METHODS.method("messages.SetBotCallbackAnswer")
def set_bot_callback_answer(server, query):
    found = server.callbacks.pop(query.query_id, None)
    if found is None or time.monotonic() - found[1] > limits.CALLBACK_ANSWER_WINDOW.total_seconds():
        raise RpcFault("QUERY_ID_INVALID")
    if query.message and limits.utf16_length(query.message) > limits.CALLBACK_ANSWER_LENGTH:
        raise RpcFault("MESSAGE_TOO_LONG")  # inferred name; the 200-character limit is the Bot API's
    if query.message:
        server.emit(Event("answer", found[0], [], text=query.message, alert=bool(query.alert)))
    return True


@METHODS.method("messages.ExportChatInvite")
def export_chat_invite(server, query):
    """A new invite link for a channel the bot administers: optionally expiring at `expire_date`,
    or needing an admin's approval (`request_needed`, which excludes a usage limit). Errors from
    core.telegram.org's page of the method: CHAT_ADMIN_REQUIRED, EXPIRE_DATE_INVALID,
    USAGE_LIMIT_INVALID."""
    _, _, channel = resolve_chat(server, query.peer)
    if channel is None:
        raise RpcFault("PEER_ID_INVALID")  # a bot has no invite links to a private chat
    if not (channel.bot_is_admin and channel.bot_can_invite):
        raise RpcFault("CHAT_ADMIN_REQUIRED")
    if query.request_needed and query.usage_limit:
        raise RpcFault("USAGE_LIMIT_INVALID")
    if query.expire_date is not None and query.expire_date <= now_ts(server):
        raise RpcFault("EXPIRE_DATE_INVALID")
    link = f"https://t.me/+{secrets.token_urlsafe(12)}"
    channel.invites[link] = Invite(
        link=link,
        date=server.now(),
        expire_date=datetime.fromtimestamp(query.expire_date, tz=UTC) if query.expire_date else None,
        request_needed=bool(query.request_needed),
    )
    return raw.types.ChatInviteExported(
        link=link,
        admin_id=server.bot.id,
        date=now_ts(server),
        expire_date=query.expire_date,
        request_needed=query.request_needed or None,
        title=query.title,
    )


@METHODS.method("messages.UpdatePinnedMessage")
def update_pinned_message(server, query):
    """Pin (or unpin) a message. Telegram's documents: a bot may pin in private chats and, as an admin
    with the right, in channels; pinning adds a service message ("pinned «…»", MessageActionPinMessage,
    replying to the pinned message) to the chat, without a notification when `silent` is set;
    unpinning adds none. The answer carries UpdatePinnedMessages and the service message's update.
    Inferred: the service message counts against the chat's send rate like a message."""
    chat_id, user, channel = writable(server, query.peer)
    msg = server.stored(chat_id, query.id)
    if msg is None or msg.deleted or msg.service:
        raise RpcFault("MESSAGE_ID_INVALID")
    msg.pinned = not query.unpin
    updates = []
    if chat_id > 0:
        server.pts += 1
        updates.append(
            raw.types.UpdatePinnedMessages(
                peer=render.peer_tl(chat_id), messages=[msg.id], pts=server.pts, pts_count=1, pinned=msg.pinned or None
            )
        )
    else:
        channel.pts += 1
        updates.append(
            raw.types.UpdatePinnedChannelMessages(
                channel_id=channel.raw_id, messages=[msg.id], pts=channel.pts, pts_count=1, pinned=msg.pinned or None
            )
        )
    if msg.pinned:
        service = server.new_message(
            chat_id,
            out=True,
            service=True,
            action=raw.types.MessageActionPinMessage(),
            reply_to=msg.id,
            silent=bool(query.silent),
            sender_id=server.bot.id if chat_id > 0 else None,
        )
        tl = render.message_tl(service, bot_id=server.bot.id)
        updates.append(
            raw.types.UpdateNewMessage(message=tl, pts=server.pts, pts_count=1)
            if chat_id > 0
            else raw.types.UpdateNewChannelMessage(message=tl, pts=channel.pts, pts_count=1)
        )
    server.emit(Event("pin" if msg.pinned else "unpin", chat_id, [msg.id]))
    return server.updates_tl(updates, users=[user] if user else [], channels=[channel] if channel else [])
