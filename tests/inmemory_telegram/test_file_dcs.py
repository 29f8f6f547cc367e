"""`manage.py telegram_server` serves the file data centres from a process of its own
(inmemory_telegram/file_dcs.py), as Telegram keeps files on other machines than the one answering
the bot's chats, with every rule on upload.getFile as strict as in one process: checked here through
both processes with kurigram's real client (the rules themselves, in one process:
tests/inmemory_telegram/test_downloads.py)."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import tempfile
from pathlib import Path

import pytest
import uvloop
from pyrogram import errors, raw

from botapp.telegram.kurigram import media_invoke, media_session_open
from inmemory_telegram import content, limits
from offline.telegram.clients import offline_downloader
from offline.telegram.remote import RemoteTelegram, server_process
from tests.conftest import STORAGE
from tests.inmemory_telegram.test_downloads import CASES, get, location

pytestmark = pytest.mark.slow

KIB, MIB = 1024, 1024 * 1024


@pytest.fixture(scope="module")
def served():
    """(socket path, RemoteTelegram, the telegram_server Popen), one for the module."""
    with tempfile.TemporaryDirectory(prefix="fd") as directory:  # short: socket paths are limited to ~100 bytes
        path = Path(directory) / "telegram.sock"
        with server_process(path, "--network", "none", "--channel", str(STORAGE)) as proc:
            remote = RemoteTelegram(path, timeout=60)
            try:
                yield path, remote, proc
            finally:
                remote.close()


def run(path, scenario, loop_factory=None):
    """`scenario(client)` with a started client of the telegram_server at `path` (on an event loop
    of `loop_factory`'s, asyncio's by default)."""

    async def main():
        downloader = offline_downloader(str(path))
        await downloader.start()
        try:
            return await scenario(downloader.client)
        finally:
            await downloader.stop()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(asyncio.wait_for(main(), timeout=120))  # bounds a failure only


def test_the_bots_dc_answers_while_the_file_dcs_process_is_stalled(served):
    path, remote, proc = served
    processes = remote.process_ids()
    assert processes["bot_dc"] == proc.pid and processes["file_dcs"] not in (proc.pid, os.getpid())
    message_id = remote.post(STORAGE, "", media={"kind": "video", "file": "v.mp4"}, file_size=2 * MIB)
    file_id = remote.file_info(STORAGE, message_id)["id"]

    async def scenario(client):
        where = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            first = await get(session, where, 0, MIB)
            os.kill(processes["file_dcs"], signal.SIGSTOP)
            try:
                reading = asyncio.ensure_future(get(session, where, MIB, MIB))
                sent = await client.send_message(STORAGE, "the bot's DC answers")  # while the file DCs cannot
                stalled = not reading.done()
            finally:
                os.kill(processes["file_dcs"], signal.SIGCONT)
            return first, sent.id, stalled, await reading
        finally:
            await session.stop()

    first, sent_id, stalled, second = run(path, scenario)
    assert sent_id > message_id and stalled
    assert first + second == content.generated(file_id, 0, 2 * MIB)


@pytest.mark.parametrize("loop_factory", [None, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_a_write_on_a_dropped_connection_fails_as_kurigrams_socket_does(served, loop_factory):
    """Once every connection dropped, a packet written on the old one is taken and not sent, or
    raises OSError, as kurigram's TCP transport does, on either event loop (`manage.py stream` runs
    uvloop, which raises RuntimeError on a transport closed under it)."""
    _, remote, _ = served

    async def scenario(client):
        session = await media_session_open(client, limits.HOME_DC)
        try:
            connection = session.connection
            assert remote.connections_drop() >= 1
            await connection.reader_task  # the drop has reached this side
            outcomes = []
            for _ in range(3):
                try:
                    outcomes.append(await connection.send(b"\0" * 64))
                except OSError:
                    outcomes.append("OSError")
                await asyncio.sleep(0)  # the loop closes the transport meanwhile (an event, not a wait)
            return outcomes
        finally:
            await session.stop()

    outcomes = run(served[0], scenario, loop_factory)
    assert len(outcomes) == 3 and set(outcomes) <= {None, "OSError"}, outcomes


def test_offset_and_limit_rules_hold_through_the_file_dcs_process(served):
    path, remote, _ = served
    message_id = remote.post(STORAGE, "", media={"kind": "document", "file": "a.bin"}, file_size=3 * MIB)
    file_id = remote.file_info(STORAGE, message_id)["id"]

    async def scenario(client):
        where = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            found = []
            for offset, limit, precise, _ in CASES:
                try:
                    data = await get(session, where, offset, limit, precise=precise)
                    expected = content.generated(file_id, offset, max(0, min(limit, 3 * MIB - offset)))
                    found.append(None if data == expected else "WRONG BYTES")
                except errors.BadRequest as exc:
                    found.append(exc.ID)
            return found
        finally:
            await session.stop()

    assert run(path, scenario) == [error for *_, error in CASES]


def test_a_file_uploaded_through_the_bots_dc_is_read_byte_for_byte_from_the_file_dcs(served):
    path, _, _ = served
    data = os.urandom(MIB + 5 * KIB)

    async def scenario(client):
        sent = await client.send_document(STORAGE, io.BytesIO(data), file_name="up.bin")
        where = await location(client, sent.id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            return await get(session, where, 0, MIB) + await get(session, where, MIB, MIB)
        finally:
            await session.stop()

    assert run(path, scenario) == data


def test_migrate_import_expiry_and_faults_hold_through_the_file_dcs_process(served):
    path, remote, _ = served
    message_id = remote.post(STORAGE, "", media={"kind": "video", "file": "far.mp4"}, file_size=100 * KIB, dc_id=4)
    file_id = remote.file_info(STORAGE, message_id)["id"]

    async def scenario(client):
        where = await location(client, message_id)
        home = await media_session_open(client, limits.HOME_DC)
        far = await media_session_open(client, 4)
        outcomes = []
        try:
            try:
                await get(home, where, 0, 128 * KIB)
            except errors.SeeOther as exc:
                outcomes.append(f"FILE_MIGRATE_{exc.value}")
            outcomes.append(await get(far, where, 0, 128 * KIB))
            remote.file_references_expire()
            try:
                await get(far, where, 0, 128 * KIB)
            except errors.BadRequest as exc:
                outcomes.append(exc.ID)
            where = await location(client, message_id)  # the message read again: a new reference
            remote.fail_next("FLOOD_WAIT_3", methods=["upload.GetFile"])
            try:
                await media_invoke(far, raw.functions.upload.GetFile(location=where, offset=0, limit=128 * KIB))
            except errors.FloodWait as exc:
                outcomes.append(f"FLOOD_WAIT_{exc.value}")
            outcomes.append(await get(far, where, 0, 128 * KIB))
            return outcomes
        finally:
            await home.stop()
            await far.stop()

    expected = content.generated(file_id, 0, 100 * KIB)
    assert run(path, scenario) == ["FILE_MIGRATE_4", expected, "FILE_REFERENCE_EXPIRED", "FLOOD_WAIT_3", expected]
