"""The in-memory Telegram as a process of its own, on a Unix socket (`manage.py telegram_server`).

Clients connect with offline.telegram.connection's `SocketConnection` (MTProto packets in frames,
frames.py), so several processes share one Telegram as they share the real one, and what a
killed worker sent is still counted. Tests and scripts steer it with offline.telegram.remote's
`RemoteTelegram`: the same controls as a `TelegramServer` in-process (user_sends, block,
fail_next, count, ...), as JSON over the socket; this module answers them. Media connections and
connections to other DCs go to a socket beside it (protocol.files_socket), served by a process of
its own in `telegram_server` (file_dcs.py: the file data centres, on other machines than the bot's
at Telegram).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from inmemory_telegram.file_dcs import FileDCs
from inmemory_telegram.limits import HOME_DC
from inmemory_telegram.protocol import (
    CONTROL,
    CONTROL_ANSWER,
    CONTROLS,
    HELLO,
    PACKET,
    STREAM_LIMIT,
    WRITTEN,
    files_socket,
    frame,
    read_frame,
)
from inmemory_telegram.server import TelegramServer
from inmemory_telegram.state import Media, Profile

PROFILE_FIELDS = {f.name for f in dataclasses.fields(Profile)}  # a caller's user may carry more (its access hash)


def _control(server: TelegramServer, name: str, args: list, kwargs: dict):
    if name not in CONTROLS:
        raise ValueError(f"unknown control {name!r}")
    if name == "events_since":
        with server.lock:
            return [dataclasses.asdict(e) for e in server.events[args[0] if args else 0 :]]
    if name == "flood_waits":
        return server.flood_waits
    if name == "set_rates":
        server.rates_set(**kwargs)
        return None
    if name in ("user_sends", "tap", "request_join"):
        user_index = 1 if name == "request_join" else 0
        args = list(args)
        args[user_index] = Profile(**{k: v for k, v in args[user_index].items() if k in PROFILE_FIELDS})
    if "media" in kwargs and kwargs["media"] is not None:
        kwargs["media"] = Media(**kwargs["media"])
    if "forward_from" in kwargs and kwargs["forward_from"] is not None:
        kwargs["forward_from"] = tuple(kwargs["forward_from"])
    return getattr(server, name)(*args, **kwargs)


async def serve(server: TelegramServer, path: Path, *, ready: Callable[[], object] | None = None, file_dcs: bool = False) -> None:
    """Listen on `path` (the bot's DC) and protocol.files_socket(path) (media connections, other
    DCs) until cancelled; `ready()` is called once both accept connections. `file_dcs`: the files'
    socket served by a process of its own (file_dcs.py), as `manage.py telegram_server` serves it;
    else by this one (a server in a test's process)."""
    files_path = Path(files_socket(path))
    for stale in (path, files_path):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    processes = {"bot_dc": os.getpid(), "file_dcs": os.getpid()}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        endpoint = None

        def write(data: bytes) -> None:
            if not writer.is_closing():
                writer.write(data)

        def push(packet: bytes) -> None:  # any thread (answers can be delayed by a timer)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(write, frame(PACKET, packet))

        try:
            while True:
                kind, payload = await read_frame(reader)
                if kind == HELLO:
                    # the auth key (256 bytes), then the data centre (2 bytes; none: the bot's), then
                    # the token of the bot the key was signed in to (none: a person's user session)
                    dc_id = struct.unpack(">H", payload[256:258])[0] if len(payload) >= 258 else HOME_DC
                    token = payload[258:].decode() or None
                    endpoint = server.connect(
                        payload[:256], push, hangup=lambda: loop.call_soon_threadsafe(writer.close), dc_id=dc_id,
                        bot_token=token,
                    )  # fmt: skip
                elif kind == WRITTEN and endpoint is not None:
                    (written,) = struct.unpack_from(">d", payload)
                    endpoint.receive(payload[8:], written=written)
                elif kind == CONTROL:
                    request = json.loads(payload)
                    try:
                        if request["name"] == "process_ids":  # which process serves which DCs
                            answer = {"ok": processes}
                        else:
                            answer = {"ok": _control(server, request["name"], request.get("args", []), request.get("kwargs", {}))}
                    except Exception as exc:  # noqa: BLE001 - the caller gets the error, the server goes on
                        answer = {"error": f"{type(exc).__name__}: {exc}"}
                    write(frame(CONTROL_ANSWER, json.dumps(answer, default=str).encode()))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if endpoint is not None:
                endpoint.close()
            writer.close()

    async with contextlib.AsyncExitStack() as stack:
        stack.callback(files_path.unlink, missing_ok=True)
        unix_server = await asyncio.start_unix_server(handle, path=str(path), limit=STREAM_LIMIT)
        os.chmod(path, 0o600)
        await stack.enter_async_context(unix_server)
        link = None
        if file_dcs:
            link = await stack.enter_async_context(FileDCs(server, files_path))
            processes["file_dcs"] = link.pid
        else:
            files_server = await asyncio.start_unix_server(handle, path=str(files_path), limit=STREAM_LIMIT)
            os.chmod(files_path, 0o600)
            await stack.enter_async_context(files_server)
        if ready is not None:
            ready()
        async with asyncio.TaskGroup() as group:
            group.create_task(unix_server.serve_forever())
            if link is not None:
                group.create_task(link.run())


@contextlib.contextmanager
def served_on_socket(telegram: TelegramServer, *, file_dcs: bool = False) -> Iterator[Path]:
    """`telegram` served on a Unix socket in a thread of this process, as `manage.py
    telegram_server` serves it to offline workers (TELEGRAM_OFFLINE=1). Yields the socket path.
    `file_dcs`: media connections served by a process of its own, as telegram_server does (serve)."""
    with tempfile.TemporaryDirectory(prefix="tg") as directory:  # short: socket paths are limited to ~100 bytes
        path = Path(directory) / "telegram.sock"
        ready, running = threading.Event(), {}

        async def run():
            running["loop"], running["task"] = asyncio.get_running_loop(), asyncio.current_task()
            with contextlib.suppress(asyncio.CancelledError):
                await serve(telegram, path, ready=ready.set, file_dcs=file_dcs)

        thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("the in-memory Telegram's socket did not open")
        try:
            yield path
        finally:
            running["loop"].call_soon_threadsafe(running["task"].cancel)
            thread.join(10)
