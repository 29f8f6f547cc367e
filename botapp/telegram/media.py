"""Media a composed message names: Telegram's file ids, checked before anything is sent."""

from __future__ import annotations

from urllib.parse import urlsplit

from pyrogram.file_id import FileId, FileType

ALBUM_FILE_TYPES = {"photo": FileType.PHOTO, "video": FileType.VIDEO, "document": FileType.DOCUMENT, "audio": FileType.AUDIO}
MEDIA_FILE_TYPES = {**ALBUM_FILE_TYPES, "animation": FileType.ANIMATION}


def media_problem(media: str, *, kind: str) -> str:
    """Why `media` cannot be sent as a `kind` ("" when it can): an http(s):// address Telegram
    downloads (written as kurigram matches it: lower-case scheme), or a file id Telegram gave the
    bot for that kind of file. Anything else, a local path above all, is refused."""
    if media.startswith(("https://", "http://")):
        return "" if urlsplit(media).netloc else "Give a whole address, like https://files.example/cat.jpg."
    if "://" in media or media.lower().startswith(("http:", "https:")):
        return "Give an http(s):// address (lower-case, as https://files.example/cat.jpg) or a Telegram file id."
    try:
        decoded = FileId.decode(media)
    except Exception:  # noqa: BLE001 - kurigram raises ValueError, struct.error, binascii.Error… for a bad id
        return "That is neither an http(s):// address nor a Telegram file id."
    expected = MEDIA_FILE_TYPES.get(kind)
    if expected is not None and decoded.file_type != expected:
        found = decoded.file_type.name.lower().replace("_", " ")
        return f"That file id is a {found}, not a {kind}: choose the kind it is, or give another file."
    return ""
