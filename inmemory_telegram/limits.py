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


# --- downloads (core.telegram.org/api/files, "Downloading files"; method/upload.getFile) ------------
# Without the `precise` flag: offset and limit divisible by 4 KB, and 1048576 (1 MB) divisible by
# limit. With it: offset and limit divisible by 1 KB, limit at most 1 MB. In any case the part lies
# within one 1 MB chunk: offset / 1 MB == (offset + limit - 1) / 1 MB.
DOWNLOAD_ALIGN = 4 * 1024
DOWNLOAD_ALIGN_PRECISE = 1024
DOWNLOAD_CHUNK = 1024 * 1024
# Which error a request that breaks a rule gets: OFFSET_INVALID for the offset's, LIMIT_INVALID for
# the limit's (both listed for upload.getFile). A part that crosses a 1 MB boundary: inferred
# LIMIT_INVALID (the docs list no error of its own for it).
# A part that starts at or beyond the file's end answers no bytes; one that runs past it, the bytes
# up to the end (documented: a download ends at a part shorter than the limit).

# How long a file reference lasts. Telegram documents that references expire and are refreshed by
# fetching the object again (core.telegram.org/api/file_reference), not after how long. Inferred:
# one hour, shorter than Telegram is likely to keep them, so a reader must refresh. A reference is
# also void once the message it came from is deleted (inferred, stricter), and reading the message
# again after it expired gives a new one.
FILE_REFERENCE_LIFETIME = timedelta(hours=1)

# A bot's data centre (where its account lives) and the data centres a file can be kept on
# (help.getConfig's dc_options: production DCs 1 to 5). A file on another DC is read through a
# connection to that DC, authorised with auth.exportAuthorization / auth.importAuthorization;
# asked on the wrong one, upload.getFile answers FILE_MIGRATE_X (303, X the file's DC).
HOME_DC = 2
DCS = (1, 2, 3, 4, 5)

# upload.getFile calls a bot may make per second, over all its connections. Telegram documents no
# rate for file reads (it does answer FLOOD_WAIT_X to them, as to any method). Inferred: 100 calls
# in any one-second span (100 MB/s at 1 MB a call), counted alone, not in the 30/s send budget;
# beyond it FLOOD_WAIT_X with the seconds until a call fits. TelegramServer.rates_set(file_read_rate=)
# changes it.
FILE_READ_RATE = 100
