"""contacts.*: a public username resolved to its channel or user (bots and user sessions alike)."""

from __future__ import annotations

import re

from pyrogram import raw

from inmemory_telegram import render
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import Table

METHODS = Table()

# Telegram's usernames: "a-z, 0-9 and underscores", at least 5 characters (its apps' rule), at
# most 32, a letter first; the error names are contacts.resolveUsername's.
USERNAME = re.compile(r"^[a-z][a-z0-9_]{3,30}[a-z0-9]\Z", re.IGNORECASE)


@METHODS.method("contacts.ResolveUsername")
def resolve_username(server, query):
    name = query.username.lower()
    if not USERNAME.match(name):
        raise RpcFault("USERNAME_INVALID")
    for channel in server.channels.values():
        if channel.username.lower() == name:
            return raw.types.contacts.ResolvedPeer(
                peer=raw.types.PeerChannel(channel_id=channel.raw_id),
                chats=[render.channel_tl(channel, access_hash=server.bound_hash(channel.access_hash))],
                users=[],
            )
    for user in server.users.values():
        if user.username.lower() == name:
            return raw.types.contacts.ResolvedPeer(
                peer=raw.types.PeerUser(user_id=user.id), chats=[], users=[render.user_tl(user)]
            )
    raise RpcFault("USERNAME_NOT_OCCUPIED")
