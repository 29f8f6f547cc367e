"""Several bots on one in-memory Telegram (stream bots): each its own token, account, keys and
budget of file reads; each reads a channel only as its admin, and the file locations one bot got
serve no other (inmemory_telegram/accounts.py: ACCOUNT_BOUND_FILES)."""

import asyncio

import pytest
from pyrogram import errors, raw

from botapp.telegram.downloads import location_of
from botapp.telegram.kurigram import media_invoke, media_session_open
from inmemory_telegram import limits
from inmemory_telegram.state import Media
from offline.telegram.clients import offline_downloader
from tests.conftest import STORAGE

KIB = 1024
EXTRA = "7000000002:extra-token"
OUTSIDER = "7000000003:outsider-token"


def run(telegram, scenario, *tokens):
    """`scenario(*clients)`: started offline clients, one per token (None: the main bot)."""

    async def main():
        downloaders = [offline_downloader(telegram, name=f"bot{n}", bot_token=t) for n, t in enumerate(tokens)]
        for downloader in downloaders:
            await downloader.start()
        try:
            return await scenario(*(d.client for d in downloaders))
        finally:
            for downloader in downloaders:
                await downloader.stop()

    return asyncio.run(asyncio.wait_for(main(), timeout=60))  # bounds a failure only


async def channel_message(client, message_id):
    peer = await client.resolve_peer(STORAGE)
    channel = raw.types.InputChannel(channel_id=peer.channel_id, access_hash=peer.access_hash)
    answer = await client.invoke(
        raw.functions.channels.GetMessages(channel=channel, id=[raw.types.InputMessageID(id=message_id)]), sleep_threshold=0
    )
    return answer.messages[0], channel


async def get(session, where, offset=0, limit=4 * KIB):
    return (await media_invoke(session, raw.functions.upload.GetFile(location=where, offset=offset, limit=limit))).bytes


def test_each_bot_reads_the_channel_it_administers_with_locations_of_its_own(telegram):
    bot_id = telegram.bot_add(EXTRA, admin_of=[STORAGE])
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=10 * KIB)
    file = telegram.message(STORAGE, message_id).file

    async def scenario(main, extra):
        (main_message, main_channel), (extra_message, extra_channel) = [
            await channel_message(c, message_id) for c in (main, extra)
        ]
        mine, theirs = location_of(main_message).input, location_of(extra_message).input
        main_session = await media_session_open(main, limits.HOME_DC)
        extra_session = await media_session_open(extra, limits.HOME_DC)
        try:
            found = [(await extra.get_me()).id, await get(extra_session, theirs)]
            for session, where in ((extra_session, mine), (main_session, theirs)):
                try:
                    await get(session, where)
                except errors.BadRequest as exc:
                    found.append(exc.ID)
            # the main bot's reference with the extra bot's access hash: not the extra bot's reference
            crossed = raw.types.InputDocumentFileLocation(
                id=theirs.id, access_hash=theirs.access_hash, file_reference=mine.file_reference, thumb_size=""
            )
            try:
                await get(extra_session, crossed)
            except errors.BadRequest as exc:
                found.append(exc.ID)
            try:  # nor is the main bot's access hash to the channel the extra bot's
                await extra.invoke(
                    raw.functions.channels.GetMessages(channel=main_channel, id=[raw.types.InputMessageID(id=message_id)])
                )
            except errors.BadRequest as exc:
                found.append(exc.ID)
            found.append((mine.access_hash != theirs.access_hash, main_channel.access_hash != extra_channel.access_hash))
            return found
        finally:
            await main_session.stop()
            await extra_session.stop()

    me, data, *refusals, differ = run(telegram, scenario, None, EXTRA)
    assert me == bot_id and data == file.read(0, 4 * KIB)
    assert refusals == ["FILE_ID_INVALID", "FILE_ID_INVALID", "FILE_REFERENCE_EXPIRED", "CHANNEL_INVALID"]
    assert differ == (True, True)


def test_a_bot_that_is_not_an_admin_of_the_channel_cannot_read_it_nor_its_files(telegram):
    telegram.bot_add(EXTRA, admin_of=[STORAGE])
    telegram.bot_add(OUTSIDER)
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=10 * KIB)

    async def scenario(extra, outsider):
        found = []
        try:
            await outsider.resolve_peer(STORAGE)
        except errors.BadRequest as exc:
            found.append(exc.ID)
        message, channel = await channel_message(extra, message_id)
        telegram.bot_admin_set(STORAGE, 7000000002, False)  # the owner removes it
        try:
            await extra.invoke(raw.functions.channels.GetMessages(channel=channel, id=[raw.types.InputMessageID(id=message_id)]))
        except errors.BadRequest as exc:
            found.append(exc.ID)
        return found

    assert run(telegram, scenario, EXTRA, OUTSIDER) == ["CHANNEL_INVALID", "CHANNEL_PRIVATE"]


def test_a_token_no_bot_has_signs_nothing_in(telegram):
    async def main():
        downloader = offline_downloader(telegram, bot_token="7000000009:nobody")
        with pytest.raises(errors.Unauthorized):
            await downloader.start()

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_each_bot_has_its_own_budget_of_file_reads(telegram, rate_clock):
    telegram.enforce_rates = True
    telegram.bot_add(EXTRA, admin_of=[STORAGE])
    message_id = telegram.post(STORAGE, "", media=Media("document", "a.bin"), file_size=4 * KIB)

    async def scenario(main, extra):
        sessions, locations = [], []
        for client in (main, extra):
            message, _ = await channel_message(client, message_id)
            locations.append(location_of(message).input)
            sessions.append(await media_session_open(client, limits.HOME_DC))
        try:
            for _ in range(limits.FILE_READ_RATE):
                await get(sessions[0], locations[0])
            try:
                await get(sessions[0], locations[0])
            except errors.FloodWait as exc:
                refused = exc.value
            return refused, len(await get(sessions[1], locations[1]))  # the extra bot is not held up
        finally:
            for session in sessions:
                await session.stop()

    assert run(telegram, scenario, None, EXTRA) == (1, 4 * KIB)


def test_an_exported_authorization_signs_in_only_the_bot_that_exported_it(telegram):
    telegram.bot_add(EXTRA, admin_of=[STORAGE])
    message_id = telegram.post(STORAGE, "", media=Media("video", "far.mp4"), file_size=8 * KIB, dc_id=4)

    async def scenario(main, extra):
        message, _ = await channel_message(extra, message_id)
        far = await media_session_open(extra, 4)  # exported by the extra bot, imported on its key
        try:
            data = await get(far, location_of(message).input)
            exported = await main.invoke(raw.functions.auth.ExportAuthorization(dc_id=4))
            try:  # the main bot's bytes, with the extra bot's id
                await media_invoke(far, raw.functions.auth.ImportAuthorization(id=7000000002, bytes=exported.bytes))
            except errors.BadRequest as exc:
                return data, exc.ID
        finally:
            await far.stop()

    data, refused = run(telegram, scenario, None, EXTRA)
    assert data == telegram.message(STORAGE, message_id).file.read(0, 4 * KIB) and refused == "AUTH_BYTES_INVALID"


def test_what_an_extra_bot_does_beyond_reading_is_refused_as_not_modelled(telegram):
    telegram.bot_add(EXTRA, admin_of=[STORAGE])

    async def scenario(extra):
        peer = await extra.resolve_peer(STORAGE)
        with pytest.raises(errors.BadRequest, match="INPUT_METHOD_INVALID"):
            await extra.invoke(raw.functions.messages.SendMessage(peer=peer, message="hi", random_id=1))

    run(telegram, scenario, EXTRA)


def test_an_extra_bot_has_met_none_of_the_main_bots_users(telegram):
    telegram.bot_add(EXTRA, admin_of=[STORAGE])
    access_hash = telegram.users_meet([42])[42]

    async def scenario(main, extra):
        found = [
            len(await c.invoke(raw.functions.users.GetUsers(id=[raw.types.InputUser(user_id=42, access_hash=access_hash)])))
            for c in (main, extra)
        ]
        try:
            await extra.invoke(raw.functions.users.GetFullUser(id=raw.types.InputUser(user_id=42, access_hash=access_hash)))
        except errors.BadRequest as exc:
            found.append(exc.ID)
        return found

    assert run(telegram, scenario, None, EXTRA) == [1, 0, "PEER_ID_INVALID"]
