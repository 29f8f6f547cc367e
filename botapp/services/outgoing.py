"""Messages operators compose in the admin (broadcasts, sequence steps): their buttons, including
tracked ones, sending them to one user, and what it means when Telegram refuses a send
(`send_failure`, the one mapping every sweep that sends to users applies).

Buttons are written one row per line: `Text | https://url`, with `||` between buttons on a row.
A third part names the button for click tracking: `Join | https://t.me/+abc | joined`. A tracked
button's URL goes through Courier's redirect (`PUBLIC_URL/go/…`), which records a ButtonClick for
that user and forwards them to the link; sequence steps can then depend on "clicked X".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils.html import escape

from botapp import clock
from botapp.models import ButtonClick, SendStatus, TelegramUser
from botapp.services.users import unreachable_state
from botapp.telegram.gateway import Button, FloodWait, Gateway, Media, OutcomeUnknown, Sent, TelegramError
from botapp.telegram.limits import BUTTON_TEXT_LENGTH

KEY_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
CLICK_SALT = "courier.click"


@dataclass(frozen=True)
class ButtonSpec:
    text: str
    url: str
    key: str = ""  # tracked when set

    def render(self, user_id: int | None) -> Button:
        if self.key and user_id is not None:
            return Button(self.text, url=click_url(user_id=user_id, key=self.key, url=self.url))
        return Button(self.text, url=self.url)


def buttons_parse(*, text: str) -> list[list[ButtonSpec]]:
    """Parse the admin's button lines into rows of buttons; a ValidationError names every line that
    is wrong, each once (no link, a scheme other than https/http/tg, a bad click key, tracking
    without PUBLIC_URL)."""
    rows, errors = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(_button_row(number, line))
        except ValidationError as exc:
            errors.extend(exc.messages)
    if errors:
        raise ValidationError(errors)
    return rows


def _button_row(number: int, line: str) -> list[ButtonSpec]:
    row = []
    for part in line.split("||"):
        pieces = [p.strip() for p in part.split("|")]
        if len(pieces) not in (2, 3) or not pieces[0] or not pieces[1]:
            raise ValidationError(
                f'Line {number}: write a button as "Text | https://example.com" (optionally "| key" to track clicks).'
            )
        label, url, key = pieces[0], pieces[1], pieces[2] if len(pieces) == 3 else ""
        if not url.startswith(("https://", "http://", "tg://")):
            raise ValidationError(f"Line {number}: {escape(url)} is not a link (https://, http:// or tg://).")
        if len(label) > BUTTON_TEXT_LENGTH:
            raise ValidationError(f"Line {number}: button text is at most {BUTTON_TEXT_LENGTH} characters.")
        if key and not KEY_RE.match(key):
            raise ValidationError(f"Line {number}: a click key uses a-z, 0-9, _ and - only (got {escape(key)!s}).")
        if key and not settings.PUBLIC_URL:
            raise ValidationError(f"Line {number}: tracking clicks needs PUBLIC_URL (the admin's public https address).")
        row.append(ButtonSpec(label, url, key))
    return row


def click_url(*, user_id: int, key: str, url: str) -> str:
    """The tracked URL for one user's button: Courier's redirect with a signed token (user, key,
    target), so the click cannot be forged or pointed elsewhere."""
    token = signing.dumps({"u": user_id, "k": key, "l": url}, salt=CLICK_SALT, compress=True)
    return f"{settings.PUBLIC_URL.rstrip('/')}/go/{token}/"


def click_record(*, token: str) -> str | None:
    """A user opened a tracked button: record it and return where it leads (None if forged)."""
    try:
        data = signing.loads(token, salt=CLICK_SALT)
    except signing.BadSignature:
        return None
    click_count(user_id=data["u"], key=data["k"])
    return data["l"]


def click_count(*, user_id: int, key: str) -> None:
    """One row per user and key: an UPDATE for every click but the first."""
    now = clock.now()
    if ButtonClick.objects.filter(user_id=user_id, button=key).update(count=F("count") + 1, last_clicked_at=now):
        return
    try:
        with transaction.atomic():
            ButtonClick.objects.create(user_id=user_id, button=key, clicked_at=now, last_clicked_at=now)
    except IntegrityError:  # a simultaneous first click, or a user deleted since
        ButtonClick.objects.filter(user_id=user_id, button=key).update(count=F("count") + 1, last_clicked_at=now)


def click_token_of(*, url: str) -> str | None:
    """The token of one of our tracked URLs (for the sandbox, which follows links itself)."""
    prefix = f"{settings.PUBLIC_URL.rstrip('/')}/go/"
    if settings.PUBLIC_URL and url.startswith(prefix):
        return url[len(prefix) :].rstrip("/")
    return None


@dataclass(frozen=True)
class Outgoing:
    """A composed message, parsed once, sent to many."""

    text: str
    media: Media | None
    rows: list[list[ButtonSpec]]
    protect: bool

    @classmethod
    def compose(cls, *, text: str, media_kind: str, media: str, buttons: str, protect: bool) -> Outgoing:
        return cls(
            text=text, media=Media(media_kind, media) if media_kind else None, rows=buttons_parse(text=buttons), protect=protect
        )

    def send(self, gateway: Gateway, chat_id: int, *, user_id: int | None = None) -> Sent:
        """`user_id` is the TelegramUser pk that tracked buttons record clicks for."""
        buttons = [[spec.render(user_id) for spec in row] for row in self.rows] or None
        if self.media is not None:
            return gateway.send_media(chat_id, self.media, caption=self.text, buttons=buttons, protect=self.protect)
        return gateway.send_text(chat_id, self.text, buttons=buttons, protect=self.protect)


UNREACHABLE_ERRORS = {TelegramUser.State.BLOCKED: "blocked the bot", TelegramUser.State.DEACTIVATED: "account deactivated"}


@dataclass(frozen=True)
class SendFailure:
    """What a send that Telegram refused means for its row and its user."""

    status: str  # the row's SendStatus
    error: str  # kept on the row (at most 255 characters)
    unreachable: str = ""  # the TelegramUser.State to mark the user with (users_mark_unreachable); "": none


def send_failure(*, exc: TelegramError, unreachable_status: str) -> SendFailure:
    """The one mapping from a refused send to its result, for every sweep that sends to users:

    - FloodWait: Telegram did not send it, so it is `pending` again (a later run sends it);
    - the user blocked the bot or deleted their account: `unreachable_status` (a broadcast counts
      them as blocked, a sequence skips the step), and the user is to be marked unreachable;
    - OutcomeUnknown: it may have arrived, so `interrupted`, never sent again (at most once);
    - any other refusal: `failed`, final.
    """
    if isinstance(exc, FloodWait):
        return SendFailure(SendStatus.PENDING, str(exc)[:255])
    if state := unreachable_state(exc=exc):
        return SendFailure(unreachable_status, UNREACHABLE_ERRORS[state], unreachable=state)
    if isinstance(exc, OutcomeUnknown):
        return SendFailure(SendStatus.INTERRUPTED, str(exc)[:255])
    return SendFailure(SendStatus.FAILED, str(exc)[:255])
