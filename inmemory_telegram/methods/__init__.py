"""The raw TL functions the in-memory Telegram answers, as Telegram does for a bot (and, for the few
a user session calls, for a person's own account: core.ACCOUNT_METHODS), one module per Telegram
namespace (messages, channels, contacts, updates, upload, users, help, auth, account).

Each handler runs under the server's lock, takes the parsed request, and returns the TL result
(or raises RpcFault with Telegram's error). Only what a bot like Courier calls is here; anything
else answers INPUT_METHOD_INVALID and is logged, so a new call shows up in tests at once.
"""

from inmemory_telegram.methods import account, auth, channels, contacts, help, messages, updates, upload, users

METHODS = {
    **account.METHODS,
    **auth.METHODS,
    **contacts.METHODS,
    **channels.METHODS,
    **help.METHODS,
    **messages.METHODS,
    **updates.METHODS,
    **upload.METHODS,
    **users.METHODS,
}
