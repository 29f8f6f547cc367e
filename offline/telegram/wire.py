"""MTProto 2.0 framing, the server's side: decrypt what kurigram's `Session` sends, encrypt what
Telegram answers (core.telegram.org/mtproto/description). kurigram's own `mtproto.pack/unpack`
are the client's side; these are their mirror images, so every byte kurigram parses is real.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import linecache
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from hashlib import sha1, sha256
from io import BytesIO

from pyrogram.crypto import aes
from pyrogram.crypto.mtproto import kdf
from pyrogram.raw.core import Bool, Bytes, Double, Int, List, Long, String, TLObject
from pyrogram.raw.core.primitives import Vector

MSG_CONTAINER_ID = 0x73F1F8DC  # msg_container#73f1f8dc messages:vector<%Message> = MessageContainer
RPC_RESULT_ID = 0xF35C6D01  # rpc_result#f35c6d01 req_msg_id:long result:Object = RpcResult


def key_id(auth_key: bytes) -> bytes:
    return sha1(auth_key).digest()[-8:]


@dataclass
class Incoming:
    session_id: bytes
    msg_id: int
    seq_no: int
    body: TLObject
    salt: int = 0


# kurigram's generated read() guesses a bare vector's element type from its byte size: it only ever
# reads Telegram's answers. The server reads requests, whose vectors of ints and longs sit beside
# other fields, so while it reads one it asks the generated write() what each vector field holds.
_VECTOR_OF = re.compile(r"Vector\(self\.(\w+), (Int|Long|String|Bytes|Double)\)")
_PRIMITIVES = {"Int": Int, "Long": Long, "String": String, "Bytes": Bytes, "Double": Double}
_strict = threading.local()
_vector_read = Vector.read.__func__


@functools.cache
def _vector_fields(module_name: str) -> dict[str, type]:
    return {f: _PRIMITIVES[t] for f, t in _VECTOR_OF.findall(inspect.getsource(sys.modules[module_name]))}


def _read_vector(cls, data, t=None, *args):
    if t is not None:
        return _vector_read(cls, data, t, *args)
    if not getattr(_strict, "on", False):
        # kurigram's guess, without its `len(data.read())`: that copies the rest of the packet for
        # every vector, so reading a container of 100 requests copied megabytes.
        count = Int.read(data)
        size = (len(data.getbuffer()) - data.tell()) / count if count else 0
        return List(Vector.read_bare(data, size) for _ in range(count))
    frame = sys._getframe(2)  # Vector.read <- TLObject.read <- the generated read() of the owner
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    field = line.split("=", 1)[0].strip()
    element = _vector_fields(frame.f_globals["__name__"]).get(field)
    count = Int.read(data)
    return List(element.read(data) if element else TLObject.read(data) for _ in range(count))


Vector.read = classmethod(_read_vector)


def read_request(body: bytes) -> TLObject:
    _strict.on = True
    try:
        return TLObject.read(BytesIO(body))
    finally:
        _strict.on = False


def unpack_client(packet: bytes, auth_key: bytes) -> Incoming:
    """A client's encrypted packet -> its message (the server decrypts with x = 0)."""
    b = BytesIO(packet)
    b.read(8)  # auth_key_id, matched by the caller
    msg_key = b.read(16)
    aes_key, aes_iv = kdf(auth_key, msg_key, True)
    plain = aes.ige256_decrypt(b.read(), aes_key, aes_iv)
    if sha256(auth_key[88 : 88 + 32] + plain).digest()[8:24] != msg_key:
        raise ValueError("msg_key mismatch")
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


def rpc_result(req_msg_id: int, result) -> bytes:
    return Int(RPC_RESULT_ID, False) + Long(req_msg_id) + encode(result)


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
    """One server message, encrypted for the client (x = 8)."""
    data = Long(0) + session_id + Long(msg_id) + Int(seq_no) + Int(len(body)) + body
    padding = os.urandom(-(len(data) + 12) % 16 + 12)
    msg_key = sha256(auth_key[96 : 96 + 32] + data + padding).digest()[8:24]
    aes_key, aes_iv = kdf(auth_key, msg_key, False)
    return key_id(auth_key) + msg_key + aes.ige256_encrypt(data + padding, aes_key, aes_iv)


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
