"""Uploaded files: kept under a name Courier makes, shown under the name the uploader gave.

The uploader's name never reaches the storage: it may be longer than the column holds, start with a
dot (`.htaccess`), climb folders (`../`), or end in a type a web server or a browser would run
(`.php`, `.html`, `.svg`). The stored name is a random one in the month's folder, with the
uploader's extension only when it is a passive media or document type, `.bin` otherwise; the
uploader's name is kept, cut to the column, as the display name recipients see on Telegram.
"""

import unicodedata
import uuid
from pathlib import PurePosixPath

from botapp import clock

DISPLAY_NAME_LENGTH = 255  # BroadcastAttachment.file_name's column
CUT_MARK = "…"

# Kept as the stored file's extension (lower case): types no server runs and no browser treats as a
# page or script. Anything else, a dotfile, or no extension at all is stored as .bin.
INERT_EXTENSIONS = frozenset(
    {
        # images (not .svg: a browser runs its scripts)
        ".jpg", ".jpeg", ".png", ".gif", ".webp", ".heic", ".bmp", ".tif", ".tiff",
        # video and audio
        ".mp4", ".mov", ".m4v", ".webm", ".mkv", ".avi", ".mp3", ".m4a", ".ogg", ".oga", ".opus", ".wav", ".flac", ".aac",
        # documents and archives
        ".pdf", ".txt", ".csv", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".epub",
        ".rtf", ".zip", ".7z", ".rar", ".gz", ".tar",
    }
)  # fmt: skip


def upload_display_name(name: str) -> tuple[str, bool]:
    """The name recipients see: the uploader's own, without folders or control characters, cut to
    the column (the cut marked with … before the extension, which is kept). Also whether it was cut."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip() or "file"
    if len(base) <= DISPLAY_NAME_LENGTH:
        return base, False
    suffix = PurePosixPath(base).suffix
    if len(suffix) > 16:  # not an extension a reader would miss: cut like the rest
        suffix = ""
    stem = base[: len(base) - len(suffix)] if suffix else base
    return stem[: DISPLAY_NAME_LENGTH - len(CUT_MARK) - len(suffix)] + CUT_MARK + suffix, True


def attachment_upload_to(instance, filename: str) -> str:
    """FileField.upload_to: attachments/YYYY/MM/<random>.<inert extension or bin>."""
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if suffix not in INERT_EXTENSIONS:
        suffix = ".bin"
    return f"attachments/{clock.now():%Y/%m}/{uuid.uuid4().hex}{suffix}"
