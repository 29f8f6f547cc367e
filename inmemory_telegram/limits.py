"""Telegram's numbers as this model of Telegram keeps them, each with where it comes from.

The model keeps its own copy, never the product's (botapp/telegram/limits.py): a wrong limit in the
product must meet Telegram's, not be hidden by a model that shares it. Sources: the Bot API and
MTProto documents (core.telegram.org/bots/faq#broadcasting-to-users, core.telegram.org/bots/api,
core.telegram.org/api/config, core.telegram.org/api/files); an inferred figure says so.
"""

from datetime import timedelta

# --- ids per call ------------------------------------------------------------------------------
# messages.deleteMessages / forwardMessages / getMessages, channels.getMessages / deleteMessages take
# at most 100 ids (core.telegram.org/method/messages.deleteMessages; the Bot API's deleteMessages).
IDS_PER_CALL = 100

# --- lengths -------------------------------------------------------------------------------------
# Telegram counts text in UTF-16 code units, as its entity offsets do (core.telegram.org/api/entities).
TEXT_LENGTH = 4096  # message_length_max (core.telegram.org/api/config)
CAPTION_LENGTH = 1024  # caption_length_max for a user who is not premium, bots included (api/config)
# answerCallbackQuery's text: "0-200 characters" (Bot API); counted in UTF-16 units (inferred, stricter).
CALLBACK_ANSWER_LENGTH = 200
CALLBACK_DATA_BYTES = 64  # bytes of an inline button's callback data (Bot API, InlineKeyboardButton)
ALBUM_SIZE = 10  # media in one album (messages.sendMultiMedia; the Bot API's sendMediaGroup: 2-10)
# Which media may share an album: photos and videos mix; documents go only with documents, audio
# only with audio (core.telegram.org/api/files, "Albums"; the Bot API's sendMediaGroup says the same).
ALBUM_GROUPS = {"photo": "visual", "video": "visual", "document": "document", "audio": "audio"}

# --- uploads (core.telegram.org/api/files) -----------------------------------------------------------
UPLOAD_PART_SIZE = 512 * 1024  # bytes in one upload.saveFilePart / saveBigFilePart, at most
UPLOAD_PARTS = 4000  # parts of one file, at most, for an account that is not premium (bots are not)
UPLOAD_BIG_FILE = 10 * 1024 * 1024  # files larger than this go by upload.saveBigFilePart
PHOTO_SIZE = 10 * 1024 * 1024  # a photo, at most (the Bot API's sendPhoto: "at most 10 MB")

# --- time windows ----------------------------------------------------------------------------------
# Bots may delete messages in private chats only for 48 hours (Bot API, deleteMessage).
DELETE_WINDOW = timedelta(hours=48)
CALLBACK_ANSWER_WINDOW = timedelta(seconds=15)  # inferred: older callback queries answer QUERY_ID_INVALID

# --- rates (Bot FAQ: "broadcasting to users"; their shapes: rates.py) --------------------------------
GLOBAL_RATE = 30  # messages per second overall, without the paid-broadcast flag
PAID_RATE = 1000  # messages per second with paid broadcasts (the request carries allow_paid_floodskip)
PRIVATE_CHAT_INTERVAL = 1.0  # "avoid sending more than one message per second" in a private chat
PRIVATE_CHAT_BURST = 3  # inferred: Telegram tolerates a short burst in one chat before FLOOD_WAIT
GROUP_PER_MINUTE = 20  # "bots are not able to send more than 20 messages per minute to the same group"
GROUP_CHAT_INTERVAL = 60.0 / GROUP_PER_MINUTE
# messages.getHistory answers at most this many messages a call (core.telegram.org/api/offsets:
# "up to 100"), and this many when the limit asked is 0; inferred: a larger limit is cut to it.
HISTORY_LIMIT = 100


def utf16_length(text: str) -> int:
    """`text`'s length as Telegram counts it: UTF-16 code units (a character beyond U+FFFF, most
    emoji, counts 2)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
