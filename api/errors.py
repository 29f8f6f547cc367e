"""Every answer of the API is JSON, the failures of what it depends on included: DRF's own errors
as DRF makes them; a body nested too deeply for the parser is a 400; the database or Redis
unreachable is a 503 and media storage full or read-only a 507 / 503, each with a one-line
`detail` (the reason goes to the log, not to the caller)."""

from __future__ import annotations

import errno
import logging

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import JsonResponse
from redis import RedisError
from rest_framework import exceptions, parsers, status
from rest_framework.views import exception_handler

from botapp.services.messages import AttachmentStoreError

log = logging.getLogger(__name__)

DEPTH_HELP = "The JSON body is nested too deeply to read."


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested deeper than Python's recursion limit is a 400, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise exceptions.ParseError(DEPTH_HELP) from exc


def api_exception_handler(exc, context):
    """DRF's handler, then the failures of the API's dependencies as JSON with their status."""
    response = exception_handler(exc, context)
    if response is not None:
        return response
    view = type(context.get("view")).__name__
    if isinstance(exc, AttachmentStoreError):
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        log.error("api: attachment not stored view=%s: %s", view, exc)
        return JsonResponse(
            {"detail": "The server has no room for the files now: try again later." if full else "Files cannot be stored now."},
            status=status.HTTP_507_INSUFFICIENT_STORAGE if full else status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    if isinstance(exc, (OperationalError, InterfaceError)) or (isinstance(exc, DatabaseError) and _connection_lost(exc)):
        log.error("api: database unreachable view=%s: %s", view, exc)
        return _unavailable("The database is not answering: try again in a minute.")
    if isinstance(exc, RedisError):
        log.error("api: redis unreachable view=%s: %s", view, exc)
        return _unavailable("A service the API needs is not answering: try again in a minute.")
    return None


def _connection_lost(exc: DatabaseError) -> bool:
    return "connection" in str(exc).lower()


def _unavailable(detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    response["Retry-After"] = "60"
    return response
