"""Shortlinks for the "Verify" button: the user passes the shortener's ad page on the way back.

Most shorteners share one HTTP API: GET {api_url}?api={key}&url={long url} answers JSON with
`shortenedUrl`. An empty api_url (or "none") means the direct link.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request

log = logging.getLogger(__name__)

TIMEOUT = 10  # seconds; the user is waiting for the button


class ShortenerError(Exception):
    pass


class HttpShortener:
    def __init__(self, api_url: str, api_key: str):
        self.api_url = api_url
        self.api_key = api_key

    def shorten(self, url: str) -> str:
        query = urllib.parse.urlencode({"api": self.api_key, "url": url})
        sep = "&" if "?" in self.api_url else "?"
        try:
            with urllib.request.urlopen(f"{self.api_url}{sep}{query}", timeout=TIMEOUT) as response:  # noqa: S310 - operator-configured URL
                body = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise ShortenerError(f"shortener request failed: {exc}") from exc
        short = body.get("shortenedUrl") if isinstance(body, dict) else None
        if not isinstance(short, str) or not short.startswith(("http://", "https://")):
            raise ShortenerError(f"shortener answered without a shortenedUrl: {str(body)[:200]}")
        return short


class DirectLinks:
    def shorten(self, url: str) -> str:
        return url


def shortener_for(*, api_url: str, api_key: str):
    """The shortener Bot settings describe: the HTTP API at `api_url`, or direct links when it is
    empty or "none"."""
    if not api_url.strip() or api_url.strip().lower() == "none":
        return DirectLinks()
    return HttpShortener(api_url.strip(), api_key.strip())


def shortlink_create(*, shortener, url: str) -> str:
    """The shortlink, or the direct link when the shortener fails (logged): users are never stuck."""
    try:
        return shortener.shorten(url)
    except ShortenerError as exc:
        log.error("shortener failed, giving the direct link: %s", exc)
        return url
