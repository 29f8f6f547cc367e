"""HTTP for a stored file's bytes, as pure functions: which bytes a request asks for (RFC 9110
§14: Range, If-Range), and the headers that describe them (Content-Range, Content-Disposition of
RFC 6266, a safe Content-Type). No I/O: the streaming process (botapp/stream/views.py) calls these.

What the answers are, each allowed by RFC 9110:
- One satisfiable range (an int range `a-b`, `a-`, or a suffix `-n`; a last byte past the end is
  cut to the end): 206 with that range.
- Several ranges: those that overlap or touch are merged (§15.3.7 lets a server coalesce them);
  one left is answered 206, several are answered 200 with the whole file (§14.2: a server MAY
  ignore Range). No multipart/byteranges answer: players and downloaders ask for one range.
- No satisfiable range (every start at or past the end, or a suffix of 0): 416 with
  `Content-Range: bytes */<size>` (§15.5.17).
- A header that is not `bytes=` with a valid range set, or one naming more than MAX_RANGES
  ranges: ignored (200 whole), as §14.2 allows.
- `If-Range` with an entity tag: the Range is honoured only when it equals the file's strong ETag
  (§13.1.5, strong comparison); a date, or a weak tag, never matches (we send no Last-Modified), so
  the whole file is sent.
- A file of 0 bytes has no byte to point at: an int range is 416, a suffix range is the whole
  (empty) file with 200.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote

MAX_RANGES = 100  # more ranges than any player asks for: the header is ignored (RFC 9110 §14.2)
OCTET_STREAM = "application/octet-stream"

# Types a browser shows inline without running anything of the file's: media for the player,
# plain pictures and text. Everything else (HTML, SVG, XML, JavaScript, PDF, unknown types) is
# served as an attachment, so a stored file can never script a page of ours or anyone's.
INLINE_TYPES = re.compile(r"^(?:video/[a-z0-9.+-]+|audio/[a-z0-9.+-]+|image/(?:png|jpeg|gif|webp|avif|bmp)|text/plain)$")
# A media type as RFC 9110 §8.3.1 writes it (type "/" subtype, both tokens), parameters left out.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
MEDIA_TYPE_RE = re.compile(rf"^({TOKEN})/({TOKEN})$")
RANGE_SPEC_RE = re.compile(r"^(?:(\d+)-(\d*)|-(\d+))$")


@dataclass(frozen=True)
class ByteRange:
    """The bytes [start, end) of a file."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class RangeAnswer:
    """What to answer: 200 (the whole file), 206 (`part` of it) or 416 (nothing)."""

    status: int
    part: ByteRange  # what the body holds: the whole file for 200, empty for 416
    size: int

    def headers(self) -> dict[str, str]:
        """Content-Length and Content-Range for this answer (416: the body is the caller's page)."""
        if self.status == 416:
            return {"Content-Range": f"bytes */{self.size}"}
        headers = {"Content-Length": str(self.part.length)}
        if self.status == 206:
            headers["Content-Range"] = f"bytes {self.part.start}-{self.part.end - 1}/{self.size}"
        return headers


def ranges_parse(header: str) -> list[tuple[int | None, int | None]] | None:
    """`bytes=0-99, -500` -> [(0, 99), (None, 500)]: each (first, last) as written (last None for
    `a-`, first None for a suffix `-n`). None when the header is not a valid bytes range set
    (another unit, a syntax error, last before first, more than MAX_RANGES ranges)."""
    unit, eq, spec = header.partition("=")
    if not eq or unit.strip().lower() != "bytes":
        return None
    parts = [p.strip() for p in spec.split(",")]
    # RFC 9110's #rule lets a list carry empty elements ("0-1,,2-3"); at least one must be there.
    parts = [p for p in parts if p]
    if not parts or len(parts) > MAX_RANGES:
        return None
    found: list[tuple[int | None, int | None]] = []
    for part in parts:
        match = RANGE_SPEC_RE.match(part)
        if match is None:
            return None
        first, last, suffix = match.groups()
        if suffix is not None:
            found.append((None, int(suffix)))
            continue
        if last and int(last) < int(first):
            return None  # RFC 9110 §14.1.1: invalid, so the whole header is
        found.append((int(first), int(last) if last else None))
    return found


def ranges_satisfiable(specs: list[tuple[int | None, int | None]], size: int) -> list[ByteRange]:
    """The ranges of `specs` that name bytes of a file of `size` bytes, each cut to the file, in
    the order asked."""
    ranges = []
    for first, last in specs:
        if first is None:  # a suffix: the last `last` bytes (all of them when the file is shorter)
            if last and size:
                ranges.append(ByteRange(max(size - last, 0), size))
        elif first < size:
            ranges.append(ByteRange(first, size if last is None else min(last + 1, size)))
    return ranges


def ranges_coalesce(ranges: list[ByteRange]) -> list[ByteRange]:
    """Ranges that overlap or touch merged into one, sorted by start."""
    merged: list[ByteRange] = []
    for r in sorted(ranges, key=lambda r: r.start):
        if merged and r.start <= merged[-1].end:
            merged[-1] = ByteRange(merged[-1].start, max(merged[-1].end, r.end))
        else:
            merged.append(r)
    return merged


def if_range_holds(if_range: str | None, etag: str) -> bool:
    """Whether a Range may be honoured under `If-Range` (absent: yes). Only the file's own strong
    entity tag matches; a weak tag or a date never does (RFC 9110 §13.1.5)."""
    if if_range is None:
        return True
    value = if_range.strip()
    return value.startswith('"') and value == etag


def range_answer(*, range_header: str | None, if_range: str | None, etag: str, size: int) -> RangeAnswer:
    """What to answer a GET (or HEAD) of a file of `size` bytes with these request headers."""
    whole = RangeAnswer(200, ByteRange(0, size), size)
    if range_header is None or not if_range_holds(if_range, etag):
        return whole
    specs = ranges_parse(range_header)
    if specs is None:
        return whole
    if size == 0 and any(first is None and last for first, last in specs):
        return whole  # a suffix of an empty file: the (empty) whole, no 206 can name it
    ranges = ranges_coalesce(ranges_satisfiable(specs, size))
    if not ranges:
        return RangeAnswer(416, ByteRange(0, 0), size)
    if len(ranges) > 1:
        return whole
    return RangeAnswer(206, ranges[0], size)


def etag_for(file_unique_id: str) -> str:
    """The strong entity tag of a file: Telegram's unique id names the same bytes in any chat and
    for any bot. Characters outside an etag's alphabet (RFC 9110 §8.8.3) are dropped."""
    tag = "".join(ch for ch in file_unique_id if 0x21 <= ord(ch) <= 0x7E and ch not in '"\\')
    return f'"{tag}"'


def content_type_safe(mime_type: str) -> str:
    """The file's media type if it is a well-formed one (lower case, parameters dropped), else
    application/octet-stream."""
    base = (mime_type or "").split(";", 1)[0].strip().lower()
    return base if MEDIA_TYPE_RE.match(base) else OCTET_STREAM


def inline_allowed(content_type: str) -> bool:
    """Whether a file of this type may be shown in the browser rather than downloaded."""
    return bool(INLINE_TYPES.match(content_type))


def ascii_file_name(name: str, default: str = "file") -> str:
    """A plain-ASCII stand-in for `name`, for clients that do not read `filename*`: accents
    dropped, anything else outside printable ASCII, quotes, backslashes, slashes and separators
    turned into `_`; `default` when nothing is left."""
    decomposed = unicodedata.normalize("NFKD", name)
    out = []
    for ch in decomposed:
        if unicodedata.combining(ch):
            continue
        out.append(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\/;%' else "_")
    text = "".join(out).strip(" .")
    return text if text.strip("_") else default


def content_disposition(*, name: str, inline: bool) -> str:
    """`inline` or `attachment`, with an ASCII `filename` and the exact name as RFC 6266's
    `filename*=UTF-8''…` (RFC 8187 percent-encoding)."""
    kind = "inline" if inline else "attachment"
    name = name.replace("\r", " ").replace("\n", " ").strip() or "file"
    fallback = ascii_file_name(name)
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
