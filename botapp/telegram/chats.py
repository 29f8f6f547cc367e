"""Telegram's methods about chats and channels, in the gateway's terms: an invite link, whether a
user is a member, what the bot may do in a chat. None is a message: they count against the overall
rate only, or not at all (reads)."""

from __future__ import annotations

from datetime import datetime

from pyrogram import enums, errors

from botapp.telegram.gateway import BadRequest, ChatRights
from botapp.telegram.request import NotCached, TelegramRequests, noop


class ChatMethods(TelegramRequests):
    def invite_link_create(self, chat_id: int, *, expire_at: datetime | None = None, join_request: bool = False) -> str:
        # Not a message: it counts against the overall rate only, like a delete.
        link = self._call(
            self.client.create_chat_invite_link, chat_id, expire_date=expire_at, creates_join_request=join_request or None
        )
        if link is None:  # kurigram: the chat accepts join requests through its public link only
            raise BadRequest(f"chat {chat_id} gives no invite link of its own")
        return link.invite_link

    def is_member(self, chat_id: int, user_id: int) -> bool:
        peer = self._peer_for(user_id)
        if peer is not None:
            try:
                self._run(self._on_loop(peer, noop))
            except NotCached:
                self._run(self._on_loop(self._stored_peer(user_id), noop))
        return self._call(self._is_member, chat_id, user_id)

    async def _is_member(self, chat_id, user_id) -> bool:
        try:
            member = await self.client.get_chat_member(chat_id, user_id)
        except errors.UserNotParticipant:
            return False
        if member.status in (enums.ChatMemberStatus.OWNER, enums.ChatMemberStatus.ADMINISTRATOR, enums.ChatMemberStatus.MEMBER):
            return True
        # A restricted user may still be in the chat; left and banned users are not.
        return member.status == enums.ChatMemberStatus.RESTRICTED and bool(getattr(member, "is_member", False))

    def chat_rights(self, chat_id: int) -> ChatRights:
        return self._call(self._chat_rights, chat_id, paced=False)  # a read, not a message

    async def _chat_rights(self, chat_id) -> ChatRights:
        try:
            member = await self.client.get_chat_member(chat_id, "me")
        except errors.ChatAdminRequired:  # the channel resolved, but a non-admin may not even look
            return ChatRights()
        if member.status == enums.ChatMemberStatus.OWNER:
            return ChatRights(admin=True, post=True, edit=True, delete=True, invite=True)
        rights = member.privileges
        if member.status != enums.ChatMemberStatus.ADMINISTRATOR or rights is None:
            return ChatRights()
        return ChatRights(
            admin=True,
            post=bool(rights.can_post_messages),
            edit=bool(rights.can_edit_messages),
            delete=bool(rights.can_delete_messages),
            invite=bool(rights.can_invite_users),
        )
