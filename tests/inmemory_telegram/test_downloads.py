"""The in-memory Telegram serves files as Telegram documents it (core.telegram.org/api/files), seen
through kurigram's real client: upload.getFile's rules on offset and limit, data centres, file
references that expire, a rate on file reads, and the bytes themselves."""

import asyncio
import hashlib
from datetime import timedelta

from pyrogram import errors, raw
from pyrogram.session import Session

from botapp import clock
from botapp.telegram.downloads import location_of
from botapp.telegram.kurigram import media_invoke, media_session_open
from inmemory_telegram import content, limits
from inmemory_telegram.state import Media
from offline.telegram.clients import offline_downloader
from tests.conftest import STORAGE

KIB, MIB = 1024, 1024 * 1024


def run(telegram, scenario):
    """`scenario(client)` with a started offline client (a Downloader's), on a loop of its own."""

    async def main():
        downloader = offline_downloader(telegram)
        await downloader.start()
        try:
            return await scenario(downloader.client)
        finally:
            await downloader.stop()

    return asyncio.run(asyncio.wait_for(main(), timeout=60))  # bounds a failure only


async def location(client, message_id):
    peer = await client.resolve_peer(STORAGE)
    answer = await client.invoke(
        raw.functions.channels.GetMessages(
            channel=raw.types.InputChannel(channel_id=peer.channel_id, access_hash=peer.access_hash),
            id=[raw.types.InputMessageID(id=message_id)],
        )
    )
    return location_of(answer.messages[0]).input


async def get(session, where, offset, limit, *, precise=False):
    answer = await media_invoke(
        session, raw.functions.upload.GetFile(location=where, offset=offset, limit=limit, precise=precise or None)
    )
    return answer.bytes


# (offset, limit, precise) -> the error Telegram's rules give, or None
CASES = [
    (0, MIB, False, None),
    (0, 4 * KIB, False, None),
    (4 * KIB, 512 * KIB, False, None),  # the offset need not be a multiple of the limit
    (MIB - 4 * KIB, 4 * KIB, False, None),
    (2 * KIB, 4 * KIB, False, "OFFSET_INVALID"),  # not divisible by 4 KB
    (-4 * KIB, 4 * KIB, False, "OFFSET_INVALID"),
    (0, 12 * KIB, False, "LIMIT_INVALID"),  # divisible by 4 KB, does not divide 1 MB
    (0, 1000, False, "LIMIT_INVALID"),
    (0, 2 * MIB, False, "LIMIT_INVALID"),
    (0, 0, False, "LIMIT_INVALID"),
    (MIB - 4 * KIB, 8 * KIB, False, "LIMIT_INVALID"),  # across the 1 MB boundary
    (512 * KIB + 4 * KIB, 512 * KIB, False, "LIMIT_INVALID"),
    (KIB, 3 * KIB, True, None),  # precise: 1 KB alignment, any multiple of 1 KB up to 1 MB
    (3 * KIB, 1000 * KIB, True, None),
    (512, KIB, True, "OFFSET_INVALID"),
    (0, 1500, True, "LIMIT_INVALID"),
    (0, MIB + KIB, True, "LIMIT_INVALID"),
    (MIB - KIB, 2 * KIB, True, "LIMIT_INVALID"),  # precise parts stay inside 1 MB too
]


def test_get_file_refuses_offsets_and_limits_exactly_as_telegram_documents(telegram):
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=3 * MIB)
    file = telegram.message(STORAGE, message_id).file

    async def scenario(client):
        where = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            found = []
            for offset, limit, precise, _ in CASES:
                try:
                    data = await get(session, where, offset, limit, precise=precise)
                    found.append(None if data == file.read(offset, limit) else "WRONG BYTES")
                except errors.BadRequest as exc:
                    found.append(exc.ID)
            return found
        finally:
            await session.stop()

    assert run(telegram, scenario) == [error for *_, error in CASES]


def test_a_part_at_the_end_is_cut_short_and_one_past_it_is_empty(telegram):
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=MIB + 10)
    file = telegram.message(STORAGE, message_id).file

    async def scenario(client):
        where = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            return [await get(session, where, MIB, 64 * KIB), await get(session, where, 2 * MIB, 4 * KIB)]
        finally:
            await session.stop()

    tail, past = run(telegram, scenario)
    assert tail == file.read(MIB, 10) and len(tail) == 10
    assert past == b""


def test_a_file_on_another_dc_needs_a_session_there_signed_in_with_an_exported_authorization(telegram):
    message_id = telegram.post(STORAGE, "", media=Media("video", "far.mp4"), file_size=100 * KIB, dc_id=4)

    async def scenario(client):
        where = await location(client, message_id)
        home = await media_session_open(client, limits.HOME_DC)
        key = await client.storage.provisioned_auth_key(4)
        unsigned = Session(client, 4, "127.0.0.1", 443, key, False, is_media=True)
        await unsigned.start()
        far = await media_session_open(client, 4)
        try:
            outcomes = []
            for session in (home, unsigned):
                try:
                    await get(session, where, 0, 128 * KIB)
                except errors.RPCError as exc:
                    outcomes.append(exc.ID if exc.ID != "FILE_MIGRATE_X" else f"FILE_MIGRATE_{exc.value}")
            outcomes.append(await get(far, where, 0, 128 * KIB))
            try:  # exported bytes serve once
                exported = await client.invoke(raw.functions.auth.ExportAuthorization(dc_id=4))
                await media_invoke(far, raw.functions.auth.ImportAuthorization(id=exported.id, bytes=exported.bytes))
                await media_invoke(unsigned, raw.functions.auth.ImportAuthorization(id=exported.id, bytes=exported.bytes))
            except errors.BadRequest as exc:
                outcomes.append(exc.ID)
            return outcomes
        finally:
            for session in (home, unsigned, far):
                await session.stop()

    migrate, unregistered, data, reused = run(telegram, scenario)
    assert (migrate, unregistered, reused) == ("FILE_MIGRATE_4", "AUTH_KEY_UNREGISTERED", "AUTH_BYTES_INVALID")
    assert data == telegram.message(STORAGE, message_id).file.read(0, 100 * KIB)


def test_a_file_reference_expires_after_its_lifetime_and_reading_the_message_gives_a_new_one(telegram):
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=10 * KIB)

    async def scenario(client):
        old = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            clock.clock_advance(limits.FILE_REFERENCE_LIFETIME - timedelta(seconds=1))
            await get(session, old, 0, 4 * KIB)  # still within its lifetime
            clock.clock_advance(timedelta(seconds=1))
            outcomes = []
            try:
                await get(session, old, 0, 4 * KIB)
            except errors.FileReferenceExpired as exc:
                outcomes.append(exc.ID)
            new = await location(client, message_id)
            outcomes.append(new.file_reference != old.file_reference)
            outcomes.append(len(await get(session, new, 0, 16 * KIB)))
            return outcomes
        finally:
            await session.stop()

    assert run(telegram, scenario) == ["FILE_REFERENCE_EXPIRED", True, 10 * KIB]


def test_file_reads_are_limited_per_second_by_their_own_budget(telegram, rate_clock):
    telegram.enforce_rates = True
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=4 * KIB)

    async def scenario(client):
        where = await location(client, message_id)
        session = await media_session_open(client, limits.HOME_DC)
        try:
            for _ in range(limits.FILE_READ_RATE):
                await get(session, where, 0, 4 * KIB)
            try:
                await get(session, where, 0, 4 * KIB)
            except errors.FloodWait as exc:
                refused = exc.value
            rate_clock.advance(1.0)
            return refused, len(await get(session, where, 0, 4 * KIB))
        finally:
            await session.stop()

    assert run(telegram, scenario) == (1, 4 * KIB)


def test_a_far_dc_link_delays_each_answer_and_a_connection_carries_them_one_after_another(telegram):
    telegram.dc_set(4, latency=0.05, bandwidth=10 * MIB)
    endpoint = telegram.connect(b"k" * 256, lambda packet: None, dc_id=4, bot_token=telegram.bot.token)
    home = telegram.connect(b"h" * 256, lambda packet: None, bot_token=telegram.bot.token)
    first, second = telegram._link_delay(endpoint, MIB), telegram._link_delay(endpoint, MIB)
    assert 0.05 + 0.1 - 0.01 <= first <= 0.05 + 0.1 + 1e-9  # (now + x) - now is x up to rounding
    assert second - first >= 0.1 - 0.01  # queued behind the first on the same connection
    assert telegram._link_delay(home, MIB) == 0.0


def test_generated_bytes_depend_on_the_file_and_the_place_and_no_two_blocks_are_alike():
    data = content.generated(7, 0, 4 * MIB)
    blocks = {data[i : i + content.BLOCK] for i in range(0, len(data), content.BLOCK)}
    assert len(blocks) == len(data) // content.BLOCK
    assert content.generated(7, 12_345, 99_999) == data[12_345 : 12_345 + 99_999]
    assert content.generated(8, 0, 4 * KIB) != data[: 4 * KIB]
    assert content.generated_sha256(7, 4 * MIB, step=MIB) == hashlib.sha256(data).hexdigest()
