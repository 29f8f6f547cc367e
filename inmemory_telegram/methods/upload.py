"""upload.*: files uploaded in parts (core.telegram.org/api/files), the file an InputFile names
once all its parts are in, and files downloaded in parts (upload.getFile), by Telegram's rules."""

from __future__ import annotations

import hashlib
import math

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
    file.content = data
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


def download_part_check(offset: int, limit: int, *, precise: bool) -> None:
    """Telegram's rules on a download's offset and limit (limits.py, "downloads"): OFFSET_INVALID or
    LIMIT_INVALID for a part that breaks them."""
    align = limits.DOWNLOAD_ALIGN_PRECISE if precise else limits.DOWNLOAD_ALIGN
    if offset < 0 or offset % align:
        raise RpcFault("OFFSET_INVALID")
    if limit <= 0 or limit % align or limit > limits.DOWNLOAD_CHUNK:
        raise RpcFault("LIMIT_INVALID")
    if not precise and limits.DOWNLOAD_CHUNK % limit:
        raise RpcFault("LIMIT_INVALID")
    if offset // limits.DOWNLOAD_CHUNK != (offset + limit - 1) // limits.DOWNLOAD_CHUNK:
        raise RpcFault("LIMIT_INVALID")  # inferred: the docs name no error for a part across 1 MB


def file_located(server, location):
    """The file a download names, after Telegram's checks: it exists and its access hash matches
    the bot's own (FILE_ID_INVALID), its reference is the bot's current one and not past its
    lifetime (FILE_REFERENCE_EXPIRED), and the connection is to the DC it is kept on
    (FILE_MIGRATE_X). An access hash or reference another bot got is not this bot's
    (accounts.ACCOUNT_BOUND_FILES)."""
    if not isinstance(location, (raw.types.InputDocumentFileLocation, raw.types.InputPhotoFileLocation)):
        raise RpcFault("LOCATION_INVALID")  # inferred: other locations (thumbnails, chat photos) are not modelled
    file = server.files.get(location.id)
    if file is None or server.bound_hash(file.access_hash) != location.access_hash:
        raise RpcFault("FILE_ID_INVALID")
    if (
        location.file_reference != server.bound_reference(file.file_reference)
        or server.now() - file.reference_at >= limits.FILE_REFERENCE_LIFETIME
    ):
        raise RpcFault("FILE_REFERENCE_EXPIRED")
    if server.current_endpoint().dc_id != file.dc_id:
        raise RpcFault(f"FILE_MIGRATE_{file.dc_id}")
    return file


@METHODS.method("upload.GetFile")
def get_file(server, query):
    download_part_check(query.offset, query.limit, precise=bool(query.precise))
    file = file_located(server, query.location)
    if server.enforce_rates:  # limits.FILE_READ_RATE, each bot its own (inferred)
        now = server.arrived()
        reads = server.file_reads_of(server.acting_bot())
        wait = reads.wait(now, 1)
        if wait > 0:
            server.flood_waits += 1
            raise RpcFault(f"FLOOD_WAIT_{max(1, math.ceil(wait))}")
        reads.add(now, 1)
    length = file.part_length(query.offset, query.limit)
    server.file_reads_served += 1
    server.file_bytes_served += length
    return server.current_endpoint().file_part(file, query.offset, length)
