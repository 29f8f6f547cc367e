"""The adapter's own reading of Telegram's packets (botapp.telegram.kurigram): `unpack_lean`
answers as kurigram's mtproto.unpack does and refuses what it refuses; `Abridged` reads a packet
whole in linear time, over a real socket, and gives None when the connection closes or stalls."""

import asyncio
import hashlib
import io
import os
import struct

import pytest
import tgcrypto
from pyrogram import raw
from pyrogram.crypto import mtproto
from pyrogram.errors import SecurityCheckMismatch

from botapp.telegram.kurigram import Abridged, unpack_lean

AUTH_KEY = os.urandom(256)
AUTH_KEY_ID = hashlib.sha1(AUTH_KEY).digest()[-8:]
SESSION_ID = os.urandom(8)


def server_packet(
    body: bytes, *, msg_id: int = 7_000_000_000_000_000_001, padding: int | None = None, session_id: bytes = SESSION_ID
) -> bytes:
    """A packet as Telegram sends it to the client (MTProto 2.0, server to client: x = 8); `padding`
    bytes after the body (by default 12 to 27, the plaintext a multiple of AES's 16 bytes)."""
    if padding is None:
        padding = 12 + -(32 + len(body) + 12) % 16
    assert (32 + len(body) + padding) % 16 == 0, "AES-IGE takes whole blocks"
    plain = struct.pack("<q", 0) + session_id + struct.pack("<qii", msg_id, 1, len(body)) + body + os.urandom(padding)
    msg_key = hashlib.sha256(AUTH_KEY[96:128] + plain).digest()[8:24]
    key, iv = mtproto.kdf(AUTH_KEY, msg_key, False)
    return AUTH_KEY_ID + msg_key + tgcrypto.ige256_encrypt(plain, key, iv)


def file_part(size: int) -> bytes:
    answer = raw.types.upload.File(type=raw.types.storage.FilePartial(), mtime=0, bytes=os.urandom(size))
    return raw.types.RpcResult(req_msg_id=5, result=answer).write()


@pytest.mark.parametrize("size", [0, 1, 4096, 1024 * 1024])
def test_it_answers_as_kurigrams_unpack(size):
    packet = server_packet(file_part(size))
    ours, theirs = (
        unpack_lean(io.BytesIO(packet), SESSION_ID, AUTH_KEY, AUTH_KEY_ID),
        mtproto.unpack(io.BytesIO(packet), SESSION_ID, AUTH_KEY, AUTH_KEY_ID),
    )
    assert (ours.msg_id, ours.seq_no, ours.length) == (theirs.msg_id, theirs.seq_no, theirs.length)
    assert ours.body.write() == theirs.body.write()
    assert len(ours.body.result.bytes) == size


def flipped(packet: bytes, at: int) -> bytes:
    return packet[:at] + bytes([packet[at] ^ 1]) + packet[at + 1 :]


@pytest.mark.parametrize(
    "case",
    [
        "auth key id",
        "msg_key",
        "ciphertext",
        "session id",
        "short padding",
        "long padding",
        "even msg_id",
        "body past its length",
    ],
)
def test_it_refuses_what_kurigram_refuses(case):
    body = file_part(64)
    packet = {
        "auth key id": lambda: flipped(server_packet(body), 0),
        "msg_key": lambda: flipped(server_packet(body), 10),
        "ciphertext": lambda: flipped(server_packet(body), 100),
        "session id": lambda: server_packet(body, session_id=os.urandom(8)),
        "short padding": lambda: server_packet(body + bytes(-(32 + len(body) + 4) % 16), padding=4),
        "long padding": lambda: server_packet(body, padding=1040 + -(32 + len(body)) % 16),
        "even msg_id": lambda: server_packet(body, msg_id=7_000_000_000_000_000_002),
        # The body's length says less than its object takes: the object ran into the padding.
        "body past its length": lambda: packet_with_length(body, len(body) - 8),
    }[case]()
    with pytest.raises(SecurityCheckMismatch):
        unpack_lean(io.BytesIO(packet), SESSION_ID, AUTH_KEY, AUTH_KEY_ID)


def packet_with_length(body: bytes, length: int) -> bytes:
    """A packet whose header gives `length` for `body` (whose padding then starts inside it)."""
    padding = 12 + -(32 + len(body) + 12) % 16
    plain = (
        struct.pack("<q", 0) + SESSION_ID + struct.pack("<qii", 7_000_000_000_000_000_001, 1, length) + body + os.urandom(padding)
    )
    msg_key = hashlib.sha256(AUTH_KEY[96:128] + plain).digest()[8:24]
    key, iv = mtproto.kdf(AUTH_KEY, msg_key, False)
    return AUTH_KEY_ID + msg_key + tgcrypto.ige256_encrypt(plain, key, iv)


async def connected(feed) -> tuple[Abridged, asyncio.AbstractServer]:
    """An Abridged transport reading from a local server that runs `feed(writer)`."""

    async def serve(reader, writer):
        await feed(writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    transport = Abridged()
    transport.reader, transport.writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    return transport, server


def test_a_packet_sent_in_many_pieces_is_read_whole():
    data = os.urandom(1024 * 1024 + 3)
    sent = asyncio.Event()

    async def feed(writer):
        for at in range(0, len(data), 1000):
            writer.write(data[at : at + 1000])
            await writer.drain()
        sent.set()

    async def run():
        transport, server = await connected(feed)
        try:
            first = await transport._recv_from_socket(3)
            rest = await transport._recv_from_socket(len(data) - 3)
            await sent.wait()
            return first + rest
        finally:
            transport.writer.close()
            server.close()
            transport.crypto_executor.shutdown()

    assert asyncio.run(run()) == data


def test_a_connection_closed_mid_packet_reads_none():
    async def feed(writer):
        writer.write(b"x" * 100)
        await writer.drain()
        writer.close()

    async def run():
        transport, server = await connected(feed)
        try:
            return await transport._recv_from_socket(1000)
        finally:
            transport.writer.close()
            server.close()
            transport.crypto_executor.shutdown()

    assert asyncio.run(run()) is None


def test_a_connection_that_stalls_reads_none_after_the_timeout():
    async def feed(writer):
        writer.write(b"y" * 10)
        await writer.drain()  # then nothing more, the connection left open

    async def run():
        transport, server = await connected(feed)
        transport.TIMEOUT = 0.2
        loop = asyncio.get_running_loop()
        try:
            began = loop.time()
            return await transport._recv_from_socket(20), loop.time() - began
        finally:
            transport.writer.close()
            server.close()
            transport.crypto_executor.shutdown()

    stalled, took = asyncio.run(run())
    assert stalled is None and took >= 0.2
