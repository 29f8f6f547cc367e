"""users.*: the users a bot may see."""

from __future__ import annotations

from pyrogram import raw

from inmemory_telegram import render
from inmemory_telegram.methods.common import (
    Table,
    resolve_user,
)

METHODS = Table()


@METHODS.method("users.GetFullUser")
def get_full_user(server, query):
    if not isinstance(query.id, raw.types.InputUserSelf):
        user = resolve_user(server, query.id)
        full_id, users = user.id, [render.user_tl(user)]
    elif server.caller is not None:  # a person's own account (a user session)
        full_id, users = server.caller.id, [render.self_tl(server.caller)]
    else:
        bot = server.acting_bot()
        full_id, users = bot.id, [render.bot_tl(bot)]
    return raw.types.users.UserFull(
        full_user=raw.types.UserFull(
            id=full_id, settings=raw.types.PeerSettings(), notify_settings=raw.types.PeerNotifySettings(), common_chats_count=0
        ),
        chats=[],
        users=users,
    )


@METHODS.method("users.GetUsers")
def get_users(server, query):
    found = []
    for wanted in query.id:
        if isinstance(wanted, raw.types.InputUserSelf):
            found.append(render.self_tl(server.caller) if server.caller is not None else render.bot_tl(server.acting_bot()))
            continue
        if server.acting_bot() is not server.bot:
            continue  # an extra bot has met no user (accounts.py)
        user = server.users.get(getattr(wanted, "user_id", None))
        # Inferred: with access_hash 0 a bot gets the users it has met (they wrote to it), like a
        # "min" peer; with a hash, the hash must match.
        if user is None or (wanted.access_hash == 0 and not user.known_to_bot):
            continue
        if wanted.access_hash not in (0, user.access_hash):
            continue
        found.append(render.user_tl(user))
    return found
