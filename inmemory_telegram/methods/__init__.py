"""The raw TL functions the in-memory Telegram answers, as Telegram does for a bot, one module per
Telegram namespace (messages, channels, updates, upload, users, help, auth).

Each handler runs under the server's lock, takes the parsed request, and returns the TL result
(or raises RpcFault with Telegram's error). Only what a bot like Courier calls is here; anything
else answers INPUT_METHOD_INVALID and is logged, so a new call shows up in tests at once.
"""

from inmemory_telegram.methods import auth, channels, help, messages, updates, upload, users

METHODS = {
    **auth.METHODS,
    **channels.METHODS,
    **help.METHODS,
    **messages.METHODS,
    **updates.METHODS,
    **upload.METHODS,
    **users.METHODS,
}
