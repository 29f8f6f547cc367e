"""Telegram's upload method, in the gateway's terms: a file from Django's storage becomes a file id
Telegram keeps (messages.uploadMedia), which sends then name instead of the bytes."""

from __future__ import annotations

import io
from typing import BinaryIO

from pyrogram import raw
from pyrogram.file_id import FileId

from botapp.telegram.gateway import BadRequest
from botapp.telegram.kurigram import photo_file_id
from botapp.telegram.media import ALBUM_FILE_TYPES
from botapp.telegram.request import TelegramRequests


class _Named(io.RawIOBase):
    """A file from Django's storage as kurigram's save_file reads it: seekable, with the name
    Telegram is told (a storage's own name is its path)."""

    def __init__(self, file: BinaryIO, name: str):
        self._file, self.name = file, name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._file.seek(offset, whence)
        return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()


class UploadMethods(TelegramRequests):
    def upload(self, kind: str, file: BinaryIO, *, file_name: str, mime_type: str = "") -> str:
        # Not a message: no slot of the send limiter. A lost answer is safe to ask again (nobody
        # received anything), so it is not a send either.
        return self._call(self._upload, kind, file, file_name, mime_type, paced=False)

    async def _upload(self, kind, file, file_name, mime_type) -> str:
        uploaded = await self.client.save_file(_Named(file, file_name))
        if kind == "photo":
            media = raw.types.InputMediaUploadedPhoto(file=uploaded)
        else:
            attributes = [raw.types.DocumentAttributeFilename(file_name=file_name)]
            if kind == "video":
                attributes.append(raw.types.DocumentAttributeVideo(duration=0, w=0, h=0, supports_streaming=True))
            elif kind == "audio":
                attributes.append(raw.types.DocumentAttributeAudio(duration=0, title=file_name))
            media = raw.types.InputMediaUploadedDocument(
                file=uploaded,
                mime_type=mime_type or "application/octet-stream",
                attributes=attributes,
                force_file=True if kind == "document" else None,
            )
        # core.telegram.org/method/messages.uploadMedia: "peer: can be inputPeerEmpty for bots".
        answer = await self.client.invoke(raw.functions.messages.UploadMedia(peer=raw.types.InputPeerEmpty(), media=media))
        if isinstance(answer, raw.types.MessageMediaPhoto):
            return photo_file_id(self.client, answer.photo)
        if not isinstance(answer, raw.types.MessageMediaDocument):
            raise BadRequest(f"upload of {file_name} answered {type(answer).__name__}")
        doc = answer.document
        return FileId(
            file_type=ALBUM_FILE_TYPES[kind],
            dc_id=doc.dc_id,
            media_id=doc.id,
            access_hash=doc.access_hash,
            file_reference=doc.file_reference,
        ).encode()
