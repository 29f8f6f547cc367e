"""Seed 002's drip bot (shared/seeds/002_*.txt), exactly: its SQLite schema copied verbatim from the
document's "database.py" section, its sample rows (the document's "Database Schema Details", with
their times moved to the test's clock), its pre-migration JSON files and its `.env`."""

import json
import sqlite3
from datetime import UTC, datetime, timedelta

# Verbatim from the document, comments and index included.
DDL = """
CREATE TABLE users (
    chat_id INTEGER PRIMARY KEY,
    user_id INTEGER,
    username TEXT,
    first_name TEXT,
    last_name TEXT,
    start_payload TEXT,
    timestamp_utc TEXT
);

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,           -- UUID
    chat_id INTEGER,               -- Who to send to
    task_type TEXT,                -- "msg_30s", "msg_3min", etc.
    send_at INTEGER,               -- Unix timestamp when to send
    status TEXT,                   -- "pending", "sent", "failed", "cancelled"
    retries INTEGER,               -- How many times we tried
    payload TEXT                   -- JSON string with message details
);

CREATE TABLE button_clicks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id INTEGER,
    button_type TEXT,              -- "join_channel", "verify"
    timestamp TEXT
);

CREATE INDEX idx_tasks_pending ON tasks(status, send_at);
-- Makes queries like "SELECT WHERE status='pending' AND send_at<=X" FAST
"""

# The document's .env, as it gives it (the token and hash made whole: the document elides them).
ENV = """# Core Config
TELEGRAM_BOT_TOKEN=8557282195:AAEabcdefghijklmnopqrstuvwxyz0123456  # Bot token from @BotFather
ADMIN_USER_ID=1977988206              # Your Telegram user ID
CHANNEL_URL=https://t.me/yourbot      # Public channel link

# Source Channel
SOURCE_CHANNEL_ID=-1003232273065      # Channel where messages stored
TARGET_CHANNEL_ID=-1003232273065      # Channel for membership check

# Message IDs (from source channel)
MSG_IMMEDIATE_ID=36                   # Video welcome
MSG_30S_ID=56                         # First text
MSG_3MIN_ID=57                        # Second message
MSG_2H_ID=50                          # Final reminder

# Telethon (for /results command)
TELEGRAM_API_ID=27436879
TELEGRAM_API_HASH=d4ef9bf420939c1a0123456789abcdef
TELEGRAM_PHONE=+917847041321

# Timing
RESULTS_CACHE_HOURS=1                 # Cache /results for X hours
CLEANUP_DELAY_MINUTES=15              # Wait time before cleanup

# Broadcasting
BROADCAST_BATCH_SIZE=10               # Users per batch
"""

CHANNEL = -1003232273065
USER = 1977988206
OTHER = 1977988207
FAREWELL = "Thanks for using this bot!"


def iso(moment: datetime) -> str:
    """As the drip bot writes timestamp_utc: datetime.utcnow().isoformat(), naive UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat()


def unix(moment: datetime) -> int:
    return int(moment.timestamp())


def payloads(channel: int = CHANNEL) -> dict[str, dict]:
    """Each task type's payload, as utils.create_user_tasks builds it."""
    return {
        "msg_30s": {"message_id": 56, "source_channel_id": channel},
        "msg_3min": {"message_id": 57, "source_channel_id": channel},
        "msg_cleanup": {"farewell_message": FAREWELL},
        "msg_2h": {"message_id": 50, "check_button_click": True, "required_button": "join_channel"},
    }


DELAYS = {"msg_30s": 40, "msg_3min": 180, "msg_cleanup": 1080, "msg_2h": 7200}


def sample(joined: datetime, user: int = USER, *, sent=("msg_30s",), prefix="") -> tuple[tuple, list[tuple]]:
    """One user's rows as the document's tables show them: the user and their four tasks (those
    in `sent` sent, the others pending), due at the document's delays after `joined`."""
    users = (user, user, "cogitosk", "F", None, None, iso(joined))
    tasks = [
        (
            f"{prefix}{name}-{user}", user, kind, unix(joined + timedelta(seconds=DELAYS[kind])),
            "sent" if kind in sent else "pending", 0, json.dumps(payloads()[kind]),
        )
        for name, kind in zip(("abc123", "def456", "ghi789", "jkl012"), DELAYS, strict=True)
    ]  # fmt: skip
    return users, tasks


def sqlite_db(path, script: str, inserts):
    """A SQLite database made by `script`, with the rows of each (INSERT statement, rows)."""
    db = sqlite3.connect(path)
    db.executescript(script)
    for sql, rows in inserts:
        db.executemany(sql, rows)
    db.commit()
    db.close()
    return path


def drip_db(path, *, users=(), tasks=(), clicks=()):
    """A database made by the document's own DDL, with these rows."""
    return sqlite_db(
        path,
        DDL,
        [
            ("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?)", users),
            ("INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?)", tasks),
            ("INSERT INTO button_clicks (chat_id, button_type, timestamp) VALUES (?, ?, ?)", clicks),
        ],
    )


def two_users_db(path, joined, *, other_joined=None, clicks=(("join_channel", 80), ("verify", 95)), other_retries=0):
    """USER and OTHER, who started the bot at `joined` (OTHER at `other_joined`, default the
    same), their 40 s posts sent; USER's clicks (type, seconds after joining); OTHER's msg_3min
    tried `other_retries` times already."""
    user, tasks = sample(joined)
    other, other_tasks = sample(other_joined or joined, user=OTHER)
    other_tasks[1] = (*other_tasks[1][:5], other_retries, other_tasks[1][6])
    clicks = [(USER, kind, iso(joined + timedelta(seconds=after))) for kind, after in clicks]
    return drip_db(path, users=[user, other], tasks=tasks + other_tasks, clicks=clicks)
