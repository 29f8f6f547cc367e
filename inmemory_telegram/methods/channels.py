"""channels.*: the channels a bot administers: their posts, deletions, members."""

from __future__ import annotations

from pyrogram import raw

from inmemory_telegram import limits, render
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
    delete,
    messages_result,
    resolve_channel,
    resolve_user,
)

METHODS = Table()


@METHODS.method("channels.GetChannels")
def get_channels(server, query):
    chats = []
    for wanted in query.id:
        channel = server.channels.get(getattr(wanted, "channel_id", None))
        # Inferred: access_hash 0 resolves a channel the bot is an admin of; a hash is the bot's own.
        if channel is None or not server.is_admin(channel):
            raise RpcFault("CHANNEL_INVALID")
        access_hash = server.bound_hash(channel.access_hash)
        if wanted.access_hash not in (0, access_hash):
            raise RpcFault("CHANNEL_INVALID")
        chats.append(render.channel_tl(channel, access_hash=access_hash))
    return raw.types.messages.Chats(chats=chats)


@METHODS.method("channels.GetMessages")
def channel_get_messages(server, query):
    channel = resolve_channel(server, query.channel)
    if not server.is_admin(channel):
        raise RpcFault("CHANNEL_PRIVATE")
    ids = [getattr(r, "id", 0) for r in query.id]
    if len(ids) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")
    found = [server.channel_messages[channel.raw_id].get(i) for i in ids]
    return messages_result(server, found, ids, channel=channel)


@METHODS.method("channels.DeleteMessages")
def channel_delete_messages(server, query):
    channel = resolve_channel(server, query.channel)
    if not server.is_admin(channel):
        raise RpcFault("MESSAGE_DELETE_FORBIDDEN")
    if len(query.id) > limits.IDS_PER_CALL:
        raise RpcFault("LIMIT_INVALID")
    count = delete(server, [server.channel_messages[channel.raw_id].get(i) for i in query.id])
    channel.pts += count
    return raw.types.messages.AffectedMessages(pts=channel.pts, pts_count=count)


@METHODS.method("channels.GetParticipant")
def get_participant(server, query):
    channel = resolve_channel(server, query.channel)
    if not server.is_admin(channel):
        raise RpcFault("CHAT_ADMIN_REQUIRED")
    user = resolve_user(server, query.participant) if not isinstance(query.participant, raw.types.InputPeerSelf) else None
    if user is None:
        bot = server.acting_bot()
        if bot is server.bot:
            rights = raw.types.ChatAdminRights(
                post_messages=channel.bot_can_post,
                edit_messages=channel.bot_can_edit,
                delete_messages=True,
                invite_users=channel.bot_can_invite,
            )
        else:  # an extra bot's rights are not modelled: none beyond reading, the least an admin has
            rights = raw.types.ChatAdminRights()
        participant = raw.types.ChannelParticipantAdmin(user_id=bot.id, promoted_by=server.bot.id, date=0, admin_rights=rights)
        users = [render.bot_tl(bot)]
    elif user.id in channel.members:
        participant = raw.types.ChannelParticipant(user_id=user.id, date=0)
        users = [render.user_tl(user)]
    else:
        raise RpcFault("USER_NOT_PARTICIPANT")
    return raw.types.channels.ChannelParticipant(
        participant=participant,
        chats=[render.channel_tl(channel, access_hash=server.bound_hash(channel.access_hash))],
        users=users,
    )
