"""The web process's own Telegram session, for what the operator console reads while the operator
waits: a post of the posts channel, to check that it exists and to preview it. Built on first use,
once per process, in memory like doctor's (it never touches runbot's or a worker's session file),
with the limiter's reply lane: an operator's read does not queue behind a broadcast.

Nothing is sent through it. The sandbox and tests hand it the gateway they already have
(`console_gateway_use`).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

from django.conf import settings

from botapp.telegram.gateway import Gateway

log = logging.getLogger(__name__)

_lock = threading.Lock()
_gateway: Gateway | None = None


def console_gateway(*, config_load: Callable[[], object]) -> Gateway:
    """This process's console session, logged in on the first call with the bot configuration
    `config_load()` returns (botapp.config.bot_config_load: the configuration sits above this
    layer). BotUnauthorized, or the configuration's errors, reach the caller."""
    global _gateway
    with _lock:
        if _gateway is None:
            _gateway = _build(config_load())
        return _gateway


def console_gateway_use(gateway: Gateway | None) -> None:
    """Use `gateway` for the console's reads from now on (None: build one on the next read)."""
    global _gateway
    with _lock:
        _gateway = gateway


def _build(config) -> Gateway:
    # Imported here: the web process loads this module with the admin, and signs in only when an
    # operator first reads a post.
    from botapp.telegram.client import client_configured
    from botapp.telegram.limiter import REPLY, RedisLimiter
    from botapp.telegram.pyrogram_gateway import PyrogramGateway

    client = client_configured(config, name="console", no_updates=True, in_memory=True)
    gateway = PyrogramGateway.start_in_thread(
        client, limiter=RedisLimiter.from_settings(lane=REPLY), max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT
    )
    atexit.register(gateway.stop)
    log.info("console session ready: bot=@%s", gateway.bot_username)
    return gateway
