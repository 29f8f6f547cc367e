"""MTProto 2.0 framing, the server's side: decrypt what kurigram's `Session` sends, encrypt what
Telegram answers (core.telegram.org/mtproto/description). kurigram's own `mtproto.pack/unpack`
are the client's side; these are their mirror images, so every byte kurigram parses is real.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass
from hashlib import sha1, sha256
from io import BytesIO

import cryptg
from pyrogram import raw
from pyrogram.crypto.mtproto import kdf
from pyrogram.raw.core import Bool, Int, Long, Message, MsgContainer, TLObject
from pyrogram.raw.core.primitives import Vector

MSG_CONTAINER_ID = 0x73F1F8DC  # msg_container#73f1f8dc messages:vector<%Message> = MessageContainer
RPC_RESULT_ID = 0xF35C6D01  # rpc_result#f35c6d01 req_msg_id:long result:Object = RpcResult


# AES-256-IGE (MTProto's cipher) by cryptg (AES-NI where the processor has it): a file part is
# ciphered here in a third of tgcrypto's time, so the model's own work takes less of the machine.
# Both release Python's lock. cryptg takes `bytes` whose length is a multiple of 16 (else it panics).


def _ige(cipher, data: bytes, key: bytes, iv: bytes) -> bytes:
    if len(data) % 16:
        raise ValueError(f"AES-256-IGE needs a multiple of 16 bytes, not {len(data)}")
    return cipher(bytes(data), bytes(key), bytes(iv))


def key_id(auth_key: bytes) -> bytes:
    return sha1(auth_key).digest()[-8:]


@dataclass
class Incoming:
    session_id: bytes
    msg_id: int
    seq_no: int
    body: TLObject
    salt: int = 0


class _Request(BytesIO):
    """A request's bytes, as the server reads them with kurigram's generated read(), unpatched.

    kurigram's `Vector.read` is written for Telegram's answers: given no element type it measures
    what is left with `read()` (a copy of the rest of the packet, for every vector) and guesses the
    element from its size (4: an int, 8: a long). In a request every vector of ints, longs,
    strings or bytes is read with its type (the generated read() passes it;
    tests/inmemory_telegram/test_wire.py checks every function kurigram knows), so a vector read
    without one holds boxed objects. Here "what is left" reads as nothing: no copy, no guess, each
    element an object."""

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b""
        return super().read(size)


def read_request(body: bytes) -> TLObject:
    """One request (or a container of them) as the client wrote it."""
    data = _Request(body)
    if int.from_bytes(body[:4], "little") != MSG_CONTAINER_ID:
        return TLObject.read(data)
    # kurigram's MsgContainer.read reads each message from a BytesIO of its own: read them here.
    data.read(4)
    messages = []
    for _ in range(Int.read(data)):
        msg_id, seq_no, length = Long.read(data), Int.read(data), Int.read(data)
        messages.append(Message(read_request(data.read(length)), msg_id, seq_no, length))
    return MsgContainer(messages)


def unpack_client(packet: bytes, auth_key: bytes) -> Incoming:
    """A client's encrypted packet -> its message (the server decrypts with x = 0)."""
    return unpack_plain(decrypt_client(packet, auth_key))


def decrypt_client(packet: bytes, auth_key: bytes) -> bytes:
    """A client's encrypted packet -> its plaintext, its msg_key checked (ValueError if wrong)."""
    b = BytesIO(packet)
    b.read(8)  # auth_key_id, matched by the caller
    msg_key = b.read(16)
    aes_key, aes_iv = kdf(auth_key, msg_key, True)
    plain = _ige(cryptg.decrypt_ige, b.read(), aes_key, aes_iv)
    if sha256(auth_key[88 : 88 + 32] + plain).digest()[8:24] != msg_key:
        raise ValueError("msg_key mismatch")
    return plain


def unpack_plain(plain: bytes) -> Incoming:
    """A decrypted packet's plaintext -> its message."""
    data = BytesIO(plain)
    salt = Long.read(data)
    session_id = data.read(8)
    msg_id = Long.read(data)
    seq_no = Int.read(data)
    length = Int.read(data)
    body = read_request(data.read(length))
    return Incoming(session_id, msg_id, seq_no, body, salt)


def encode(value) -> bytes:
    """A result as Telegram serialises it: Bool and bare vectors included."""
    if isinstance(value, bool):
        return Bool(value)
    if isinstance(value, list):
        return Int(Vector.ID, False) + Int(len(value)) + b"".join(encode(v) for v in value)
    return value.write()


def rpc_result(req_msg_id: int, result) -> bytes | FilePartAnswer:
    if isinstance(result, FilePart):  # its bytes are put in by the file DCs' process (file_dcs.py)
        return FilePartAnswer(req_msg_id, result)
    return b"".join((Int(RPC_RESULT_ID, False), Long(req_msg_id), encode(result)))


UPLOAD_FILE_ID = 0x96A18D5  # upload.file#96a18d5 type:storage.FileType mtime:int bytes:bytes = upload.File


def tl_bytes_head(length: int) -> bytes:
    """What TL writes before `length` bytes (their length: one byte up to 253, else 0xFE and three)."""
    return bytes([length]) if length <= 253 else b"\xfe" + length.to_bytes(3, "little")


def tl_bytes_padding(length: int) -> bytes:
    """What TL writes after `length` bytes: zeros up to a multiple of 4, the head counted."""
    return b"\0" * (-(len(tl_bytes_head(length)) + length) % 4)


@dataclass(frozen=True)
class FilePart:
    """upload.getFile's answer, its bytes not read: `length` bytes of file `file_id` from `offset`,
    generated from the id (content.generated) or, when `stored`, as kept in the file store
    (file_dcs.py). What a file DC's own process answers with, the checks made by the bot's."""

    file_id: int
    offset: int
    length: int
    photo: bool  # storage.fileJpeg, else storage.filePartial (as methods/upload.py answers)
    stored: bool


@dataclass(frozen=True)
class FilePartAnswer:
    """rpc_result(req_msg_id, upload.file(...)) for a FilePart: its length as written (what the
    link's bandwidth counts), and the answer itself once the bytes are read (`written`)."""

    req_msg_id: int
    part: FilePart

    def __len__(self) -> int:
        return (
            4 + 8 + 4 + 4 + 4 + len(tl_bytes_head(self.part.length)) + self.part.length + len(tl_bytes_padding(self.part.length))
        )

    def written(self, data: bytes) -> bytes:
        if len(data) != self.part.length:
            raise ValueError(f"file {self.part.file_id}: {len(data)} bytes read, {self.part.length} answered")
        file_type = raw_file_type(photo=self.part.photo)
        return b"".join(
            (Int(RPC_RESULT_ID, False), Long(self.req_msg_id), Int(UPLOAD_FILE_ID, False), file_type, Int(0),
             tl_bytes_head(len(data)), data, tl_bytes_padding(len(data)))
        )  # fmt: skip


def raw_file_type(*, photo: bool) -> bytes:
    return (raw.types.storage.FileJpeg() if photo else raw.types.storage.FilePartial()).write()


class MsgIds:
    """Server message ids: time-based, strictly increasing, 1 mod 4 (answers) or 3 mod 4 (the rest)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._last = 0

    def next(self, *, answer: bool) -> int:
        with self._lock:
            candidate = int(time.time() * 2**32)
            candidate -= candidate % 4
            candidate += 1 if answer else 3
            while candidate <= self._last:
                candidate += 4
            self._last = candidate
            return candidate


def pack_server(body: bytes, *, auth_key: bytes, session_id: bytes, msg_id: int, seq_no: int) -> bytes:
    """One server message, encrypted for the client (x = 8). The plaintext is put together once
    (a file part's body is 1 MiB: each copy of it holds the process's lock on Python)."""
    head = Long(0) + session_id + Long(msg_id) + Int(seq_no) + Int(len(body))
    padding = os.urandom(-(len(head) + len(body) + 12) % 16 + 12)
    plain = b"".join((head, body, padding))
    check = sha256(auth_key[96 : 96 + 32])
    check.update(plain)
    msg_key = check.digest()[8:24]
    aes_key, aes_iv = kdf(auth_key, msg_key, False)
    return b"".join((key_id(auth_key), msg_key, _ige(cryptg.encrypt_ige, plain, aes_key, aes_iv)))


class SeqNo:
    """Per-session sequence numbers: content-related messages odd and counted, others even."""

    def __init__(self):
        self._count = itertools.count()
        self._content = 0
        self._lock = threading.Lock()

    def next(self, *, content: bool) -> int:
        with self._lock:
            if content:
                seq = self._content * 2 + 1
                self._content += 1
                return seq
            return self._content * 2
