"""The raw TL functions the in-memory Telegram answers, as Telegram does for a bot.

Each handler runs under the server's lock, takes the parsed request, and returns the TL result
(or raises RpcFault with Telegram's error). Only what a bot like Courier calls is here; anything
else answers INPUT_METHOD_INVALID and is logged, so a new call shows up in tests at once.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import urllib.parse
from datetime import UTC, datetime, timedelta

from pyrogram import raw

from botapp import clock
from botapp.telegram import limits
from inmemory_telegram import render
from inmemory_telegram.core import ServerCore
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.state import Channel, Event, File, Invite, Message, Upload, User, buttons_of, channel_raw_id, media_of

METHODS = {}


def method(name):
    def register(fn):
        METHODS[name] = fn
        return fn

    return register


def now_ts() -> int:
    return int(clock.now().timestamp())


# --- peers ---------------------------------------------------------------------------------------


def resolve_user(server: ServerCore, peer) -> User:
    if isinstance(peer, (raw.types.InputPeerUser, raw.types.InputUser)):
        user = server.users.get(peer.user_id)
        if user is not None and peer.access_hash == user.access_hash:
            return user
    raise RpcFault("PEER_ID_INVALID")


def resolve_channel(server: ServerCore, peer) -> Channel:
    if isinstance(peer, (raw.types.InputPeerChannel, raw.types.InputChannel)):
        channel = server.channels.get(peer.channel_id)
        if channel is not None and peer.access_hash == channel.access_hash:
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


# --- connection and sign-in --------------------------------------------------------------------------


@method("help.GetConfig")
def get_config(server, query):
    return raw.types.Config(
        date=now_ts(),
        expires=now_ts() + 3600,
        test_mode=False,
        this_dc=render.DC_ID,
        dc_options=[raw.types.DcOption(id=render.DC_ID, ip_address="127.0.0.1", port=443)],
        dc_txt_domain_name="offline",
        chat_size_max=200,
        megagroup_size_max=200000,
        forwarded_count_max=limits.IDS_PER_CALL,
        online_update_period_ms=210000,
        offline_blur_timeout_ms=5000,
        offline_idle_timeout_ms=30000,
        online_cloud_timeout_ms=300000,
        notify_cloud_delay_ms=30000,
        notify_default_delay_ms=1500,
        push_chat_period_ms=60000,
        push_chat_limit=2,
        edit_time_limit=172800,
        revoke_time_limit=int(limits.DELETE_WINDOW.total_seconds()),
        revoke_pm_time_limit=int(limits.DELETE_WINDOW.total_seconds()),
        rating_e_decay=2419200,
        stickers_recent_limit=200,
        channels_read_media_period=604800,
        call_receive_timeout_ms=20000,
        call_ring_timeout_ms=90000,
        call_connect_timeout_ms=30000,
        call_packet_timeout_ms=10000,
        me_url_prefix="https://t.me/",
        caption_length_max=limits.CAPTION_LENGTH,
        message_length_max=limits.TEXT_LENGTH,
        webfile_dc_id=4,
    )


@method("auth.ImportBotAuthorization")
def import_bot_authorization(server, query):
    if query.bot_auth_token != server.bot.token or server.bot.revoked:
        raise RpcFault("ACCESS_TOKEN_INVALID")
    return raw.types.auth.Authorization(user=render.bot_tl(server.bot))


@method("updates.GetState")
def get_state(server, query):
    return state_tl(server)


# updates.getDifference answers a large difference in slices (updates.differenceSlice, with the
# intermediate state to ask from next). How many events Telegram puts in a slice is not documented:
# inferred, and kept small, so a client must ask again as Telegram may make it.
DIFFERENCE_SLICE = 100
# How long Telegram keeps an event a bot has not fetched: not documented for MTProto; the Bot API
# keeps undelivered updates 24 hours (core.telegram.org/bots/api#getting-updates). Older events are
# forgotten, and a client asking from before one gets updates.differenceTooLong.
UPDATES_KEPT = timedelta(hours=24)
# "If the remote pts is too big (> ~4000000), this field [pts_total_limit] will default to 1000000"
# (core.telegram.org/method/updates.getDifference): a client further behind gets differenceTooLong.
PTS_TOTAL_LIMIT = 1_000_000


def state_tl(server: ServerCore, *, pts: int | None = None, qts: int | None = None) -> raw.types.updates.State:
    return raw.types.updates.State(
        pts=server.pts if pts is None else pts, qts=server.qts if qts is None else qts, date=now_ts(), seq=0, unread_count=0
    )


@method("updates.GetDifference")
def get_difference(server, query):
    """What happened after the client's (pts, qts): what runbot missed while down. Messages by pts,
    bot events by qts alone (a qts of 0 asks for every bot event still kept; the docs say nothing of
    `date` but "see updates", so it narrows nothing here), oldest first, at most DIFFERENCE_SLICE
    events a slice. The bot's own messages move pts but are not handed back (they are not updates
    for it: a reply comes back as the answer to its send)."""
    horizon = clock.now() - UPDATES_KEPT
    while server.update_log and server.update_log[0][3] < horizon:
        kind, value, _, _ = server.update_log.popleft()
        server.forgotten[kind] = max(server.forgotten[kind], value)
    limit = query.pts_total_limit or PTS_TOTAL_LIMIT
    if query.pts < server.forgotten["pts"] or query.pts + limit < server.pts:
        return raw.types.updates.DifferenceTooLong(pts=server.pts)
    if query.pts >= server.pts and query.qts >= server.qts:
        return raw.types.updates.DifferenceEmpty(date=now_ts(), seq=0)
    events = [
        (kind, value, record)
        for kind, value, record, _ in server.update_log
        if value > (query.pts if kind == "pts" else query.qts)
    ]
    part, more = events[:DIFFERENCE_SLICE], len(events) > DIFFERENCE_SLICE
    messages = [record for kind, _, record in part if kind == "pts"]
    others = [record for kind, _, record in part if kind == "qts"]
    users = {m.sender_id: server.users[m.sender_id] for m in messages if m.sender_id in server.users}
    users.update({u.user_id: server.users[u.user_id] for u in others if u.user_id in server.users})
    channels = {
        channel_raw_id(m.forward_from[0]): server.channels[channel_raw_id(m.forward_from[0])]
        for m in messages
        if m.forward_from and channel_raw_id(m.forward_from[0]) in server.channels
    }
    fields = {
        "new_messages": [render.message_tl(m, bot_id=server.bot.id) for m in messages],
        "new_encrypted_messages": [],
        "other_updates": others,
        "chats": [render.channel_tl(c) for c in channels.values()],
        "users": [render.bot_tl(server.bot), *(render.user_tl(u) for u in users.values())],
    }
    if not more:
        return raw.types.updates.Difference(**fields, state=state_tl(server))
    last = {kind: value for kind, value, _ in part}  # the last value of each kind in this slice
    intermediate = state_tl(server, pts=last.get("pts", query.pts), qts=last.get("qts", query.qts))
    return raw.types.updates.DifferenceSlice(**fields, intermediate_state=intermediate)


@method("updates.GetChannelDifference")
def get_channel_difference(server, query):
    """The channel's posts the bot was told of after `pts` (kurigram asks at start, and when no
    update came for a while, for every channel whose pts it stored from an update)."""
    channel = resolve_channel(server, query.channel)
    if not channel.bot_is_admin:
        raise RpcFault("CHANNEL_PRIVATE")
    missed = [msg for pts, msg in channel.posts if pts > query.pts]
    if not missed:
        return raw.types.updates.ChannelDifferenceEmpty(pts=channel.pts, final=True)
    return raw.types.updates.ChannelDifference(
        pts=channel.pts,
        final=True,
        new_messages=[render.message_tl(m, bot_id=server.bot.id) for m in missed],
        other_updates=[],
        chats=[render.channel_tl(channel)],
        users=[render.bot_tl(server.bot)],
    )


@method("users.GetFullUser")
def get_full_user(server, query):
    if not isinstance(query.id, raw.types.InputUserSelf):
        user = resolve_user(server, query.id)
        full_id, users = user.id, [render.user_tl(user)]
    else:
        full_id, users = server.bot.id, [render.bot_tl(server.bot)]
    return raw.types.users.UserFull(
        full_user=raw.types.UserFull(
            id=full_id, settings=raw.types.PeerSettings(), notify_settings=raw.types.PeerNotifySettings(), common_chats_count=0
        ),
        chats=[],
        users=users,
    )


@method("users.GetUsers")
def get_users(server, query):
    found = []
    for wanted in query.id:
        if isinstance(wanted, raw.types.InputUserSelf):
            found.append(render.bot_tl(server.bot))
            continue
        user = server.users.get(getattr(wanted, "user_id", None))
        # Inferred: with access_hash 0 a bot gets the users it has met (they wrote to it), like a
        # "min" peer; with a hash, the hash must match.
        if user is None or (wanted.access_hash == 0 and not user.known_to_bot):
            continue
        if wanted.access_hash not in (0, user.access_hash):
            continue
        found.append(render.user_tl(user))
    return found


@method("channels.GetChannels")
def get_channels(server, query):
    chats = []
    for wanted in query.id:
        channel = server.channels.get(getattr(wanted, "channel_id", None))
        # Inferred: access_hash 0 resolves a channel the bot is an admin of.
        if channel is None or not channel.bot_is_admin or wanted.access_hash not in (0, channel.access_hash):
            raise RpcFault("CHANNEL_INVALID")
        chats.append(render.channel_tl(channel))
    return raw.types.messages.Chats(chats=chats)


# --- sending ---------------------------------------------------------------------------------------


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


@method("messages.SendMessage")
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


@method("messages.SendMedia")
def send_media(server, query):
    check_text(query.message, caption=True)
    return send(server, query, file=any_media_file(server, query.media))


# --- uploads and albums ------------------------------------------------------------------------


def store_part(server, file_id: int, part: int, data: bytes, *, total: int | None) -> bool:
    """One part of an upload (core.telegram.org/api/files): at most 512 KiB, numbered from 0, at
    most 4000 parts (2000 MiB) for a bot. The rule that every part but the last is the same size,
    divisible by 1 KiB and dividing 512 KiB, is checked when the file is put together."""
    if not data:
        raise RpcFault("FILE_PART_EMPTY")
    if len(data) > limits.UPLOAD_PART_SIZE:
        raise RpcFault("FILE_PART_TOO_BIG")
    if not 0 <= part < (total or limits.UPLOAD_PARTS):
        raise RpcFault("FILE_PART_INVALID")
    upload = server.uploads.setdefault(file_id, Upload(big=total is not None, total=total))
    if upload.big != (total is not None) or upload.total != total:
        raise RpcFault("FILE_PART_SIZE_CHANGED")  # inferred: one file id is uploaded one way throughout
    upload.parts[part] = data
    return True


@method("upload.SaveFilePart")
def save_file_part(server, query):
    return store_part(server, query.file_id, query.file_part, query.bytes, total=None)


@method("upload.SaveBigFilePart")
def save_big_file_part(server, query):
    if not 0 < query.file_total_parts <= limits.UPLOAD_PARTS:
        raise RpcFault("FILE_PARTS_INVALID")
    return store_part(server, query.file_id, query.file_part, query.bytes, total=query.file_total_parts)


def uploaded_file(server, input_file, *, kind: str, mime_type: str) -> File:
    """The File an InputFile / InputFileBig names, once all its parts are in (the upload is used up)."""
    upload = server.uploads.pop(input_file.id, None)
    big = isinstance(input_file, raw.types.InputFileBig)
    parts = input_file.parts
    if upload is None or upload.big != big or sorted(upload.parts) != list(range(parts)) or (big and upload.total != parts):
        raise RpcFault("FILE_PARTS_INVALID")
    sizes = [len(upload.parts[i]) for i in range(parts)]
    if parts > 1 and (len(set(sizes[:-1])) != 1 or sizes[0] % 1024 or limits.UPLOAD_PART_SIZE % sizes[0] or sizes[-1] > sizes[0]):
        raise RpcFault("FILE_PART_SIZE_INVALID")
    data = b"".join(upload.parts[i] for i in range(parts))
    if not big:
        if len(data) > limits.UPLOAD_BIG_FILE:
            raise RpcFault("FILE_PARTS_INVALID")  # inferred: more than 10 MiB must go by saveBigFilePart
        if input_file.md5_checksum and hashlib.md5(data).hexdigest() != input_file.md5_checksum:  # noqa: S324 - Telegram's checksum
            raise RpcFault("MD5_CHECKSUM_INVALID")
    if kind == "photo" and len(data) > limits.PHOTO_SIZE:
        raise RpcFault("PHOTO_SAVE_FILE_INVALID")  # inferred error name for a photo over 10 MB
    file = server.new_file(kind, input_file.name)
    file.size, file.mime_type, file.sha256 = len(data), mime_type, hashlib.sha256(data).hexdigest()
    return file


def document_kind(attributes) -> str:
    """What Telegram makes of an uploaded document, from the attributes the client sent."""
    if any(isinstance(a, raw.types.DocumentAttributeAnimated) for a in attributes):
        return "animation"
    if any(isinstance(a, raw.types.DocumentAttributeVideo) for a in attributes):
        return "video"
    if any(isinstance(a, raw.types.DocumentAttributeAudio) for a in attributes):
        return "audio"
    return "document"


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


@method("messages.UploadMedia")
def upload_media(server, query):
    """Store a file for later sends, sending nothing. A bot names no chat (inputPeerEmpty, as
    core.telegram.org/method/messages.uploadMedia says) or one it can write to."""
    if not isinstance(query.peer, raw.types.InputPeerEmpty):
        resolve_chat(server, query.peer)
    return render.media_tl(any_media_file(server, query.media))


@method("messages.SendMultiMedia")
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


@method("messages.ForwardMessages")
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


@method("messages.GetMessages")
def get_messages(server, query):
    found = []
    for ref in query.id:
        msg = server.box.get(getattr(ref, "id", 0))
        if isinstance(ref, raw.types.InputMessageReplyTo):  # the message that `ref.id` replies to
            msg = server.box.get(msg.reply_to) if msg is not None and msg.reply_to else None
        found.append(msg)
    return messages_result(server, found, [getattr(r, "id", 0) for r in query.id])


@method("channels.GetMessages")
def channel_get_messages(server, query):
    channel = resolve_channel(server, query.channel)
    if not channel.bot_is_admin:
        raise RpcFault("CHANNEL_PRIVATE")
    ids = [getattr(r, "id", 0) for r in query.id]
    if len(ids) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")
    found = [server.channel_messages[channel.raw_id].get(i) for i in ids]
    return messages_result(server, found, ids, channel=channel)


def messages_result(server, found, ids, *, channel: Channel | None = None):
    tl, users = [], {}
    for msg, wanted in zip(found, ids, strict=False):
        if msg is None or msg.deleted:
            tl.append(raw.types.MessageEmpty(id=wanted))
            continue
        tl.append(render.message_tl(msg, bot_id=server.bot.id))
        if msg.chat_id > 0:
            users[msg.chat_id] = server.users[msg.chat_id]
    user_tl = [render.bot_tl(server.bot), *(render.user_tl(u) for u in users.values())]
    if channel is not None:
        return raw.types.messages.ChannelMessages(
            pts=channel.pts, count=len(tl), messages=tl, topics=[], chats=[render.channel_tl(channel)], users=user_tl
        )
    return raw.types.messages.Messages(messages=tl, topics=[], chats=[], users=user_tl)


# --- changing and deleting ----------------------------------------------------------------------------


def delete(server, messages: list[Message]) -> int:
    now = clock.now()
    done: dict[int, list[int]] = {}
    for msg in messages:
        if msg is None or msg.deleted:
            continue
        if msg.chat_id > 0 and now - msg.date > limits.DELETE_WINDOW:
            continue  # the bot's 48 h are over: Telegram leaves the message (the count shows it)
        msg.deleted = True
        done.setdefault(msg.chat_id, []).append(msg.id)
    for chat_id, ids in done.items():
        server.emit(Event("delete", chat_id, ids))
    return sum(len(ids) for ids in done.values())


@method("messages.DeleteMessages")
def delete_messages(server, query):
    if len(query.id) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")  # inferred name
    count = delete(server, [server.box.get(i) for i in query.id])
    server.pts += count
    return raw.types.messages.AffectedMessages(pts=server.pts, pts_count=count)


@method("channels.DeleteMessages")
def channel_delete_messages(server, query):
    channel = resolve_channel(server, query.channel)
    if not channel.bot_is_admin:
        raise RpcFault("MESSAGE_DELETE_FORBIDDEN")
    if len(query.id) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")
    count = delete(server, [server.channel_messages[channel.raw_id].get(i) for i in query.id])
    channel.pts += count
    return raw.types.messages.AffectedMessages(pts=channel.pts, pts_count=count)


@method("messages.EditMessage")
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


@method("messages.SetBotCallbackAnswer")
def set_bot_callback_answer(server, query):
    found = server.callbacks.pop(query.query_id, None)
    if found is None or time.monotonic() - found[1] > limits.CALLBACK_ANSWER_WINDOW.total_seconds():
        raise RpcFault("QUERY_ID_INVALID")
    if query.message and limits.utf16_length(query.message) > limits.CALLBACK_ANSWER_LENGTH:
        raise RpcFault("MESSAGE_TOO_LONG")  # inferred name; the 200-character limit is the Bot API's
    if query.message:
        server.emit(Event("answer", found[0], [], text=query.message, alert=bool(query.alert)))
    return True


@method("channels.GetParticipant")
def get_participant(server, query):
    channel = resolve_channel(server, query.channel)
    if not channel.bot_is_admin:
        raise RpcFault("CHAT_ADMIN_REQUIRED")
    user = resolve_user(server, query.participant) if not isinstance(query.participant, raw.types.InputPeerSelf) else None
    if user is None:
        rights = raw.types.ChatAdminRights(
            post_messages=channel.bot_can_post,
            edit_messages=channel.bot_can_edit,
            delete_messages=True,
            invite_users=channel.bot_can_invite,
        )
        participant = raw.types.ChannelParticipantAdmin(
            user_id=server.bot.id, promoted_by=server.bot.id, date=0, admin_rights=rights
        )
        users = [render.bot_tl(server.bot)]
    elif user.id in channel.members:
        participant = raw.types.ChannelParticipant(user_id=user.id, date=0)
        users = [render.user_tl(user)]
    else:
        raise RpcFault("USER_NOT_PARTICIPANT")
    return raw.types.channels.ChannelParticipant(participant=participant, chats=[render.channel_tl(channel)], users=users)


# --- invite links ----------------------------------------------------------------------------------------


@method("messages.ExportChatInvite")
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
    if query.expire_date is not None and query.expire_date <= now_ts():
        raise RpcFault("EXPIRE_DATE_INVALID")
    link = f"https://t.me/+{secrets.token_urlsafe(12)}"
    channel.invites[link] = Invite(
        link=link,
        date=clock.now(),
        expire_date=datetime.fromtimestamp(query.expire_date, tz=UTC) if query.expire_date else None,
        request_needed=bool(query.request_needed),
    )
    return raw.types.ChatInviteExported(
        link=link,
        admin_id=server.bot.id,
        date=now_ts(),
        expire_date=query.expire_date,
        request_needed=query.request_needed or None,
        title=query.title,
    )


@method("messages.UpdatePinnedMessage")
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
