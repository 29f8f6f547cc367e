"""upload.*: files uploaded in parts (core.telegram.org/api/files), and the file an InputFile names
once all its parts are in."""

from __future__ import annotations

import hashlib

from pyrogram import raw

from inmemory_telegram import limits
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
)
from inmemory_telegram.state import File, Upload

METHODS = Table()


def store_part(server, file_id: int, part: int, data: bytes, *, total: int | None) -> bool:
    """One part of an upload (core.telegram.org/api/files): at most 512 KiB, numbered from 0, at
    most 4000 parts (2000 MiB) for a bot. The rule that every part but the last is the same size,
    divisible by 1 KiB and dividing 512 KiB, is checked when the file is put together."""
    if not data:
        raise RpcFault("FILE_PART_EMPTY")
    if len(data) > limits.UPLOAD_PART_SIZE:
        raise RpcFault("FILE_PART_TOO_BIG")
    if not 0 <= part < (total or limits.UPLOAD_PARTS):
        raise RpcFault("FILE_PART_INVALID")
    upload = server.uploads.setdefault(file_id, Upload(big=total is not None, total=total))
    if upload.big != (total is not None) or upload.total != total:
        raise RpcFault("FILE_PART_SIZE_CHANGED")  # inferred: one file id is uploaded one way throughout
    upload.parts[part] = data
    return True


@METHODS.method("upload.SaveFilePart")
def save_file_part(server, query):
    return store_part(server, query.file_id, query.file_part, query.bytes, total=None)


@METHODS.method("upload.SaveBigFilePart")
def save_big_file_part(server, query):
    if not 0 < query.file_total_parts <= limits.UPLOAD_PARTS:
        raise RpcFault("FILE_PARTS_INVALID")
    return store_part(server, query.file_id, query.file_part, query.bytes, total=query.file_total_parts)


def uploaded_file(server, input_file, *, kind: str, mime_type: str) -> File:
    """The File an InputFile / InputFileBig names, once all its parts are in (the upload is used up)."""
    upload = server.uploads.pop(input_file.id, None)
    big = isinstance(input_file, raw.types.InputFileBig)
    parts = input_file.parts
    if upload is None or upload.big != big or sorted(upload.parts) != list(range(parts)) or (big and upload.total != parts):
        raise RpcFault("FILE_PARTS_INVALID")
    sizes = [len(upload.parts[i]) for i in range(parts)]
    if parts > 1 and (len(set(sizes[:-1])) != 1 or sizes[0] % 1024 or limits.UPLOAD_PART_SIZE % sizes[0] or sizes[-1] > sizes[0]):
        raise RpcFault("FILE_PART_SIZE_INVALID")
    data = b"".join(upload.parts[i] for i in range(parts))
    if not big:
        if len(data) > limits.UPLOAD_BIG_FILE:
            raise RpcFault("FILE_PARTS_INVALID")  # inferred: more than 10 MiB must go by saveBigFilePart
        if input_file.md5_checksum and hashlib.md5(data).hexdigest() != input_file.md5_checksum:  # noqa: S324 - Telegram's checksum
            raise RpcFault("MD5_CHECKSUM_INVALID")
    if kind == "photo" and len(data) > limits.PHOTO_SIZE:
        raise RpcFault("PHOTO_SAVE_FILE_INVALID")  # inferred error name for a photo over 10 MB
    file = server.new_file(kind, input_file.name)
    file.size, file.mime_type, file.sha256 = len(data), mime_type, hashlib.sha256(data).hexdigest()
    return file


def document_kind(attributes) -> str:
    """What Telegram makes of an uploaded document, from the attributes the client sent."""
    if any(isinstance(a, raw.types.DocumentAttributeAnimated) for a in attributes):
        return "animation"
    if any(isinstance(a, raw.types.DocumentAttributeVideo) for a in attributes):
        return "video"
    if any(isinstance(a, raw.types.DocumentAttributeAudio) for a in attributes):
        return "audio"
    return "document"
