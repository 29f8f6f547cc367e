"""An in-memory Telegram that kurigram's real client talks to over MTProto (as moto answers boto3).

Only the socket is replaced (offline/telegram/connection.py): kurigram's `Client`, `Session`, storage, peer
resolution, retries and FloodWait handling all run as they do against Telegram. This package holds
Telegram's side: the bot (and extra bots, accounts.py), users with access hashes, channels with
64-bit ids, messages with ids, dates, files and buttons, and the rules Telegram applies to a bot.
`methods` answers the raw TL
functions; `core.ServerCore` holds the state and the sessions; `controls` and `inspection` are
what tests and the sandbox use; `TelegramServer` puts them together.

Behaviour from Telegram's documents (core.telegram.org): about 30 messages/s overall, 1000/s with
paid broadcasts when the request carries `allow_paid_floodskip`; about 1 message/s in a private
chat; 20/min in a group; bots may delete messages only for 48 h; at most 100 ids per call;
FLOOD_WAIT_X, USER_IS_BLOCKED, INPUT_USER_DEACTIVATED, PEER_ID_INVALID, CHAT_FORWARDS_RESTRICTED,
MESSAGE_EMPTY, AUTH_KEY_UNREGISTERED. Private-chat message ids are the bot's own sequence, shared by
all its private chats; each channel has its own. Inferred (marked where used): the window shapes
of the rate limits, the burst a private chat tolerates, what a call with several problems answers.
"""

from __future__ import annotations

from inmemory_telegram.controls import Actions, Conditions
from inmemory_telegram.core import ServerCore
from inmemory_telegram.inspection import Inspection
from inmemory_telegram.methods import METHODS


class TelegramServer(Actions, Conditions, Inspection, ServerCore):
    """The in-memory Telegram: `TelegramServer(now=clock.now, username=..., enforce_rates=False)`;
    options as core.ServerCore takes them (`now`, the clock it dates by, is required), the methods
    this package answers."""

    def __init__(self, **options):
        super().__init__(methods=METHODS, **options)
