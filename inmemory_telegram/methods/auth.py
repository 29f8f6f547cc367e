"""auth.*: a bot signs in with its token."""

from __future__ import annotations

from pyrogram import raw

from inmemory_telegram import render
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
)

METHODS = Table()


@METHODS.method("auth.ImportBotAuthorization")
def import_bot_authorization(server, query):
    if query.bot_auth_token != server.bot.token or server.bot.revoked:
        raise RpcFault("ACCESS_TOKEN_INVALID")
    return raw.types.auth.Authorization(user=render.bot_tl(server.bot))
