"""The streaming process's ASGI application: Django's, plus the ASGI lifespan, in which the process
builds and starts its readers and slots on the server's loop (and stops them on the way out).
Django's own ASGI handler serves HTTP only."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from django.core.asgi import get_asgi_application

from botapp.stream.pool import Serving, pool_started, serving_set
from botapp.stream.slots import Slots

log = logging.getLogger(__name__)


async def serving_start() -> Serving:
    """The readers of every configured bot, signed in, and this process's slots."""
    return Serving(pool=await pool_started(), slots=Slots())


class StreamApp:
    """`application` of config/asgi_stream.py. `start`: what builds the process's pool and slots
    (tests give their own, on the in-memory Telegram)."""

    def __init__(self, start: Callable[[], Awaitable[Serving]] = serving_start):
        self.django = get_asgi_application()
        self.start = start
        self.serving: Serving | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        else:
            await self.django(scope, receive, send)

    async def lifespan(self, receive, send):
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self.serving = await self.start()
                except Exception as exc:  # noqa: BLE001 - the server says why it did not start, and exits
                    log.exception("the streaming process could not start its readers")
                    await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                    return
                serving_set(self.serving)
                self.serving.trimmer.start()
                log.info("streaming process ready: %d bot(s)", len(self.serving.pool.downloaders))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.serving is not None:
                    await self.serving.trimmer.stop()
                    await self.serving.pool.stop()
                    await self.serving.slots.close()
                    serving_set(None)
                await send({"type": "lifespan.shutdown.complete"})
                return
