"""auth.*: a bot signs in with its token, and carries its authorization to another data centre."""

from __future__ import annotations

import secrets

from pyrogram import raw

from inmemory_telegram import limits, render, wire
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
)

METHODS = Table()

EXPORTED_BYTES = 32  # inferred: the length of an exported authorization's bytes (opaque to clients)


@METHODS.method("auth.ImportBotAuthorization")
def import_bot_authorization(server, query):
    bot = next((b for b in server.bots.values() if b.token == query.bot_auth_token), None)
    if bot is None or bot.revoked:
        raise RpcFault("ACCESS_TOKEN_INVALID")
    endpoint = server.current_endpoint()
    server.authorized[(endpoint.dc_id, wire.key_id(endpoint.auth_key))] = bot.id
    return raw.types.auth.Authorization(user=render.bot_tl(bot))


@METHODS.method("auth.ExportAuthorization")
def export_authorization(server, query):
    """Bytes that sign a key in on DC `dc_id` (core.telegram.org/api/datacenter): asked on a
    connection signed in already, for another production DC (DC_ID_INVALID otherwise)."""
    if query.dc_id not in limits.DCS or query.dc_id == server.current_endpoint().dc_id:
        raise RpcFault("DC_ID_INVALID")
    bot = server.acting_bot()
    data = secrets.token_bytes(EXPORTED_BYTES)
    server.exported[data] = (query.dc_id, bot.id)
    return raw.types.auth.ExportedAuthorization(id=bot.id, bytes=data)


@METHODS.method("auth.ImportAuthorization")
def import_authorization(server, query):
    """Sign the connection's key in to the bot with bytes exported for this DC. Inferred: the bytes
    serve once, for the bot that exported them, and only on the DC they were exported for
    (AUTH_BYTES_INVALID otherwise)."""
    endpoint = server.current_endpoint()
    bot = server.bots.get(query.id)
    if bot is None or server.exported.pop(query.bytes, None) != (endpoint.dc_id, bot.id):
        raise RpcFault("AUTH_BYTES_INVALID")
    if bot.revoked:
        raise RpcFault("AUTH_KEY_UNREGISTERED")
    server.authorized[(endpoint.dc_id, wire.key_id(endpoint.auth_key))] = bot.id
    return raw.types.auth.Authorization(user=render.bot_tl(bot))
