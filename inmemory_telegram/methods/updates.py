"""updates.*: the update state, and what a client missed while it was away (getDifference,
getChannelDifference)."""

from __future__ import annotations

from datetime import timedelta

from pyrogram import raw

from inmemory_telegram import render
from inmemory_telegram.core import ServerCore
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
    now_ts,
    resolve_channel,
)
from inmemory_telegram.state import channel_raw_id

METHODS = Table()


@METHODS.method("updates.GetState")
def get_state(server, query):
    if server.acting_bot() is not server.bot:  # an extra bot's own update stream is not modelled: empty
        return state_tl(server, pts=1, qts=1)
    return state_tl(server)


# updates.getDifference answers a large difference in slices (updates.differenceSlice, with the
# intermediate state to ask from next). How many events Telegram puts in a slice is not documented:
# inferred, and kept small, so a client must ask again as Telegram may make it.
DIFFERENCE_SLICE = 100


# How long Telegram keeps an event a bot has not fetched: not documented for MTProto; the Bot API
# keeps undelivered updates 24 hours (core.telegram.org/bots/api#getting-updates). Older events are
# forgotten, and a client asking from before one gets updates.differenceTooLong.
UPDATES_KEPT = timedelta(hours=24)


# The bot's own messages come back in getDifference's new_messages (out=True), as every other event
# of the account's pts sequence. Inferred: Telegram documents pts as the sequence of the common
# message box's events (core.telegram.org/api/updates), which a sent message moves, and getDifference
# as what came after the client's pts; it does not say in words that outgoing messages are among
# them, and clients (TDLib, Telethon) are written to take them from a difference and recognise those
# they know. A message deleted since is left out (no longer in the box).
OWN_MESSAGES_IN_DIFFERENCE = True


# "If the remote pts is too big (> ~4000000), this field [pts_total_limit] will default to 1000000"
# (core.telegram.org/method/updates.getDifference): a client further behind gets differenceTooLong.
PTS_TOTAL_LIMIT = 1_000_000


def state_tl(server: ServerCore, *, pts: int | None = None, qts: int | None = None) -> raw.types.updates.State:
    return raw.types.updates.State(
        pts=server.pts if pts is None else pts, qts=server.qts if qts is None else qts, date=now_ts(server), seq=0, unread_count=0
    )


@METHODS.method("updates.GetDifference")
def get_difference(server, query):
    """What happened after the client's (pts, qts): what runbot missed while down. Messages by pts,
    bot events by qts alone (a qts of 0 asks for every bot event still kept; the docs say nothing of
    `date` but "see updates", so it narrows nothing here), oldest first, at most DIFFERENCE_SLICE
    events a slice. The bot's own messages are among them (OWN_MESSAGES_IN_DIFFERENCE), those
    deleted since left out."""
    horizon = server.now() - UPDATES_KEPT
    while server.update_log and server.update_log[0][3] < horizon:
        kind, value, _, _ = server.update_log.popleft()
        server.forgotten[kind] = max(server.forgotten[kind], value)
    limit = query.pts_total_limit or PTS_TOTAL_LIMIT
    if query.pts < server.forgotten["pts"] or query.pts + limit < server.pts:
        return raw.types.updates.DifferenceTooLong(pts=server.pts)
    if query.pts >= server.pts and query.qts >= server.qts:
        return raw.types.updates.DifferenceEmpty(date=now_ts(server), seq=0)
    events = [
        (kind, value, record)
        for kind, value, record, _ in server.update_log
        if value > (query.pts if kind == "pts" else query.qts)
    ]
    part, more = events[:DIFFERENCE_SLICE], len(events) > DIFFERENCE_SLICE
    messages = [record for kind, _, record in part if kind == "pts" and (OWN_MESSAGES_IN_DIFFERENCE or not record.out)]
    messages = [m for m in messages if not (m.out and m.deleted)]
    others = [record for kind, _, record in part if kind == "qts"]
    users = {m.sender_id: server.users[m.sender_id] for m in messages if m.sender_id in server.users}
    users.update({m.chat_id: server.users[m.chat_id] for m in messages if m.out and m.chat_id in server.users})
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


@METHODS.method("updates.GetChannelDifference")
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
