"""kurigram's client as every Courier process builds it: a session file of its own, FloodWaits left
to the limiter, kurigram's transport with small packets ciphered on the loop, and the in-memory
Telegram instead of Telegram when the settings say so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.utils.module_loading import import_string
from pyrogram import Client, enums, errors

from botapp.telegram.kurigram import Abridged, session_tune


def client_build(
    *,
    name: str,
    api_id: int,
    api_hash: str,
    bot_token: str,
    workdir: Path,
    no_updates: bool,
    offline=None,
    in_memory: bool = False,
    workers: int | None = None,
) -> Client:
    """A bot client with a session file of its own under `workdir` (never share one between processes).

    `offline`: the in-memory Telegram to talk to instead of Telegram (a `TelegramServer` in this
    process, or the socket path of `manage.py telegram_server`); only the connection differs, and
    the tooling that builds it is named by settings.TELEGRAM_OFFLINE_CONNECTION."""
    workdir.mkdir(parents=True, exist_ok=True)
    options = {"in_memory": in_memory}
    if workers is not None:
        options["workers"] = workers  # updates kurigram dispatches at once
    if offline is not None:  # the provisioned storage engine is in memory or not
        offline_client_options = import_string(settings.TELEGRAM_OFFLINE_CONNECTION)
        options = offline_client_options(
            offline, name=name, workdir=workdir, in_memory=in_memory, api_id=api_id, bot_token=bot_token
        )
    return Client(
        name,
        api_id=api_id,
        api_hash=api_hash,
        bot_token=bot_token,
        workdir=str(workdir),
        no_updates=no_updates,
        # What users sent while runbot was down is fetched by its UpdatePump from the position it
        # stored (botapp/telegram/updates.py), not by kurigram from its session file.
        skip_updates=True,
        parse_mode=enums.ParseMode.HTML,
        sleep_threshold=0,  # FloodWait reaches us; the global limiter decides who waits
        protocol_factory=Abridged,  # kurigram's transport, small packets ciphered on the loop (kurigram.py)
        **options,
    )


def client_configured(config, *, name: str, no_updates: bool, **options) -> Client:
    """client_build for the configured bot (a botapp.config.BotConfig: its credentials and session
    folder), and the in-memory Telegram's socket when TELEGRAM_OFFLINE is set. `options`:
    client_build's others (in_memory, workers)."""
    return client_build(
        name=name,
        api_id=config.api_id,
        api_hash=config.api_hash,
        bot_token=config.bot_token,
        workdir=config.session_dir,
        no_updates=no_updates,
        offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
        **options,
    )


async def client_start(client: Client, *, refused: Callable[[list[str]], Exception]) -> None:
    """Start the client; credentials Telegram refuses become `refused(problems)` (the caller's
    configuration error, naming the variable to fix)."""
    try:
        await client.start()
        session_tune(client)
    except (errors.AccessTokenInvalid, errors.AccessTokenExpired) as exc:
        raise refused([f"BOT_TOKEN was refused by Telegram ({exc.ID}): copy it again from @BotFather"]) from exc
    except errors.ApiIdInvalid as exc:
        raise refused([f"API_ID / API_HASH were refused by Telegram ({exc.ID}): check them at my.telegram.org"]) from exc
