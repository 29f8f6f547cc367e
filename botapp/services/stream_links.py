"""Stream and download links to a stored file's messages, signed, expiring, revocable.

A link names one message of a stored file by the file's share id (72 random bits, never a row
number) and the message's place in it, the file's stream generation, when the link expires and,
when the bot gave it to a user, the user's id; an HMAC-SHA256 over all of it, with a key derived
from SECRET_KEY for this use alone (Django's `salted_hmac` with its own salt), closes it. Nothing of
it can be changed without the key: another message, another user, a later expiry or an older
generation all fail the check. "Revoke stream links" on the file's console page moves its
generation on, so every link made before stops working, and no other file's link is touched.

Links point at the streaming process's own origin (STREAM_PUBLIC_URL), never the console's.
"""

from __future__ import annotations

import base64
import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from django.conf import settings
from django.db.models import F
from django.utils.crypto import constant_time_compare, salted_hmac

from botapp import clock
from botapp.models import BotSettings, StoredFile, TelegramUser
from botapp.services.premium import user_is_premium

SALT = "courier.stream-link.v1"  # the key's own derivation: no other signature of ours verifies with it
MAC_CHARS = 22  # 132 bits of the HMAC-SHA256 in base64url: far beyond any guessing
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
# share id . index . generation . expiry (unix seconds) . user id (empty: the console's) . mac
TOKEN_RE = re.compile(
    r"^([A-Za-z0-9_-]{1,32})\.([0-9a-z]{1,4})\.([0-9a-z]{1,7})\.([0-9a-z]{1,8})\.([0-9a-z]{0,14})\.([A-Za-z0-9_-]{22})$"
)


class LinkState(enum.Enum):
    OK = "ok"
    BAD = "bad"  # not one of ours, or changed
    EXPIRED = "expired"
    REVOKED = "revoked"  # made before the file's links were revoked
    GONE = "gone"  # the stored file (or that message of it) no longer exists


@dataclass(frozen=True)
class LinkCheck:
    state: LinkState
    stored: StoredFile | None = None
    index: int = 0
    user_id: int | None = None
    expires_at: datetime | None = None

    @property
    def message_id(self) -> int:
        return self.stored.message_ids[self.index]


@dataclass(frozen=True)
class StreamUrls:
    watch: str  # the player page (or the download page of a file that does not play)
    download: str  # the bytes, as an attachment


def _b36(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = DIGITS[r] + out
        if not n:
            return out


def _mac(body: str) -> str:
    digest = salted_hmac(SALT, body, secret=settings.SECRET_KEY, algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()[:MAC_CHARS]


def stream_token_make(*, stored: StoredFile, index: int, expires_at: datetime, user_id: int | None = None) -> str:
    """The signed token naming message `index` of `stored` until `expires_at` (whole seconds),
    for `user_id` (None: a link the console shows)."""
    if not 0 <= index < len(stored.message_ids):
        raise ValueError(f"file {stored.share_id} has no message {index}")
    body = ".".join(
        [
            stored.share_id,
            _b36(index),
            _b36(stored.stream_generation),
            _b36(int(expires_at.timestamp())),
            _b36(user_id) if user_id is not None else "",
        ]
    )
    return f"{body}.{_mac(body)}"


def stream_token_check(*, token: str, now: datetime | None = None) -> LinkCheck:
    """What `token` names, or why it is refused: BAD (not ours, or changed: the signature is
    checked before anything else is believed or looked up), EXPIRED, GONE (the file or its message
    removed), REVOKED (the file's links were revoked after it was made). One query, for a token
    that is well signed."""
    match = TOKEN_RE.match(token)
    if match is None:
        return LinkCheck(LinkState.BAD)
    share_id, index, generation, expiry, user, mac = match.groups()
    body = token[: -len(mac) - 1]
    if not constant_time_compare(_mac(body), mac):
        return LinkCheck(LinkState.BAD)
    index, generation = int(index, 36), int(generation, 36)
    expires_at = datetime.fromtimestamp(int(expiry, 36), tz=UTC)
    user_id = int(user, 36) if user else None
    if expires_at <= (now or clock.now()):
        return LinkCheck(LinkState.EXPIRED, index=index, user_id=user_id, expires_at=expires_at)
    stored = StoredFile.objects.filter(share_id=share_id).first()
    if stored is None or index >= len(stored.message_ids):
        return LinkCheck(LinkState.GONE, stored=stored, index=index, user_id=user_id, expires_at=expires_at)
    state = LinkState.OK if generation == stored.stream_generation else LinkState.REVOKED
    return LinkCheck(state, stored=stored, index=index, user_id=user_id, expires_at=expires_at)


def stream_urls(*, token: str, name: str = "") -> StreamUrls:
    """The addresses of a token on the streaming origin (STREAM_PUBLIC_URL). `name`, the file's
    name when known, ends the download address, for players that read the type from it."""
    base = settings.STREAM_PUBLIC_URL.rstrip("/")
    tail = f"/{quote(name, safe='')}" if name else ""
    return StreamUrls(watch=f"{base}/watch/{token}", download=f"{base}/f/{token}{tail}?download=1")


def stream_links_offered(*, stored: StoredFile, conf: BotSettings, user: TelegramUser | None) -> bool:
    """Whether a user who passed the file's gates gets stream links with it: the streaming origin
    is configured, and the file's mode (its own, else Bot settings') is on, or premium and the
    user is premium."""
    if not settings.STREAM_PUBLIC_URL:
        return False
    mode = stored.stream_mode_for(conf)
    if mode == BotSettings.StreamLinks.ON:
        return True
    return mode == BotSettings.StreamLinks.PREMIUM and user is not None and user_is_premium(user=user)


def stream_link_switched(*, check: LinkCheck, conf: BotSettings) -> str | None:
    """Why a valid link no longer opens its file though it has not expired: "off" (its file's
    stream links are switched off), "premium" (they are for premium users only now, and the user
    the link was given to is not premium: their plan ended, or the mode changed after the link was
    given), or None (it opens). Looked at on every request, as the links were offered: a link the
    console or the API made (no user) works whatever the mode but off."""
    mode = check.stored.stream_mode_for(conf)
    if mode == BotSettings.StreamLinks.OFF:
        return "off"
    if mode == BotSettings.StreamLinks.PREMIUM and check.user_id is not None:
        user = TelegramUser.objects.filter(telegram_id=check.user_id).first()
        if user is None or not user_is_premium(user=user):
            return "premium"
    return None


def stream_links_for(
    *, stored: StoredFile, conf: BotSettings, user_id: int | None, now: datetime | None = None
) -> list[StreamUrls]:
    """Fresh links to each message of `stored`, in order, lasting the file's stream lifetime (its
    own, else Bot settings') from `now`, for `user_id` (None: the console's)."""
    expires_at = (now or clock.now()) + timedelta(hours=stored.stream_lifetime_hours_for(conf))
    return [
        stream_urls(token=stream_token_make(stored=stored, index=i, expires_at=expires_at, user_id=user_id))
        for i in range(len(stored.message_ids))
    ]


def stream_links_revoke(*, stored: StoredFile) -> int:
    """Make every stream link of `stored` made so far stop working (links of other files keep
    working), and forget that it was found gone. Returns the new generation."""
    StoredFile.objects.filter(pk=stored.pk).update(stream_generation=F("stream_generation") + 1, stream_gone_at=None)
    stored.refresh_from_db(fields=["stream_generation", "stream_gone_at"])
    return stored.stream_generation


def stream_file_gone(*, stored: StoredFile) -> None:
    """Record that the streaming process found the file's message gone (the console says so),
    once: the first time counts."""
    StoredFile.objects.filter(pk=stored.pk, stream_gone_at__isnull=True).update(stream_gone_at=clock.now())
