"""Telegram's methods that send and change messages, in the gateway's terms: a text, a file, an
album, an edit, a pin, a button press answered. Each is one call of the request layer
(request.py); a send that carries its row's key is built by us with the key's random_id, so that a
send of unknown outcome can be repeated and arrives once (retry.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyrogram import enums, errors, raw, types, utils

from botapp.telegram import request
from botapp.telegram.gateway import BadRequest, Keyboard, Media, SendItem, Sent, TelegramError, random_id_of
from botapp.telegram.kurigram import Written, keyed_random_ids
from botapp.telegram.media import ALBUM_FILE_TYPES, MEDIA_FILE_TYPES, media_problem
from botapp.telegram.request import TelegramRequests
from botapp.telegram.retry import repeatable_when

log = logging.getLogger(__name__)


def markup(buttons: Keyboard | None) -> types.InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return types.InlineKeyboardMarkup(
        [
            [
                types.InlineKeyboardButton(b.text, url=b.url)
                if b.url
                else types.InlineKeyboardButton(b.text, callback_data=b.callback_data)
                for b in row
            ]
            for row in buttons
        ]
    )


class MessageMethods(TelegramRequests):
    """Sends and edits. Keeps the parsed HTML of the texts and the keyboards it sent last, each
    made once per distinct one (a broadcast sends one text and one keyboard to every user)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parse_cache: dict[str, tuple[str, list]] = {}
        self._markup_cache: dict[tuple, Written] = {}

    def send_text(
        self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False, reply_to: int | None = None,
        key: str = "",
    ) -> Sent:  # fmt: skip
        with repeatable_when(bool(key)):  # kurigram's send_message too draws the key's random_id
            message_id = self._call(
                self._send_text, chat_id, text, buttons, protect, reply_to, key, chat_id=chat_id, send=True,
                paid=bool(self.paid),
            )  # fmt: skip
        return Sent(chat_id, message_id)

    def _kurigram_sends(self, buttons: Keyboard | None) -> bool:
        """Whether a text goes through kurigram's send_message (with the key's random_id all the
        same: kurigram.keyed_random_ids)."""
        return self._parses_answers and any(b.callback_data for row in buttons or () for b in row)

    @property
    def _parses_answers(self) -> bool:
        """runbot's client (it takes updates) parses what it sends with callback buttons: kurigram
        keeps the messages, so a tap on a button under one costs no messages.getMessages. Anything
        else (a worker's sends, runbot's copies and plain texts) skips parsing Telegram's answer
        into a Message: a third of a send's CPU."""
        return not self.client.no_updates

    async def _send_text(self, chat_id, text, buttons, protect, reply_to=None, key="") -> int:
        """kurigram's send_message; otherwise the same request, reading only the new id."""
        if self._kurigram_sends(buttons):
            with keyed_random_ids(key):
                message = await self.client.send_message(
                    chat_id,
                    text,
                    reply_markup=markup(buttons),
                    protect_content=protect or None,
                    link_preview_options=types.LinkPreviewOptions(is_disabled=True),
                    allow_paid_broadcast=self.paid,
                    reply_parameters=types.ReplyParameters(message_id=reply_to) if reply_to else None,
                )
            return message.id
        message, entities = await self._parsed(text)
        answer = await self._invoke(
            raw.functions.messages.SendMessage(
                peer=await self.client.resolve_peer(chat_id),
                message=message,
                entities=entities,
                random_id=random_id_of(key) if key else self.client.rnd_id(),
                no_webpage=True,
                noforwards=protect or None,
                reply_markup=await self._reply_markup(buttons),
                allow_paid_floodskip=self.paid,
                reply_to=raw.types.InputReplyToMessage(reply_to_msg_id=reply_to) if reply_to else None,
            ),
            one_sent=True,
        )
        (message_id,) = request.sent_ids(answer)
        return message_id

    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False,
        key: str = "",
    ) -> Sent:  # fmt: skip
        # kurigram's send_* upload a string naming a local file before trying it as a URL or file
        # id: media that came from outside (an API caller, an operator) must never reach it as a
        # path, or the worker would send its own files (its .env) to whoever the message is for.
        if problem := media_problem(media.file, kind=media.kind):
            raise BadRequest(f"media refused before sending: {problem}")
        if key and media.kind in MEDIA_FILE_TYPES and "://" not in media.file:  # by file id: the request is ours
            item = SendItem(chat_id, caption, media=media, buttons=buttons, protect=protect, key=key)
            with repeatable_when(True):
                message_id = self._call(
                    self._send_item, item, chat_id=chat_id, send=True, paid=bool(self.paid)
                )  # fmt: skip
            return Sent(chat_id, message_id)
        send = getattr(self.client, f"send_{media.kind}")

        async def built_by_kurigram():  # a file by URL, or a kind kurigram alone sends: with the key's random_id
            with keyed_random_ids(key):
                return await send(
                    chat_id, media.file, caption=caption, reply_markup=markup(buttons), protect_content=protect or None,
                    allow_paid_broadcast=self.paid,
                )  # fmt: skip

        with repeatable_when(bool(key)):
            message = self._call(built_by_kurigram, chat_id=chat_id, send=True, paid=bool(self.paid))
        return Sent(chat_id, message.id)

    def send_album(
        self, chat_id: int, items: Sequence[Media], *, caption: str = "", protect: bool = False, key: str = ""
    ) -> list[Sent]:
        with repeatable_when(bool(key)):
            ids = self._call(
                self._send_album, chat_id, list(items), caption, protect, key, chat_id=chat_id, send=True,
                count=len(items), paid=bool(self.paid),
            )  # fmt: skip
        return [Sent(chat_id, i) for i in ids]

    async def _send_album(self, chat_id, items, caption, protect, key="") -> list[int]:
        message, entities = await self._parsed(caption) if caption else ("", [])
        multi = []
        for n, item in enumerate(items):
            media = utils.get_input_media_from_file_id(item.file, ALBUM_FILE_TYPES[item.kind])
            first = n == 0
            multi.append(
                raw.types.InputSingleMedia(
                    media=media,
                    random_id=random_id_of(key, n) if key else self.client.rnd_id(),
                    message=message if first else "",
                    entities=entities if first else None,
                )
            )
        answer = await self._invoke(
            raw.functions.messages.SendMultiMedia(
                peer=await self.client.resolve_peer(chat_id),
                multi_media=multi,
                noforwards=protect or None,
                allow_paid_floodskip=self.paid,
            )
        )
        return request.sent_ids(answer)

    # --- a SendItem as a request: the keyed sends above, and the batch's (batching.py) ----------------

    async def _send_item(self, item: SendItem) -> int:
        built = await self._request(item, await self.client.resolve_peer(item.chat_id))
        (message_id,) = request.sent_ids(await self._invoke(built, one_sent=True))
        return message_id

    async def _request(self, item: SendItem, peer) -> raw.core.TLObject:
        parsed = await self._parsed(item.text) if item.text else ("", None)
        random_id = random_id_of(item.key) if item.key else self.client.rnd_id()
        return self._request_of(item, peer, parsed, await self._reply_markup(item.buttons), random_id=random_id)

    def _request_of(self, item: SendItem, peer, parsed, keyboard, *, random_id: int) -> raw.core.TLObject:
        message, entities = parsed
        common = dict(
            peer=peer,
            message=message,
            entities=entities or None,
            random_id=random_id,
            noforwards=item.protect or None,
            reply_markup=keyboard,
            allow_paid_floodskip=self.paid,
        )
        if item.media is None:
            return raw.functions.messages.SendMessage(no_webpage=True, **common)
        media = utils.get_input_media_from_file_id(item.media.file, MEDIA_FILE_TYPES[item.media.kind])
        return raw.functions.messages.SendMedia(media=media, **common)

    async def _parsed(self, text: str) -> tuple[str, list]:
        """Telegram HTML -> (text, entities), once per distinct text: a broadcast sends one text to
        every user, and parsing it is a large part of a send's CPU."""
        found = self._parse_cache.get(text)
        if found is None:
            if len(self._parse_cache) >= 64:
                self._parse_cache.clear()
            found = tuple((await utils.parse_text_entities(self.client, text, enums.ParseMode.HTML, None)).values())
            self._parse_cache[text] = found
        return found

    async def _reply_markup(self, buttons: Keyboard | None) -> raw.core.TLObject | None:
        """A request's inline keyboard, serialized once per distinct keyboard: a broadcast's sends,
        or a sweep's "deleted" notices for one file, all carry the same one, and building and
        writing it was a sixth of a notice's CPU."""
        if not buttons:
            return None
        key = tuple(tuple(row) for row in buttons)
        found = self._markup_cache.get(key)
        if found is None:
            if len(self._markup_cache) >= 256:
                self._markup_cache.clear()
            found = self._markup_cache[key] = Written((await markup(buttons).write(self.client)).write())
        return found

    # --- edits, pins, button presses ----------------------------------------------------------------

    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None:
        self._call(self._edit_text, chat_id, message_id, text, buttons, chat_id=chat_id)

    async def _edit_text(self, chat_id, message_id, text, buttons):
        try:
            await self.client.edit_message_text(chat_id, message_id, text, reply_markup=markup(buttons))
        except errors.MessageNotModified:
            pass  # the user tapped twice: the message already says this

    def edit_buttons(self, chat_id: int, message_id: int, buttons: Keyboard | None) -> None:
        self._call(self.client.edit_message_reply_markup, chat_id, message_id, reply_markup=markup(buttons), chat_id=chat_id)

    def pin_message(self, chat_id: int, message_id: int, *, silent: bool = True) -> None:
        # The raw call: kurigram's pin_chat_message parses the service message it gets back, which
        # costs a messages.getMessages for the pinned one.
        self._call(self._pin, chat_id, message_id, silent, chat_id=chat_id, send=True)

    async def _pin(self, chat_id, message_id, silent) -> None:
        await self._invoke(
            raw.functions.messages.UpdatePinnedMessage(
                peer=await self.client.resolve_peer(chat_id), id=message_id, silent=silent or None, pm_oneside=None
            )
        )

    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None:
        # Answering a button press is not a message; Telegram does not rate it like one.
        try:
            self._call(self.client.answer_callback_query, callback_id, text=text or None, show_alert=alert, paced=False)
        except TelegramError as exc:
            # A query older than ~15 s cannot be answered any more; nothing is lost.
            log.info("callback %s not answered: %s", callback_id, exc)
