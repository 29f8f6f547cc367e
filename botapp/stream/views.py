"""The streaming process's pages: a stored file's bytes (GET and HEAD, ranges: botapp/stream/http.py),
its player or download page, and the pages that say why not (403, 404, 416, 429).

Every answer is served from STREAM_PUBLIC_URL's origin, never the console's: a file is shown inline
only when its type cannot run anything (http.INLINE_TYPES), always with `nosniff`, and the pages
carry the console's Content-Security-Policy (no script but the page's own file)."""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from pathlib import Path
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods
from redis.exceptions import RedisError

from botapp.addresses import client_ip
from botapp.metrics import STREAM_ANSWERS, STREAM_BYTES, STREAMS_CUT, STREAMS_OPEN
from botapp.models import BotSettings
from botapp.services.stream_links import (
    LinkCheck,
    LinkState,
    stream_file_gone,
    stream_link_switched,
    stream_token_check,
)
from botapp.stream.http import (
    OCTET_STREAM,
    content_disposition,
    content_type_safe,
    etag_for,
    inline_allowed,
    range_answer,
)
from botapp.stream.pool import serving
from botapp.telegram.downloads import FileGone, FileInfo, StreamBroken

log = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[1] / "static" / "stream"
ASSET_TYPES = {"player.js": "text/javascript; charset=utf-8", "player.css": "text/css; charset=utf-8"}
PLAYABLE = ("video/", "audio/")

BAD_LINK = (
    "This link is not valid",
    "It was changed, or cut short when it was copied. Open the file link in the bot again to get a new stream link.",
)
EXPIRED = ("This link has expired", "Stream links work for a while only. Open the file link in the bot again to get a new one.")
REVOKED = (
    "This link no longer works",
    "The admins renewed this file's links. Open the file link in the bot again to get a new one.",
)
SWITCHED_OFF = ("Streaming is switched off", "Stream links are switched off for this file. Get the file in the bot instead.")
PREMIUM_ONLY = (
    "Streaming is for premium users",
    "Stream links of this file are for premium users only, and you have no premium now (/myplan in the bot says "
    "more). Get the file in the bot instead.",
)
GONE = ("This file is gone", "The file was removed from the bot. Ask the admins whether it can be shared again.")
BUSY = {
    "user": ("Too many streams at once", "You have {n} streams open already: close one, then try again."),
    "address": ("Too many streams at once", "Your network has {n} streams open already: close one, then try again."),
    "all": ("The server is busy", "Every stream is taken right now: try again in a minute."),
}
NO_RANGE = ("Nothing at that position", "The player asked for a part past the end of the file: reload the page.")
LIMITS = {"user": "STREAM_MAX_PER_USER", "address": "STREAM_MAX_PER_ADDRESS", "all": "STREAM_MAX_TOTAL"}
# Bytes a stream sends between two additions to the dashboard's counts (an hour's, by when they were
# sent): a film watched over two hours is counted in each, not all at its end. One Redis call per
# this many bytes; the rest is added when the stream ends.
COUNT_EVERY = 8 * 1024 * 1024


def problem(request, status: int, text: tuple[str, str], *, headers: dict | None = None, **values) -> HttpResponse:
    """A page saying what went wrong and what to do, with `status`."""
    title, advice = text
    body = render_to_string("stream/problem.html", {"title": title, "advice": advice.format(**values)})
    response = HttpResponse(body, status=status, content_type="text/html; charset=utf-8")
    for name, value in (headers or {}).items():
        response[name] = value
    return answered(request, response)


def answered(request, response: HttpResponse) -> HttpResponse:
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    if not response.streaming:
        response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        response.setdefault("Content-Length", str(len(response.content)))
        if request.method == "HEAD":
            response.content = b""
    STREAM_ANSWERS.labels(str(response.status_code), request.method).inc()
    return response


def refused(request, check: LinkCheck) -> HttpResponse | None:
    """The page for a link that opens nothing, or None when it opens its file."""
    if check.state is LinkState.BAD:
        return problem(request, 403, BAD_LINK)
    if check.state is LinkState.EXPIRED:
        return problem(request, 403, EXPIRED)
    if check.state is LinkState.REVOKED:
        return problem(request, 403, REVOKED)
    if check.state is LinkState.GONE:
        return problem(request, 404, GONE)
    switched = stream_link_switched(check=check, conf=BotSettings.load())
    if switched is not None:
        return problem(request, 403, SWITCHED_OFF if switched == "off" else PREMIUM_ONLY)
    return None


def content_type_for(info: FileInfo) -> str:
    """The file's own type, or, when Telegram gives none or a generic one, its name's."""
    ctype = content_type_safe(info.mime_type)
    if ctype == OCTET_STREAM and info.file_name:
        ctype = content_type_safe(mimetypes.guess_type(info.file_name)[0] or OCTET_STREAM)
    return ctype


async def file_located(check: LinkCheck):
    """(downloader, chat id, message id, FileInfo) of the link's message: the storage channel's,
    else its copy in the backup channel. FileGone when neither has it (recorded for the console)."""
    downloader = serving().pool.choose()
    stored = check.stored
    sources = [(stored.source_chat_id, stored.message_ids)]
    if stored.backup_chat_id and stored.backup_message_ids and len(stored.backup_message_ids) > check.index:
        sources.append((stored.backup_chat_id, stored.backup_message_ids))
    for n, (chat_id, ids) in enumerate(sources, start=1):
        try:
            return downloader, chat_id, ids[check.index], await downloader.info(chat_id, ids[check.index])
        except FileGone as exc:
            log.warning("stream: share=%s message %s of %s gone: %s", stored.share_id, ids[check.index], chat_id, exc)
            if n == len(sources):
                await sync_to_async(stream_file_gone)(stored=stored)
                raise


@require_http_methods(["GET", "HEAD"])
async def file_bytes(request, token: str, name: str = ""):
    """The file's bytes: the whole file (200), a range (206) or none (416), as an attachment with
    ?download=1 or when its type is not safe to show."""
    check = await sync_to_async(stream_token_check)(token=token)
    if (page := await sync_to_async(refused)(request, check)) is not None:
        return page
    try:
        downloader, chat_id, message_id, info = await file_located(check)
    except FileGone:
        return problem(request, 404, GONE)
    ctype = content_type_for(info)
    etag = etag_for(info.file_unique_id)
    answer = range_answer(
        range_header=request.headers.get("Range"), if_range=request.headers.get("If-Range"), etag=etag, size=info.size
    )
    if answer.status == 416:
        return problem(request, 416, NO_RANGE, headers={**answer.headers(), "Accept-Ranges": "bytes", "ETag": etag})
    headers = {
        **answer.headers(),
        "Accept-Ranges": "bytes",
        "ETag": etag,
        "Content-Disposition": content_disposition(
            name=info.file_name or f"file{mimetypes.guess_extension(ctype) or ''}",
            inline=inline_allowed(ctype) and "download" not in request.GET,
        ),
        "Cache-Control": "private, max-age=3600",
    }
    if request.method == "HEAD" or answer.part.length == 0:
        response = HttpResponse(b"", status=answer.status, content_type=ctype, headers=headers)
        response["X-Content-Type-Options"] = "nosniff"
        STREAM_ANSWERS.labels(str(answer.status), request.method).inc()
        return response
    user_id = check.user_id
    member, full = await serving().slots.take(user_id=user_id, address=client_ip(request))
    if member is None:
        limit = getattr(settings, LIMITS[full])
        return problem(request, 429, BUSY[full], headers={"Retry-After": "30"}, n=limit)
    # The request's database connection, in its own thread, is given back now, not when the
    # response ends (minutes or hours later): open streams never hold PostgreSQL's connections.
    await sync_to_async(connections.close_all)()
    body = stream_body(downloader, chat_id, message_id, answer.part.start, answer.part.end, member, check)
    response = StreamingHttpResponse(body, status=answer.status, content_type=ctype, headers=headers)
    response["X-Content-Type-Options"] = "nosniff"
    STREAM_ANSWERS.labels(str(answer.status), request.method).inc()
    return response


async def stream_body(downloader, chat_id: int, message_id: int, start: int, end: int, member: str, check: LinkCheck):
    """Bytes [start, end), as the reader gives them; short when Telegram cannot go on (the client
    sees fewer bytes than Content-Length and resumes). Ends, and gives the slot back, however the
    stream ends: done, cut, or the client gone (the reads in flight are cancelled)."""
    slots = serving().slots
    bot = downloader.name
    sent = uncounted = 0
    STREAMS_OPEN.labels(bot).inc()
    reads = downloader.read(chat_id, message_id, start, end)
    try:
        await slots.count(streams=1)
        async for piece in reads:
            sent += len(piece)
            uncounted += len(piece)
            STREAM_BYTES.labels(bot).inc(len(piece))
            yield piece
            if uncounted >= COUNT_EVERY:
                uncounted = await bytes_counted(slots, uncounted)
    except (StreamBroken, FileGone) as exc:
        STREAMS_CUT.labels(bot).inc()
        log.warning("stream cut share=%s at byte %d of [%d, %d): %s", check.stored.share_id, start + sent, start, end, exc)
        if isinstance(exc, FileGone):
            await sync_to_async(stream_file_gone)(stored=check.stored)
    finally:
        STREAMS_OPEN.labels(bot).dec()
        # Shielded: a client that goes away cancels this task, maybe right here; the reads are
        # still closed, the slot given back and the bytes counted.
        serving().trimmer.ended += 1
        await asyncio.shield(stream_end(reads, slots, member, uncounted))


async def bytes_counted(slots, uncounted: int) -> int:
    """Add `uncounted` bytes to the dashboard's counts; what is still to count (0, or all of them
    when Redis did not answer: added with the next, and the stream goes on)."""
    try:
        await slots.count(sent=uncounted)
    except RedisError as exc:
        log.warning("stream: %d bytes sent not counted yet: %s", uncounted, exc)
        return uncounted
    return 0


async def stream_end(reads, slots, member: str, uncounted: int) -> None:
    try:
        await reads.aclose()
    finally:
        await slots.give_back(member)
        await slots.count(sent=uncounted)


@require_http_methods(["GET", "HEAD"])
async def watch(request, token: str):
    """The player page of a video or audio file (the browser's own player), else a download page
    with the file's name, size and type."""
    check = await sync_to_async(stream_token_check)(token=token)
    if (page := await sync_to_async(refused)(request, check)) is not None:
        return page
    try:
        _, _, _, info = await file_located(check)
    except FileGone:
        return problem(request, 404, GONE)
    ctype = content_type_for(info)
    name = info.file_name or f"file{mimetypes.guess_extension(ctype) or ''}"
    src = f"/f/{token}/{quote(name, safe='')}"
    public = settings.STREAM_PUBLIC_URL.rstrip("/") or request.build_absolute_uri("/").rstrip("/")
    absolute = public + src
    context = {
        "name": name,
        "size": info.size,
        "type": ctype,
        "kind": "video" if ctype.startswith("video/") else "audio" if ctype.startswith("audio/") else "",
        "src": src,
        "download": src + "?download=1",
        "page": public + f"/watch/{token}",
        "open_in": open_in_links(url=absolute, name=name, ctype=ctype) if ctype.startswith(PLAYABLE) else [],
        "expires_at": check.expires_at,
    }
    body = render_to_string("stream/watch.html", context)
    return answered(request, HttpResponse(body, content_type="text/html; charset=utf-8"))


def open_in_links(*, url: str, name: str, ctype: str) -> list[tuple[str, str]]:
    """(label, address) of the usual players, each opening `url`: VLC and MX Player on Android
    (intent: addresses naming the app's package), VLC (its x-callback-url `stream` action) and
    Infuse (its x-callback-url `play` action) on iOS."""
    scheme, rest = url.split("://", 1)
    kind = "video/*" if ctype.startswith("video/") else "audio/*"
    title = quote(name, safe="")
    intent = f"intent://{rest}#Intent;scheme={scheme};type={kind};S.title={title};package={{}};end"
    encoded = quote(url, safe="")
    return [
        ("VLC (Android)", intent.format("org.videolan.vlc")),
        ("MX Player (Android)", intent.format("com.mxtech.videoplayer.ad")),
        ("VLC (iPhone, iPad)", f"vlc-x-callback://x-callback-url/stream?url={encoded}"),
        ("Infuse (iPhone, iPad)", f"infuse://x-callback-url/play?url={encoded}&filename={title}"),
    ]


def asset(request, name: str):
    """The player page's own script and style (no third-party script, no inline script)."""
    if name not in ASSET_TYPES:
        return problem(request, 404, ("Not found", "There is nothing at this address."))
    response = HttpResponse((ASSETS / name).read_bytes(), content_type=ASSET_TYPES[name])
    response["Cache-Control"] = "public, max-age=3600"
    return answered(request, response)


def not_found(request, exception=None):
    """Any other address of the streaming origin."""
    return problem(request, 404, ("Not found", "There is nothing at this address. Open the file link in the bot again."))
