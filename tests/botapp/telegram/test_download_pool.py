"""The streaming process's pool of stream bots (botapp/telegram/download_pool.py: DownloaderPool) on the
in-memory Telegram with several bots: sessions of each process's own, only admins of the storage
channel read, the least loaded bot per stream, one in a FloodWait skipped until its wait ends."""

import asyncio
import random

import pytest
from pyrogram import errors

from botapp.telegram import downloads
from botapp.telegram.download_pool import DownloaderPool, bots_admin
from botapp.telegram.downloads import BotAdmin, StreamBroken
from inmemory_telegram.state import Media
from tests.conftest import STORAGE

MIB = 1024 * 1024
READER = "7000000002:reader-token"
SECOND = "7000000003:second-token"
OUTSIDER = "7000000004:outsider-token"


def pool_of(telegram, tokens, tmp_path, **options) -> DownloaderPool:
    return DownloaderPool.from_tokens(tokens, tmp_path, api_id=1, api_hash="0" * 32, offline=telegram, in_memory=True, **options)


def run(scenario):
    return asyncio.run(asyncio.wait_for(scenario(), timeout=60))  # bounds a failure only


async def read(downloader, message_id, start, end) -> bytes:
    return b"".join([piece async for piece in downloader.read(STORAGE, message_id, start, end)])


def uploaded(telegram, size):
    data = random.Random(size).randbytes(size)
    return telegram.post(STORAGE, "", media=Media("document", "f.bin"), content=data), data


def test_each_process_takes_a_slot_of_its_own_and_names_a_session_per_bot(telegram, tmp_path):
    telegram.bot_add(READER, admin_of=[STORAGE])
    first = pool_of(telegram, [telegram.bot.token, READER], tmp_path)
    second = pool_of(telegram, [telegram.bot.token, READER], tmp_path)  # another process on the host
    names = [[d.client.name for d in p.downloaders] for p in (first, second)]

    async def scenario():
        await first.stop()
        third = pool_of(telegram, [READER], tmp_path)  # the first slot is free again
        await third.stop()
        await second.stop()
        return third.downloaders[0].client.name

    assert names == [["stream-1-7000000001", "stream-1-7000000002"], ["stream-2-7000000001", "stream-2-7000000002"]]
    assert run(scenario) == "stream-1-7000000002"


@pytest.mark.parametrize(
    "tokens", [[READER, READER], ["not-a-token"], ["7000000002:"], []], ids=["twice", "junk", "no-secret", "none"]
)
def test_tokens_that_name_no_bot_or_the_same_bot_twice_are_refused(telegram, tmp_path, tokens):
    with pytest.raises(ValueError):
        pool_of(telegram, tokens, tmp_path)


def test_every_admin_bot_reads_the_file_with_its_own_session_and_a_non_admin_is_left_out(telegram, tmp_path):
    telegram.bot_add(READER, admin_of=[STORAGE])
    telegram.bot_add(OUTSIDER)
    message_id, data = uploaded(telegram, 2 * MIB + 3)
    pool = pool_of(telegram, [telegram.bot.token, READER, OUTSIDER], tmp_path)

    async def scenario():
        await pool.start(storage_chat_id=STORAGE)
        try:
            got = [await read(d, message_id, 5, len(data)) for d in pool.readers]
            return [d.name for d in pool.readers], got, await pool.admins(STORAGE)
        finally:
            await pool.stop()

    readers, got, admins = run(scenario)
    assert readers == ["bot-7000000001", "bot-7000000002"]
    assert got == [data[5:], data[5:]]
    assert admins == [
        BotAdmin("@CourierBot", True),
        BotAdmin("@Stream7000000002Bot", True),
        BotAdmin("@Stream7000000004Bot", False, "CHANNEL_INVALID"),
    ]


def test_a_flood_wait_asking_whether_a_bot_is_an_admin_is_raised_not_taken_for_a_no(telegram, tmp_path):
    telegram.bot_add(READER, admin_of=[STORAGE])
    pool = pool_of(telegram, [READER], tmp_path)

    async def scenario():
        telegram.fail_next("FLOOD_WAIT_5", methods=["channels.GetParticipant"])
        try:
            with pytest.raises(errors.FloodWait):
                await pool.start(storage_chat_id=STORAGE)
        finally:
            await pool.stop()

    run(scenario)


def test_a_pool_where_no_bot_is_an_admin_does_not_start(telegram, tmp_path):
    telegram.bot_add(OUTSIDER)
    pool = pool_of(telegram, [OUTSIDER], tmp_path)

    async def scenario():
        try:
            with pytest.raises(RuntimeError, match="no stream bot is an admin"):
                await pool.start(storage_chat_id=STORAGE)
        finally:
            await pool.stop()

    run(scenario)


def test_streams_go_to_the_least_loaded_bot_and_a_bot_in_a_flood_wait_is_skipped_until_it_ends(
    telegram, tmp_path, rate_clock, monkeypatch
):
    telegram.bot_add(READER, admin_of=[STORAGE])
    telegram.bot_add(SECOND, admin_of=[STORAGE])
    telegram.enforce_rates = True
    telegram.rates_set(file_read_rate=4)
    message_id, data = uploaded(telegram, 5 * MIB)
    pool = pool_of(telegram, [telegram.bot.token, READER, SECOND], tmp_path, in_flight=1, max_flood_wait=0)

    async def scenario():
        await pool.start(storage_chat_id=STORAGE)
        main, reader, second = pool.downloaders
        try:
            streams = []
            for _ in range(3):  # one stream each: the least loaded gets the next
                chosen = pool.choose()
                streams.append((chosen, chosen.read(STORAGE, message_id, 0, len(data))))
            spread = sorted(d.name for d, _ in streams)
            for _, stream in streams:
                await stream.aclose()
            # the main bot spends its own budget of file reads: Telegram answers a FloodWait
            with pytest.raises(StreamBroken, match="FloodWait"):
                await read(main, message_id, 0, len(data))
            waits_until = main.flood_until
            skipped = pool.choose()
            whole = await read(skipped, message_id, 0, 3 * MIB)  # the other bots' budgets are their own
            monkeypatch.setattr(downloads.time, "monotonic", lambda: waits_until)  # its wait is over
            back = pool.choose()
            return spread, skipped in (reader, second), whole, back is main
        finally:
            await pool.stop()

    spread, skipped, whole, back = run(scenario)
    assert spread == ["bot-7000000001", "bot-7000000002", "bot-7000000003"]
    assert skipped and whole == data[: 3 * MIB] and back


def test_bots_admin_says_for_each_token_whether_it_can_read_the_channel(telegram):
    telegram.bot_add(READER, admin_of=[STORAGE])
    telegram.bot_add(OUTSIDER)

    found = bots_admin([READER, OUTSIDER, "7000000009:unknown"], STORAGE, api_id=1, api_hash="0" * 32, offline=telegram)

    assert found == [
        BotAdmin("@Stream7000000002Bot", True),
        BotAdmin("@Stream7000000004Bot", False, "CHANNEL_INVALID"),
        BotAdmin("bot 7000000009", False, "AUTH_KEY_UNREGISTERED", signed_in=False),
    ]
