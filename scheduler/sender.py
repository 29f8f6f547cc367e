"""The Telegram sender of a worker process: created lazily, once per process, on first use.

Each worker process gets its own persistent session file, `worker-<n>.session`, where n is the first
slot whose lock file no other process holds: sessions survive restarts (no new login each time)
and are never shared by two live processes.
"""

from __future__ import annotations

import atexit
import logging
import threading

from django.conf import settings

from botapp.config import bot_config_load
from botapp.services.users import user_access_hash, user_access_hashes_fill
from botapp.telegram.gateway import Gateway
from botapp.telegram.limiter import BULK, RedisLimiter
from botapp.telegram.slots import slot_take

log = logging.getLogger(__name__)

_lock = threading.Lock()
_gateway: Gateway | None = None
_slot_file = None


def worker_gateway() -> Gateway:
    global _gateway
    with _lock:
        if _gateway is None:
            _gateway = _build()
        return _gateway


def _session_slot() -> str:
    """Hold an exclusive lock on the first free worker-<n>.lock for the life of this process."""
    global _slot_file
    directory = settings.TELEGRAM_SESSION_DIR / "offline" if settings.TELEGRAM_OFFLINE else settings.TELEGRAM_SESSION_DIR
    name, _slot_file = slot_take(directory, "worker")
    return name


def _build() -> Gateway:
    # here: only a process that sends builds a gateway; the web, beat and every command import this
    # module (through the job registry) and would load the kurigram client for nothing (~60 ms)
    from botapp.telegram.client import client_configured
    from botapp.telegram.pyrogram_gateway import PyrogramGateway

    config = bot_config_load()
    name = _session_slot()
    if settings.TELEGRAM_OFFLINE:
        log.warning(
            "TELEGRAM_OFFLINE is set: this worker talks to the in-memory Telegram at %s, not to Telegram",
            settings.TELEGRAM_OFFLINE_SOCKET,
        )
    client = client_configured(config, name=name, no_updates=True)
    gateway = PyrogramGateway.start_in_thread(
        client,
        limiter=RedisLimiter.from_settings(lane=BULK),  # a worker's traffic never queues in front of replies
        max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT,
        peers=user_access_hash,  # stored by runbot: a send costs no resolution call
        peers_learnt=user_access_hashes_fill,  # named by Telegram for a user addressed by id alone
        paid=settings.TELEGRAM_PAID_BROADCASTS,  # bulk sends carry the paid flag, or 1000/s is a FloodWait storm
    )
    atexit.register(gateway.stop)
    log.info("worker sender ready: session=%s bot=@%s", name, gateway.bot_username)
    return gateway
