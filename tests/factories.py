import asyncio
import contextlib
import tempfile
import threading
from pathlib import Path

import factory

from botapp.models import StoredFile, TelegramUser


class TelegramUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TelegramUser

    telegram_id = factory.Sequence(lambda n: 5000 + n)
    username = factory.Sequence(lambda n: f"user{n}")
    first_name = "Test"


class StoredFileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StoredFile

    source_chat_id = -1001000000001
    message_ids = factory.LazyFunction(lambda: [1])
    title = "A file"


def meet(telegram, telegram_id: int, *, first_name: str = "Test", username: str = "") -> int:
    """The user writes /start to the bot on the in-memory Telegram (a bot can reach only users it
    has met). Returns the access hash their update carried: runbot stores it on TelegramUser, and
    workers send with it."""
    from botapp.telegram.gateway import TgUser

    telegram.user_sends(TgUser(id=telegram_id, first_name=first_name, username=username), "/start")
    return telegram.users[telegram_id].access_hash


def met_user(telegram, **kwargs) -> TelegramUser:
    """A TelegramUser who wrote to the bot, with the access hash runbot would have stored."""
    user = TelegramUserFactory(**kwargs)
    user.access_hash = meet(telegram, user.telegram_id, first_name=user.first_name, username=user.username)
    user.save(update_fields=["access_hash"])
    return user


@contextlib.contextmanager
def telegram_on_socket(telegram):
    """`telegram` served on a Unix socket, as `manage.py telegram_server` serves it to offline
    workers (TELEGRAM_OFFLINE=1). Yields the socket path."""
    from botapp.telegram.server.process import serve

    with tempfile.TemporaryDirectory(prefix="tg") as directory:  # short: socket paths are limited to ~100 bytes
        path = Path(directory) / "telegram.sock"
        ready, running = threading.Event(), {}

        async def run():
            running["loop"], running["task"] = asyncio.get_running_loop(), asyncio.current_task()
            with contextlib.suppress(asyncio.CancelledError):
                await serve(telegram, path, ready=ready)

        thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
        thread.start()
        assert ready.wait(10), "the socket server did not start"
        try:
            yield path
        finally:
            running["loop"].call_soon_threadsafe(running["task"].cancel)
            thread.join(10)
