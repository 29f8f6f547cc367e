"""Messages operators compose in the admin (broadcasts, sequence steps): their buttons, including
tracked ones, sending them to one user, and what it means when Telegram refuses a send
(`send_failure`, the one mapping every sweep that sends to users applies).

The button grammar (`Text | https://url | key`, `Text | tap:key`) is botapp/models/buttons.py. A
callback button carries signed data (`tap_data`); a tap is handled by services/taps.py. A tracked button's URL goes through
Courier's redirect (`PUBLIC_URL/go/…`), which records a ButtonClick for that user (once per user and
key) and forwards them to the link; sequence steps can then depend on "clicked X". The redirect
works for CLICK_LINK_DAYS after the message was sent.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils.crypto import constant_time_compare, salted_hmac

from botapp import clock
from botapp.models import ButtonClick, SendStatus, TelegramUser
from botapp.models.buttons import ButtonSpec, buttons_parse
from botapp.services.telegram_html import telegram_html_length
from botapp.services.users import unreachable_state
from botapp.telegram import retry
from botapp.telegram.gateway import (
    AlreadySent,
    Button,
    CopyIncomplete,
    Gateway,
    Media,
    OutcomeUnknown,
    SendItem,
    Sent,
    TelegramError,
)
from botapp.telegram.limits import ALBUM_GROUPS, ALBUM_SIZE, CALLBACK_DATA_BYTES, CAPTION_LENGTH, callback_data_length

CLICK_SALT = "courier.click"
TAP_SALT = "courier.tap"
TAP_CALLBACK = "tap"  # the router's name for these callbacks
TAP_SIGNATURE_BYTES = 12  # 96 bits, 16 characters: the data stays far below 64 bytes
# The opt-out button (Bot settings) under broadcasts and steps: a callback button signed as a tap
# is, at the place "x" (its confirmation "x.y", "x.n"), with this key (services/optout.py).
OPTOUT_REF = "x"
OPTOUT_KEY = "optout"


class ClickLinkExpired(Exception):
    """A tracked button opened more than CLICK_LINK_DAYS after its message was sent."""


def button_render(*, spec: ButtonSpec, user_id: int | None, chat_id: int | None = None, ref: str = "") -> Button:
    """The button one user gets: a tracked one goes through Courier's redirect, signed for them; a
    callback button carries `tap_data` for the chat it goes to (`ref`: where it is written)."""
    if spec.tap:
        if chat_id is None or not ref:
            raise ValueError("a callback button is rendered for a chat, from a message that has a source")
        return Button(spec.text, callback_data=tap_data(chat_id=chat_id, ref=ref, key=spec.key))
    if spec.key and user_id is not None:
        return Button(spec.text, url=click_url(user_id=user_id, key=spec.key, url=spec.url))
    return Button(spec.text, url=spec.url)


def keyboard_render(
    *, rows: Sequence[Sequence[ButtonSpec]], user_id: int | None, chat_id: int, source: str, optout: str = ""
) -> list[list[Button]] | None:
    """The buttons one chat gets for these rows (None: no buttons). `source` names where the rows
    are written ("s<step id>", "b<broadcast id>", "w" for the welcome), so a tap finds its button.
    `optout`: the text of the opt-out button, added as a row of its own under them ("": none)."""
    keyboard = [
        [button_render(spec=spec, user_id=user_id, chat_id=chat_id, ref=f"{source}.{r}.{c}") for c, spec in enumerate(row)]
        for r, row in enumerate(rows)
    ]
    if optout:
        keyboard.append([optout_button(chat_id=chat_id, text=optout, ref=OPTOUT_REF)])
    return keyboard or None


def optout_button(*, chat_id: int, text: str, ref: str) -> Button:
    """The opt-out button (`ref` OPTOUT_REF) or one of its confirmation's (OPTOUT_REF + ".y" / ".n"),
    signed for `chat_id` as a tap button is (`tap_data`), so another chat cannot forge it."""
    return Button(text, callback_data=tap_data(chat_id=chat_id, ref=ref, key=OPTOUT_KEY))


def tap_data(*, chat_id: int, ref: str, key: str) -> str:
    """A callback button's data: `tap:<ref>:<signature>`, the signature an HMAC under SECRET_KEY of
    the chat, the button's place (`ref`) and its key, cut to TAP_SIGNATURE_BYTES. A tap whose data
    was not made here for this chat, or whose button has changed its key since, does not match
    (`tap_data_valid`). Always within Telegram's CALLBACK_DATA_BYTES."""
    data = f"{TAP_CALLBACK}:{ref}:{_tap_signature(chat_id=chat_id, ref=ref, key=key)}"
    if callback_data_length(data) > CALLBACK_DATA_BYTES:
        raise ValueError(f"callback data of {ref} is over {CALLBACK_DATA_BYTES} bytes")
    return data


def tap_data_valid(*, chat_id: int, ref: str, key: str, signature: str) -> bool:
    """Whether `signature` is the one `tap_data` makes for this chat, place and key."""
    return constant_time_compare(signature, _tap_signature(chat_id=chat_id, ref=ref, key=key))


def _tap_signature(*, chat_id: int, ref: str, key: str) -> str:
    digest = salted_hmac(TAP_SALT, f"{chat_id}:{ref}:{key}", algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest[:TAP_SIGNATURE_BYTES]).decode().rstrip("=")


def click_url(*, user_id: int, key: str, url: str) -> str:
    """The tracked URL for one user's button: Courier's redirect with a signed token (user, key,
    target, when it was made by the clock), so the click cannot be forged, pointed elsewhere or
    kept working past CLICK_LINK_DAYS."""
    data = {"u": user_id, "k": key, "l": url, "t": int(clock.now().timestamp())}
    token = signing.dumps(data, salt=CLICK_SALT, compress=True)
    return f"{settings.PUBLIC_URL.rstrip('/')}/go/{token}/"


def click_record(*, token: str) -> str | None:
    """A user opened a tracked button: record their click on its key (once per user and key, however
    often the link is opened) and return where it leads. None if the token is forged; raises
    ClickLinkExpired, recording nothing, once CLICK_LINK_DAYS have passed since it was made."""
    lifetime = timedelta(days=settings.CLICK_LINK_DAYS)
    try:
        data = signing.loads(token, salt=CLICK_SALT)
    except signing.BadSignature:
        return None
    made = data.get("t")
    if made is None:  # made before links carried their time: the signature's own (system clock)
        try:
            signing.loads(token, salt=CLICK_SALT, max_age=lifetime)
        except signing.SignatureExpired:
            raise ClickLinkExpired from None
    elif clock.now().timestamp() - made > lifetime.total_seconds():
        raise ClickLinkExpired
    click_count(user_id=data["u"], key=data["k"])
    return data["l"]


def click_count(*, user_id: int, key: str, every: bool = False) -> bool:
    """The user clicked `key`: one row per user and key, written by the first click (True); a later
    one, or the same link opened again, only moves `last_clicked_at` (False), so an opened link
    replayed, refreshed or shared on counts one click. With `every` (a callback button's tap,
    which Telegram sends once and runbot handles once) a later click adds one to `count` too, so
    /stats counts clicks as well as the users who clicked."""
    now = clock.now()
    change = {"last_clicked_at": now, **({"count": F("count") + 1} if every else {})}
    if ButtonClick.objects.filter(user_id=user_id, button=key).update(**change):
        return False
    try:
        with transaction.atomic():
            ButtonClick.objects.create(user_id=user_id, button=key, clicked_at=now, last_clicked_at=now)
    except IntegrityError:  # a simultaneous first click, or a user deleted since
        ButtonClick.objects.filter(user_id=user_id, button=key).update(last_clicked_at=now)
        return False
    return True


def click_token_of(*, url: str) -> str | None:
    """The token of one of our tracked URLs (for the sandbox, which follows links itself)."""
    prefix = f"{settings.PUBLIC_URL.rstrip('/')}/go/"
    if settings.PUBLIC_URL and url.startswith(prefix):
        return url[len(prefix) :].rstrip("/")
    return None


def albums_of(*, media: Sequence[Media]) -> list[list[Media]]:
    """Consecutive attachments as Telegram lets them share albums, in the order given: a new album
    starts when the kind of group changes or the album holds ALBUM_SIZE (10) already."""
    albums: list[list[Media]] = []
    for item in media:
        current = albums[-1] if albums else None
        if current and len(current) < ALBUM_SIZE and ALBUM_GROUPS.get(current[0].kind) == ALBUM_GROUPS.get(item.kind):
            current.append(item)
        else:
            albums.append([item])
    return albums


@dataclass(frozen=True)
class Outgoing:
    """A composed message, parsed once, sent to many."""

    text: str
    media: Media | None
    rows: list[list[ButtonSpec]]
    protect: bool
    attachments: tuple[Media, ...] = ()  # a scheduled message's files, by Telegram file id
    source: str = ""  # where its buttons are written, for taps: "s<step id>", "b<broadcast id>", "w"
    optout: str = ""  # the opt-out button's text, under the buttons ("": none)

    @classmethod
    def compose(
        cls,
        *,
        text: str,
        media_kind: str,
        media: str,
        buttons: str,
        protect: bool,
        attachments: Sequence[Media] = (),
        source: str = "",
        optout: str = "",
    ) -> Outgoing:
        return cls(
            text=text,
            media=Media(media_kind, media) if media_kind else None,
            rows=buttons_parse(text=buttons, check_links=False),
            protect=protect,
            attachments=tuple(attachments),
            source=source,
            optout=optout,
        )

    def send(self, gateway: Gateway, chat_id: int, *, user_id: int | None = None, key: str = "") -> Sent:
        """`user_id` is the TelegramUser pk that tracked buttons record clicks for; `key`: the
        send's random_id key (its row's, `send_key`). Returns the first message sent; several
        attachments that stop partway raise CopyIncomplete (what arrived)."""
        buttons = keyboard_render(rows=self.rows, user_id=user_id, chat_id=chat_id, source=self.source, optout=self.optout)
        if self.attachments:
            return self._send_attachments(gateway, chat_id, buttons, key)
        if self.media is not None:
            return gateway.send_media(chat_id, self.media, caption=self.text, buttons=buttons, protect=self.protect, key=key)
        return gateway.send_text(chat_id, self.text, buttons=buttons, protect=self.protect, key=key)

    def item(self, chat_id: int, *, user_id: int | None = None, key: str = "") -> SendItem | None:
        """This message to `chat_id` as one send of a batch (`Gateway.send_many`), as `send` would
        send it; None when it takes several messages (attachments): then `send` it."""
        if self.attachments:
            return None
        buttons = keyboard_render(rows=self.rows, user_id=user_id, chat_id=chat_id, source=self.source, optout=self.optout)
        return SendItem(chat_id, self.text, media=self.media, buttons=buttons, protect=self.protect, key=key)

    def _send_attachments(self, gateway: Gateway, chat_id: int, buttons, key: str = "") -> Sent:
        """One attachment: one message with the text as caption and the buttons. Several: each album
        (or lone file) in turn; the text is the first one's caption when it fits and there are no
        buttons (an album cannot carry buttons), otherwise a message of its own after the files."""
        albums = albums_of(media=self.attachments)
        if len(albums) == 1 and len(albums[0]) == 1:
            return gateway.send_media(
                chat_id, albums[0][0], caption=self.text, buttons=buttons, protect=self.protect, key=key
            )  # fmt: skip
        as_caption = not buttons and telegram_html_length(text=self.text) <= CAPTION_LENGTH
        sent: list[Sent] = []
        earlier = 0  # parts an earlier attempt of this send delivered (AlreadySent: ids unknown)

        def part(n: int, send):
            """Each part of the message is a send of its own key: a repeat delivers only the parts
            the earlier attempt did not."""
            nonlocal earlier
            try:
                return send(f"{key}.{n}" if key else "")
            except AlreadySent:
                earlier += 1
                return []

        try:
            for n, album in enumerate(albums):
                caption = self.text if as_caption and n == 0 else ""
                if len(album) == 1:
                    sent.extend(part(n, lambda k, m=album[0], c=caption: [gateway.send_media(chat_id, m, caption=c, protect=self.protect, key=k)]))  # fmt: skip
                else:
                    sent.extend(part(n, lambda k, a=album, c=caption: gateway.send_album(chat_id, a, caption=c, protect=self.protect, key=k)))  # fmt: skip
            if self.text.strip() and not as_caption:
                sent.extend(part(len(albums), lambda k: [gateway.send_text(chat_id, self.text, buttons=buttons, protect=self.protect, key=k)]))  # fmt: skip
        except TelegramError as exc:
            if sent or earlier:
                raise CopyIncomplete(sent=sent, cause=exc) from exc
            raise
        if not sent:
            raise AlreadySent("every part was delivered by an earlier attempt")
        return sent[0]


ALREADY_SENT = "delivered by an earlier attempt (Telegram refused the repeat; message id unknown)"
REPEAT = "outcome unknown, to be sent again with the same random_id: "


def send_key(*, kind: str, row_id: int, made_at) -> str:
    """The random_id key of the send for one row (`random_id_of`): its kind ("b" broadcast
    delivery, "s" sequence message, "d" file delivery, "n" "deleted" notice, "p" premium end notice), id, and when its row or its parent was made, in
    microseconds (a database started afresh numbers rows from 1 again)."""
    return f"{kind}{row_id}@{int(made_at.timestamp() * 1_000_000)}"


UNREACHABLE_ERRORS = {TelegramUser.State.BLOCKED: "blocked the bot", TelegramUser.State.DEACTIVATED: "account deactivated"}


@dataclass(frozen=True)
class SendFailure:
    """What a send that Telegram refused means for its row and its user."""

    status: str  # the row's SendStatus
    error: str  # kept on the row (at most 255 characters)
    unreachable: str = ""  # the TelegramUser.State to mark the user with (users_mark_unreachable); "": none
    # Pending because its outcome is unknown: sent again with the same random_id (its row's
    # `retry_from` says since when), within TELEGRAM_RANDOM_ID_WINDOW.
    repeat: bool = False


def send_failure(*, exc: TelegramError, unreachable_status: str) -> SendFailure:
    """The one mapping from a refused send to its result, for every sweep that sends to users:

    - FloodWait, or a transient error (the request never reached Telegram, or Telegram refused it
      before processing it): nothing was sent, so it is `pending` again (a later run sends it);
      which refusals are sent again, and how, is botapp/telegram/retry.py's rule (`send_later`);
    - the user blocked the bot or deleted their account: `unreachable_status` (a broadcast counts
      them as blocked, a sequence skips the step), and the user is to be marked unreachable;
    - AlreadySent: an earlier attempt with the same random_id delivered it: `sent` (message id
      unknown);
    - OutcomeUnknown: it may have arrived. When every message of it carried its row's random_id
      (`repeatable`), `pending` again to be sent with the same one (Telegram delivers it once);
      otherwise `interrupted`, never sent again (at most once);
    - any other refusal: `failed`, final.
    """
    later = retry.send_later(exc)
    if later == retry.AGAIN:
        return SendFailure(SendStatus.PENDING, str(exc)[:255])
    if isinstance(exc, AlreadySent):
        return SendFailure(SendStatus.SENT, ALREADY_SENT)
    if state := unreachable_state(exc=exc):
        return SendFailure(unreachable_status, UNREACHABLE_ERRORS[state], unreachable=state)
    if later == retry.REPEAT:
        return SendFailure(SendStatus.PENDING, f"{REPEAT}{exc}"[:255], repeat=True)
    if isinstance(exc, OutcomeUnknown):
        return SendFailure(SendStatus.INTERRUPTED, str(exc)[:255])
    return SendFailure(SendStatus.FAILED, str(exc)[:255])
