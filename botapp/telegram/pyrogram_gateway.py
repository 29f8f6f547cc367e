"""The real Telegram, through kurigram (import name `pyrogram`): the one implementation of `Gateway`.

Built the way python-telegram-bot builds its Bot, in parts that each read alone:
- request.py: the request layer. The client on its loop, one call under the shared limiter
  (`_call`), requests on the wire, the users' access hashes, Telegram's answers mapped to domain
  errors (`error_to_domain`); anything else is a bug and is raised as it is.
- retry.py: every decision to ask again (FloodWait, transient errors, no answer, a lapsed
  admission, a later run), the one rule every other part asks.
- Telegram's methods by what they do: messages.py (sends, edits, pins, button answers),
  copies.py (copies and reads of messages), uploads.py, chats.py (invite links, membership,
  rights), deletions.py.
- batching.py: a worker's batch of sends in MTProto containers (`send_many`).
- client.py: kurigram's client as every process builds it.

A copy of many messages is many calls, each with its own slot; if it stops partway, what was sent
is reported, never sent again. kurigram's private parts are used only through
botapp/telegram/kurigram.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pyrogram import Client

from botapp.telegram.batching import BatchSending
from botapp.telegram.chats import ChatMethods
from botapp.telegram.copies import CopyMethods
from botapp.telegram.deletions import DeleteMethods
from botapp.telegram.gateway import Gateway
from botapp.telegram.limiter import Limiter
from botapp.telegram.uploads import UploadMethods


class PyrogramGateway(BatchSending, CopyMethods, UploadMethods, ChatMethods, DeleteMethods, Gateway):
    """`limiter`: the shared send limiter (None: no pacing, for tests that want raw calls).
    `peers(user_id) -> access_hash | None`: where a worker finds the access hashes runbot stored,
    so a send costs no resolution call. `peers_learnt({user_id: access_hash})`: where the hashes
    Telegram's answers named for users addressed by id alone go (request.py, ZERO_HASH). `paid`: sends carry the paid-broadcast flag. `username`:
    the bot's, when known before the client signs in."""

    def __init__(
        self,
        client: Client,
        loop: asyncio.AbstractEventLoop,
        *,
        username: str = "",
        limiter: Limiter | None = None,
        max_flood_wait: int = 60,
        peers: Callable[[int], int | None] | None = None,
        peers_learnt: Callable[[dict[int, int]], object] | None = None,
        paid: bool = False,
        sleep=time.sleep,
    ):
        super().__init__(
            client, loop, limiter=limiter, max_flood_wait=max_flood_wait, peers=peers, peers_learnt=peers_learnt, paid=paid,
            sleep=sleep,
        )  # fmt: skip
        self._username = username

    @property
    def bot_username(self) -> str:
        me = self.client.me  # known once the client has started
        return self._username or (me.username if me is not None and me.username else "")
