"""Telegram's methods that copy and read messages already sent, in the gateway's terms: a copy of
stored messages (forwarded without their author, or sent anew with a caption or buttons), a post,
an album's ids, which messages still exist, what a message shows, the bot's own messages to a chat.
Reads ask for a FloodWait to be raised, never slept through inside kurigram, so that it reaches the
limiter (request.py)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from pyrogram import enums, raw, types, utils

from botapp.telegram import request
from botapp.telegram.entities import entities_html
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    AlreadySent,
    BotUnauthorized,
    Caption,
    CopyIncomplete,
    CopySource,
    Keyboard,
    Media,
    MessageNotFound,
    OwnMessage,
    SendItem,
    Sent,
    TelegramError,
    chunked,
    random_id_of,
)
from botapp.telegram.kurigram import keyed_random_ids
from botapp.telegram.media import MEDIA_FILE_TYPES
from botapp.telegram.messages import MessageMethods, markup
from botapp.telegram.retry import repeatable_when

log = logging.getLogger(__name__)

# own_messages: ids read back at most (a bound on a search's cost: 200 reads), and the run of
# reads that found no message at all after which the box is taken to have ended (ids past the
# newest message read as empty, like deleted ones: 2 × 100 deleted in a row is taken as the end).
OWN_SCAN_MAX = 20_000
OWN_SCAN_EMPTY_END = 2


def copy_source(message: types.Message) -> CopySource:
    """What a caption template may use of a message kurigram parsed."""
    if not message.media:
        return CopySource(kind="", text=_html(message.text))
    kind = message.media.name.lower()  # MessageMediaType.DOCUMENT -> "document"
    media = getattr(message, kind, None)
    if kind == "photo" or media is None:  # a photo has a size but no file name
        return CopySource(kind=kind, file_size=getattr(media, "file_size", 0) or 0, caption=_html(message.caption))
    return CopySource(
        kind=kind,
        file_name=getattr(media, "file_name", None) or "",
        file_size=getattr(media, "file_size", None) or 0,
        caption=_html(message.caption),
    )


def content_of(message: types.Message) -> str:
    """What a message shows, as OwnMessage.content: a copy (forwarded without its author, or sent
    anew from the file and its text) shows what its source shows, its caption aside."""
    if not message.media:
        return f"text:{message.text or ''}"
    kind = message.media.name.lower()
    return f"{kind}:{getattr(getattr(message, kind, None), 'file_unique_id', None) or ''}"


def _html(text) -> str:
    """A caption kurigram parsed, back as Telegram HTML with every character as written (kurigram's
    Str.html does not escape plain text: "a < b" lost its "<")."""
    return entities_html(text) if text else ""


class CopyMethods(MessageMethods):
    """Copies (built on the sends: a keyed copy is a send of ours) and reads of messages."""

    def copy_messages(
        self,
        chat_id: int,
        from_chat_id: int,
        message_ids: Sequence[int],
        *,
        caption: Caption = None,
        protect: bool = False,
        buttons: Keyboard | None = None,
        key: str = "",
    ) -> list[Sent]:
        """Without a caption or buttons: one ForwardMessages call per 100 ids (no "forwarded from"
        header); ids Telegram cannot forward (deleted, service messages) are skipped. With a
        caption or buttons (a forward cannot carry either): one GetMessages call per 100 ids, then
        one send per message. Raises MessageNotFound when nothing could be copied, CopyIncomplete
        when it stopped partway, AlreadySent (with what this attempt sent) when some of it was
        refused as a repeat of an earlier attempt (`key`) and the rest went out."""
        if buttons and len(message_ids) != 1:
            raise ValueError("buttons go under one copied message, not an album or several")
        sent: list[Sent] = []
        repeats = 0  # messages Telegram refused as repeats of their random_ids: an earlier attempt's
        try:
            if caption is None and not buttons:
                # Telegram may count each forwarded message against its rates: no more in one call
                # than the limiter lets go together.
                size = min(DELETE_CHUNK, self.limiter.count_max) if self.limiter is not None else DELETE_CHUNK
                for start, chunk in enumerate(chunked(list(message_ids), size)):
                    rids = [random_id_of(key, start * size + n) for n in range(len(chunk))] if key else None
                    try:
                        with repeatable_when(bool(key)):
                            ids = self._call(
                                self._forward, chat_id, from_chat_id, chunk, protect, rids, chat_id=chat_id, send=True,
                                count=len(chunk), paid=bool(self.paid),
                            )  # fmt: skip
                    except AlreadySent:
                        repeats += len(chunk)  # an earlier attempt's: there, ids unknown; the rest goes on
                        continue
                    sent.extend(Sent(chat_id, i) for i in ids)
            else:
                n = 0
                for chunk in chunked(list(message_ids), DELETE_CHUNK):
                    for source in self._fetch(from_chat_id, chunk):
                        text = caption(copy_source(source)) if callable(caption) else caption
                        n += 1
                        if key and (item := self._copy_item(chat_id, source, text, buttons, protect, f"{key}#{n - 1}")):
                            try:
                                with repeatable_when(True):
                                    message_id = self._call(
                                        self._send_item, item, chat_id=chat_id, send=True, paid=bool(self.paid)
                                    )
                            except AlreadySent:
                                repeats += 1
                                continue
                            sent.append(Sent(chat_id, message_id))
                            continue
                        # What only kurigram's copy reproduces (a link preview, a poll, a sticker...):
                        # built by kurigram, with the key's random_ids (kurigram.keyed_random_ids).
                        try:
                            with repeatable_when(bool(key)):
                                copy = self._call(
                                    self._kurigram_copy, source, chat_id, text, buttons, protect,
                                    f"{key}#{n - 1}~k" if key else "", chat_id=chat_id, send=True, paid=bool(self.paid),
                                )  # fmt: skip
                        except AlreadySent:
                            repeats += 1
                            continue
                        sent.append(Sent(chat_id, copy.id))
        except (TelegramError, BotUnauthorized) as exc:
            if (sent or repeats) and isinstance(exc, TelegramError):
                raise CopyIncomplete(sent=sent, cause=exc) from exc
            raise
        if repeats:
            raise AlreadySent(f"{repeats} of the messages were delivered by an earlier attempt", sent=sent)
        if not sent:
            raise MessageNotFound(f"none of {from_chat_id}/{list(message_ids)[:5]}… can be copied")
        return sent

    async def _kurigram_copy(self, source: types.Message, chat_id: int, text, buttons, protect: bool, key: str):
        """kurigram's Message.copy, every random_id it draws derived from `key`."""
        with keyed_random_ids(key):
            return await source.copy(
                chat_id,
                caption=text if source.media else None,
                parse_mode=enums.ParseMode.HTML,
                protect_content=protect or None,
                allow_paid_broadcast=self.paid,
                reply_markup=markup(buttons),  # None: not the source's own buttons
            )

    def _copy_item(self, chat_id: int, source: types.Message, caption: str | None, buttons, protect: bool, key: str):
        """A copy of `source` as a send Courier builds itself, so that it carries `key`'s
        random_id: a text, or a file Telegram already has with its caption (the new one, or its
        own). None for what only kurigram's copy reproduces (a link preview, a poll, a sticker...)."""
        info = copy_source(source)
        if info.kind and info.kind not in MEDIA_FILE_TYPES:
            return None
        if not info.kind and getattr(source, "web_page", None) is not None:
            return None
        media = Media(info.kind, getattr(source, info.kind).file_id) if info.kind else None
        text = (caption if caption is not None else info.caption) if media else info.text
        return SendItem(chat_id, text, media=media, buttons=buttons, protect=protect, key=key)

    async def _forward(self, chat_id, from_chat_id, ids, protect, random_ids=None) -> list[int]:
        """kurigram's forward_messages(hide_sender_name=True), reading only the new ids (a copy
        carries no button of ours to tap)."""
        answer = await self._invoke(
            raw.functions.messages.ForwardMessages(
                from_peer=await self.client.resolve_peer(from_chat_id),
                id=ids,
                random_id=random_ids or [self.client.rnd_id() for _ in ids],
                to_peer=await self.client.resolve_peer(chat_id),
                drop_author=True,
                noforwards=protect or None,
                allow_paid_floodskip=self.paid,
            )
        )
        return request.sent_ids(answer)

    # --- reads ------------------------------------------------------------------------------------

    def post_read(self, chat_id: int, message_id: int) -> CopySource:
        found = self._fetch(chat_id, [message_id])
        if not found:
            raise MessageNotFound(f"message {message_id} of {chat_id} does not exist")
        return copy_source(found[0])

    def _fetch(self, chat_id: int, ids: list[int]) -> list[types.Message]:
        """The messages that can be copied, in order (one call; a FloodWait reaches the limiter
        instead of being slept through inside kurigram, as get_messages would)."""

        return [m for m in self._call(self._messages, chat_id, ids) if not m.empty and not m.service]

    def album_ids(self, chat_id: int, message_id: int) -> list[int]:
        messages = self._call(self._album, chat_id, message_id)
        if not messages:
            raise MessageNotFound(f"message {message_id} in {chat_id} is gone")
        return messages

    async def _album(self, chat_id, message_id) -> list[int]:
        # kurigram's get_media_group reads the messages 9 before to 10 after, one call, same
        # grouped_id; read here with sleep_threshold=0, so a FloodWait reaches the limiter
        # instead of being slept through inside kurigram (get_messages sleeps through any).
        ids = list(range(max(1, message_id - 9), message_id + 10))
        found = await self._messages(chat_id, ids)
        by_id = {m.id: m for m in found if not m.empty}
        wanted = by_id.get(message_id)
        if wanted is None:
            return []
        if wanted.media_group_id is None:
            return [message_id]
        return sorted(i for i, m in by_id.items() if m.media_group_id == wanted.media_group_id)

    def messages_existing(self, chat_id: int, message_ids: Sequence[int]) -> list[int]:
        ids = [int(i) for i in message_ids]
        if len(ids) > DELETE_CHUNK:
            raise ValueError(f"at most {DELETE_CHUNK} ids per call, not {len(ids)}")
        if not ids:
            return []
        found = self._call(self._messages, chat_id, ids)
        there = {m.id for m in found if not m.empty}
        return [i for i in ids if i in there]

    def message_contents(self, chat_id: int, message_ids: Sequence[int]) -> dict[int, str]:
        return {m.id: content_of(m) for m in self._fetch(chat_id, [int(i) for i in message_ids])}

    def own_messages(
        self, chat_id: int, *, after_id: int, until: datetime, contents: Collection[str] | None = None, limit: int = 0
    ) -> list[OwnMessage]:
        found: list[OwnMessage] = []
        for m in self._box_scan(after_id, until, OWN_SCAN_MAX, f"chat={chat_id}"):
            if not (m.outgoing and m.chat is not None and m.chat.id == chat_id):
                continue
            content = content_of(m)
            if contents is None or content in contents:
                found.append(OwnMessage(m.id, datetime.fromtimestamp(m.date.timestamp(), tz=UTC), content))
                if limit and len(found) >= limit:
                    break
        return found

    def own_messages_in(
        self, chat_ids: Collection[int], *, after_id: int, until: datetime, content: str, scan_max: int, box_to: int = 0
    ) -> dict[int, int]:
        wanted, found = set(chat_ids), {}
        for m in self._box_scan(after_id, until, scan_max, f"{len(wanted)} chats", box_to=box_to):
            chat = m.chat.id if m.chat is not None else None
            if m.outgoing and chat in wanted and chat not in found and content_of(m) == content:
                found[chat] = m.id
                if len(found) == len(wanted):
                    break
        return found

    def _box_scan(self, after_id: int, until: datetime, scan_max: int, what: str, *, box_to: int = 0):
        """The bot's messages above `after_id`, oldest first, read IDS_PER_CALL ids a call, to the
        first one sent after `until`, the box's end (not below `box_to`, an id known to exist: a
        run of deleted messages below it is no end), or `scan_max` ids. messages.getMessages takes
        ids of the bot's message box, whichever private chat they are in: the chat of each is read
        from the answer."""
        start, empty_reads, horizon = after_id + 1, 0, until.timestamp()
        while start <= after_id + scan_max:
            ids = list(range(start, start + DELETE_CHUNK))
            start += DELETE_CHUNK
            present = [m for m in self._call(self._box_messages, ids) if not m.empty]
            empty_reads = 0 if present else empty_reads + 1
            if empty_reads >= OWN_SCAN_EMPTY_END and start - OWN_SCAN_EMPTY_END * DELETE_CHUNK > box_to:  # all above it
                log.debug("own messages of %s: the box ends before %s", what, start)
                return
            for m in present:
                if m.date.timestamp() > horizon:  # ids grow with time: nothing further was sent by then
                    log.debug("own messages of %s: %s was sent at %s, after %s", what, m.id, m.date, until)
                    return
                yield m
        log.warning("own messages of %s: stopped after %d ids past %s", what, scan_max, after_id)

    async def _box_messages(self, ids: list[int]) -> list[types.Message]:
        """messages.getMessages of the bot's message box (no peer: the ids name the messages)."""
        query = raw.functions.messages.GetMessages(id=[raw.types.InputMessageID(id=i) for i in ids])
        return await utils.parse_messages(self.client, await self.client.invoke(query, sleep_threshold=0), replies=0)

    async def _messages(self, chat_id: int, ids: list[int]) -> list[types.Message]:
        """messages.getMessages (channels.getMessages for a channel), parsed; any FloodWait raised."""
        peer = await self.client.resolve_peer(chat_id)
        refs = [raw.types.InputMessageID(id=i) for i in ids]
        query = (
            raw.functions.channels.GetMessages(channel=peer, id=refs)
            if isinstance(peer, raw.types.InputPeerChannel)
            else raw.functions.messages.GetMessages(id=refs)
        )
        return await utils.parse_messages(self.client, await self.client.invoke(query, sleep_threshold=0), replies=0)
