"""Telegram's delete methods, in the gateway's terms: messages of one chat, or the bot's messages
in many private chats at once. At most DELETE_CHUNK ids a call; a delete is not a message to the
chat, so it takes a slot of the overall rate only."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from pyrogram import raw

from botapp.telegram.gateway import DELETE_CHUNK, MessageNotFound, MessageTooOld, chunked
from botapp.telegram.request import TelegramRequests

log = logging.getLogger(__name__)


class DeleteMethods(TelegramRequests):
    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        deleted = 0
        for chunk in chunked(list(message_ids), DELETE_CHUNK):
            # Deletes are not messages to the chat: they count against the global rate only.
            try:
                deleted += self._call(self.client.delete_messages, chat_id, chunk, chat_id=chat_id)
            except (MessageTooOld, MessageNotFound) as exc:
                log.info("delete skipped chat=%s ids=%s: %s", chat_id, chunk, exc)
        return deleted

    def delete_private(self, messages: Sequence[tuple[int, Sequence[int]]]) -> int:
        """messages.deleteMessages takes ids without a chat: the bot's private-chat messages are
        numbered in one sequence of its own (core.telegram.org/api/updates: private chats and
        basic groups share the account's message box; that a bot's box works the same way is
        inferred from this method taking no peer). So one call deletes DELETE_CHUNK of them
        across chats, with no access hash needed, and one global limiter slot."""
        deleted = 0
        for chunk in chunked([i for chat_id, ids in messages if chat_id > 0 for i in ids], DELETE_CHUNK):
            try:
                deleted += self._call(self._delete_ids, chunk)
            except (MessageTooOld, MessageNotFound) as exc:
                log.info("delete skipped ids=%s…: %s", chunk[:5], exc)
        others = [(chat_id, ids) for chat_id, ids in messages if chat_id <= 0]
        return deleted + sum(self.delete_messages(chat_id, ids) for chat_id, ids in others)

    async def _delete_ids(self, ids: list[int]) -> int:
        answer = await self._invoke(raw.functions.messages.DeleteMessages(id=ids, revoke=True))
        return answer.pts_count
