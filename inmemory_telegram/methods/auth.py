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
    if query.bot_auth_token != server.bot.token or server.bot.revoked:
        raise RpcFault("ACCESS_TOKEN_INVALID")
    return raw.types.auth.Authorization(user=render.bot_tl(server.bot))


@METHODS.method("auth.ExportAuthorization")
def export_authorization(server, query):
    """Bytes that sign a key in on DC `dc_id` (core.telegram.org/api/datacenter): asked on a
    connection signed in already, for another production DC (DC_ID_INVALID otherwise)."""
    if query.dc_id not in limits.DCS or query.dc_id == server.current_endpoint().dc_id:
        raise RpcFault("DC_ID_INVALID")
    data = secrets.token_bytes(EXPORTED_BYTES)
    server.exported[data] = query.dc_id
    return raw.types.auth.ExportedAuthorization(id=server.bot.id, bytes=data)


@METHODS.method("auth.ImportAuthorization")
def import_authorization(server, query):
    """Sign the connection's key in to the bot with bytes exported for this DC. Inferred: the bytes
    serve once, and only on the DC they were exported for (AUTH_BYTES_INVALID otherwise)."""
    endpoint = server.current_endpoint()
    if query.id != server.bot.id or server.exported.pop(query.bytes, None) != endpoint.dc_id:
        raise RpcFault("AUTH_BYTES_INVALID")
    server.authorized.add((endpoint.dc_id, wire.key_id(endpoint.auth_key)))
    return raw.types.auth.Authorization(user=render.bot_tl(server.bot))
