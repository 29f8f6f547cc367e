"""The in-memory Telegram's socket protocol (`manage.py telegram_server`), both sides' part: the
frames, and the controls a remote caller may ask for. Clients import this module alone, never the
server.
"""

from __future__ import annotations

import asyncio
import os
import struct

# Frames on the Unix socket: length (4 bytes, big-endian) + kind (1 byte) + payload. PACKET: the
# server's packet to the client. WRITTEN: the client's packet, after the moment it was written
# (8 bytes, big-endian double, time.monotonic(): on Linux the machine's clock, the server's too):
# when it left for Telegram, whenever the server's process gets to read it (TelegramServer.arrived).
HELLO, PACKET, CONTROL, CONTROL_ANSWER, WRITTEN = 1, 2, 3, 4, 5

# What a remote caller may ask of the server: the test and sandbox controls, nothing internal.
CONTROLS = {
    "create_channel", "join", "leave", "request_join", "post", "delete_post", "user_sends", "tap", "block", "unblock",
    "deactivate", "revoke_token", "fail_next", "file_id", "count", "methods_called", "events_since", "flood_waits",
    "set_rates", "restore_token", "bot_rights", "users_meet", "bot_sent", "received", "live", "hostile_start",
    "hostile_stop", "rotate_salt", "call_times", "update_state",
    "send_times", "events_count", "dc_set", "connections_drop", "file_references_expire", "file_info", "bot_add",
    "bot_admin_set", "process_ids",
}  # fmt: skip


def files_socket(path: str | os.PathLike) -> str:
    """The socket of the file data centres beside the bot's DC's socket at `path`: where media
    connections, and connections to a DC other than the bot's, go (file_dcs.py), as Telegram's
    help.getConfig gives media-only addresses for each DC (dcOption's `media_only`)."""
    return f"{os.fspath(path)}.files"


# The socket's read buffer on both sides (asyncio's default is 64 KiB): a 1 MiB file part then
# arrives without the transport pausing and resuming its reads a dozen times on the way.
STREAM_LIMIT = 4 * 1024 * 1024
_HEAD = struct.Struct(">IB")


def frame(kind: int, payload: bytes) -> bytes:
    return _HEAD.pack(len(payload) + 1, kind) + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next frame's (kind, payload): the head read apart, so the payload is copied once."""
    length, kind = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    return kind, await reader.readexactly(length - 1)
