"""Telegram's numbers, written once. Forms, services, the gateway, the limiter and the in-memory
Telegram server all import them from here.

Sources: Telegram's Bot API and MTProto documents (core.telegram.org/bots/faq#broadcasting-to-users,
core.telegram.org/bots/api, core.telegram.org/api/config). Where a figure is inferred from how
Telegram behaves rather than read in a document, the comment says so.
"""

from datetime import UTC, datetime, timedelta

# --- ids per call ----------------------------------------------------------------------------
IDS_PER_CALL = 100  # messages.deleteMessages / forwardMessages / getMessages take at most 100 ids

# --- lengths -----------------------------------------------------------------------------------
# Telegram counts text in UTF-16 code units (an emoji outside the Basic Multilingual Plane is 2),
# as its entity offsets do: measure with `utf16_length`, never len().
TEXT_LENGTH = 4096  # UTF-16 units of a text message (after entity parsing)
CAPTION_LENGTH = 1024  # UTF-16 units of a media caption (non-premium senders, bots included)
BUTTON_TEXT_LENGTH = 64  # inferred: longer button labels are cut by clients; we refuse them (UTF-16 units)
# answerCallbackQuery's text: "0-200 characters" (Bot API); counted in UTF-16 units here (inferred, stricter).
CALLBACK_ANSWER_LENGTH = 200
# Buttons under one message: Telegram documents no figure; 100 is what its clients show and what
# file bots keep under (inferred, the smaller of the figures seen).
KEYBOARD_BUTTONS = 100
CALLBACK_DATA_BYTES = 64  # bytes (UTF-8) of an inline button's callback data: `callback_data_length`
START_PAYLOAD_LENGTH = 64  # characters of a deep-link /start payload, [A-Za-z0-9_-]
USERNAME_LENGTH = 64  # inferred upper bound; Telegram usernames are 5-32 characters today
USER_ID_MAX = 2**52 - 1  # user ids have at most 52 significant bits (Bot API, User.id)
# Channels (and supergroups) as the Bot API numbers them: -100 followed by the channel's own id, which
# is below 10**12 - 2**31 (kurigram's MAX_CHANNEL_ID, from Telegram's clients: inferred, not documented).
CHANNEL_ID_MAX = -1_000_000_000_001
CHANNEL_ID_MIN = -1_000_000_000_000 - (1_000_000_000_000 - 2**31)
MESSAGE_ID_MAX = 2**31 - 1  # message ids are TL `int` (32 bits): messages.forwardMessages id:Vector<int>
ALBUM_SIZE = 10  # media in one album (messages.sendMultiMedia)
# Which media may share an album: photos and videos mix; documents go only with documents, audio
# only with audio (core.telegram.org/api/files, "Albums"; the Bot API's sendMediaGroup says the same).
ALBUM_GROUPS = {"photo": "visual", "video": "visual", "document": "document", "audio": "audio"}

# --- uploads (core.telegram.org/api/files) -------------------------------------------------------
UPLOAD_PART_SIZE = 512 * 1024  # bytes in one upload.saveFilePart / saveBigFilePart, at most
UPLOAD_PARTS = 4000  # parts of one file, at most (8000 for premium users; bots are not premium)
UPLOAD_PARTS_PREMIUM = 8000
UPLOAD_BIG_FILE = 10 * 1024 * 1024  # files larger than this are uploaded with upload.saveBigFilePart
FILE_SIZE = UPLOAD_PART_SIZE * UPLOAD_PARTS  # 2000 MiB: the largest file a bot uploads
USER_FILE_SIZE = UPLOAD_PART_SIZE * UPLOAD_PARTS_PREMIUM  # 4000 MiB: the largest a (Premium) user sends
PHOTO_SIZE = 10 * 1024 * 1024  # a photo, at most (the Bot API's documented sendPhoto limit; larger images go as documents)

# --- time windows --------------------------------------------------------------------------------
# Telegram's dates are TL `int` seconds since 1970 (message dates, invite links' expire_date): the last
# one it can carry is 2038-01-19 03:14:07 UTC.
DATE_MAX = datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)
DELETE_WINDOW = timedelta(hours=48)  # bots may delete messages in private chats only this long
DELETE_WINDOW_MINUTES = int(DELETE_WINDOW.total_seconds() // 60)
CALLBACK_ANSWER_WINDOW = timedelta(seconds=15)  # inferred: older callback queries answer QUERY_ID_INVALID

# --- rates (Bot FAQ: "broadcasting to users") -----------------------------------------------------
GLOBAL_RATE = 30  # messages per second overall, free broadcasts
PAID_RATE = 1000  # messages per second with paid broadcasts (the request must carry the paid flag)
PRIVATE_CHAT_INTERVAL = 1.0  # seconds between messages to one private chat, sustained
PRIVATE_CHAT_BURST = 3  # inferred: Telegram tolerates a short burst in one chat before FLOOD_WAIT
GROUP_PER_MINUTE = 20  # messages per minute to one group or channel
GROUP_CHAT_INTERVAL = 60.0 / GROUP_PER_MINUTE


# --- downloads (core.telegram.org/api/files, "Downloading files") ---------------------------------
# upload.getFile without the precise flag: offset and limit divisible by 4 KB, 1 MB divisible by
# limit, and the part inside one 1 MB chunk (offset // 1 MB == (offset + limit - 1) // 1 MB).
# With the `precise` flag: offset and limit divisible by 1 KB, limit at most 1 MB, the same chunk.
DOWNLOAD_ALIGN = 4 * 1024
DOWNLOAD_ALIGN_PRECISE = 1024
DOWNLOAD_CHUNK = 1024 * 1024

# --- measuring -----------------------------------------------------------------------------------


def utf16_length(text: str) -> int:
    """`text`'s length as Telegram counts it against TEXT_LENGTH, CAPTION_LENGTH and
    BUTTON_TEXT_LENGTH: UTF-16 code units (a character beyond U+FFFF, most emoji, counts 2)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def callback_data_length(data: str) -> int:
    """`data`'s length as Telegram counts it against CALLBACK_DATA_BYTES: bytes of UTF-8."""
    return len(data.encode("utf-8", "surrogatepass"))


def channel_id_problem(chat_id: int) -> str:
    """Why `chat_id` is not a channel id as the Bot API writes them (-100…, CHANNEL_ID_MIN to
    CHANNEL_ID_MAX); "" when it is one."""
    if CHANNEL_ID_MIN <= chat_id <= CHANNEL_ID_MAX:
        return ""
    return (
        f"A channel id looks like -1001234567890: from {CHANNEL_ID_MIN} to {CHANNEL_ID_MAX} "
        f"(got {chat_id}; forward a post of the channel to @userinfobot to read its id)."
    )
