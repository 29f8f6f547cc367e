"""The streaming process's reader (botapp/telegram/downloads.py) against the in-memory Telegram:
exactly the bytes asked for, whatever the range and whatever Telegram does meanwhile."""

import asyncio
import hashlib
import random

import pytest

from botapp.telegram import downloads as downloads_module
from botapp.telegram.download_pool import DownloaderPool
from botapp.telegram.downloads import HEAD_CONNECTIONS, HEAD_PART, IN_FLIGHT, Downloader, FileGone, ReadAhead, StreamBroken, parts
from inmemory_telegram import content
from inmemory_telegram.faults import LOSE_ANSWER
from inmemory_telegram.methods.upload import download_part_check
from inmemory_telegram.state import Media
from offline.telegram.clients import offline_downloader
from tests.conftest import STORAGE

KIB, MIB = 1024, 1024 * 1024


def run(telegram, scenario, *, bots=1, **options):
    """`scenario(*downloaders)` with started Downloaders on the in-memory Telegram, on a loop of its own."""

    async def main():
        downloaders = [offline_downloader(telegram, name=f"stream{n}", **options) for n in range(bots)]
        for downloader in downloaders:
            await downloader.start()
        try:
            return await scenario(*downloaders)
        finally:
            for downloader in downloaders:
                await downloader.stop()

    return asyncio.run(asyncio.wait_for(main(), timeout=120))  # bounds a failure only


async def read(downloader: Downloader, message_id: int, start: int, end: int) -> bytes:
    return b"".join([piece async for piece in downloader.read(STORAGE, message_id, start, end)])


def uploaded(telegram, size: int, *, seed: int = 1) -> tuple[int, bytes]:
    data = random.Random(seed).randbytes(size)
    return telegram.post(STORAGE, "", media=Media("document", "f.bin"), content=data), data


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_every_part_asked_keeps_telegrams_rules_and_the_parts_cover_the_range_once():
    rng = random.Random(44)
    ranges = [(0, 1), (0, MIB), (MIB - 1, MIB + 1), (4095, 4097), (3 * MIB, 3 * MIB + 5)]
    ranges += [tuple(sorted(rng.randrange(0, 20 * MIB) for _ in range(2))) for _ in range(2000)]
    for start, end in ranges:
        plan = list(parts(start, end))
        for part in plan:
            download_part_check(part.offset, part.limit, precise=part.precise)  # raises RpcFault on a bad part
            if not part.precise:
                assert part.offset % part.limit == 0  # the strictest reading of the rules
        if start < end:
            assert plan[0].offset <= start < plan[0].offset + plan[0].limit
            assert start - plan[0].offset < 4096 and plan[0].limit <= HEAD_PART  # a seek's first bytes come soon
            assert all(a.offset + a.limit == b.offset for a, b in zip(plan, plan[1:], strict=False))
            assert plan[-1].offset + plan[-1].limit >= end > plan[-1].offset
            assert sum(p.offset < (start // MIB + 1) * MIB for p in plan) <= 2  # one call more than whole chunks
            assert all(p.limit == MIB and not p.precise for p in plan[2:-1])
        else:
            assert plan == []


@pytest.mark.parametrize("size", [0, 1, 4095, MIB - 1, MIB, MIB + 1, 10 * MIB])
def test_a_whole_file_comes_back_byte_for_byte(telegram, size):
    message_id, data = uploaded(telegram, size)

    async def scenario(downloader):
        info = await downloader.info(STORAGE, message_id)
        return info, await read(downloader, message_id, 0, info.size)

    info, got = run(telegram, scenario)
    assert (info.size, info.file_name, info.dc_id) == (size, "f.bin", 2)
    assert sha(got) == sha(data)


@pytest.mark.slow
def test_a_generated_2_gib_file_reads_right_in_ranges_at_its_start_middle_and_end(telegram):
    size = 2 * 1024 * MIB
    message_id = telegram.post(STORAGE, "", media=Media("video", "big.mp4"), file_size=size)
    file_id = telegram.message(STORAGE, message_id).file.id
    ranges = [(0, 3 * MIB + 17), (size // 2 - 5, size // 2 + 2 * MIB), (size - 2 * MIB - 3, size), (size - 1, size)]

    async def scenario(downloader):
        return [await read(downloader, message_id, start, end) for start, end in ranges]

    for (start, end), got in zip(ranges, run(telegram, scenario), strict=True):
        assert sha(got) == sha(content.generated(file_id, start, end - start)), (start, end)


def test_a_thousand_random_ranges_are_exact_across_boundaries_unaligned_and_to_the_last_byte(telegram):
    size = 5 * MIB + 12_345
    message_id = telegram.post(STORAGE, "", media=Media("document", "r.bin"), file_size=size)
    whole = telegram.message(STORAGE, message_id).file.read(0, size)
    rng = random.Random(20260101)
    ranges = [(size - 1, size), (0, size), (MIB - 1, MIB + 1), (2 * MIB, 3 * MIB), (4096, 4096)]
    while len(ranges) < 1000:
        start = rng.randrange(0, size)
        span = rng.choice([1, rng.randrange(1, 8 * KIB), rng.randrange(1, 256 * KIB), rng.randrange(1, 3 * MIB)])
        ranges.append((start, min(size, start + span)))

    async def scenario(downloader):
        wrong = []
        for start, end in ranges:
            if await read(downloader, message_id, start, end) != whole[start:end]:
                wrong.append((start, end))
        return wrong

    assert run(telegram, scenario) == []


def test_a_reference_that_expires_mid_stream_is_refreshed_and_the_stream_goes_on_from_the_exact_byte(telegram):
    message_id, data = uploaded(telegram, 6 * MIB + 7)

    async def scenario(downloader):
        pieces = []
        stream = downloader.read(STORAGE, message_id, 100, len(data))
        async for piece in stream:
            pieces.append(piece)
            if len(pieces) == 1:
                reads_before = telegram.count("channels.GetMessages")
                telegram.file_references_expire()
        return b"".join(pieces), telegram.count("channels.GetMessages") - reads_before

    got, rereads = run(telegram, scenario, in_flight=2)
    assert got == data[100:]
    assert rereads == 1  # once for every part that met the expired reference


def test_a_flood_wait_mid_stream_is_waited_out_and_the_stream_goes_on_from_the_exact_byte(telegram):
    message_id, data = uploaded(telegram, 5 * MIB)

    async def scenario(downloader):
        pieces = []
        async for piece in downloader.read(STORAGE, message_id, 3, len(data)):
            pieces.append(piece)
            if len(pieces) == 1:
                telegram.fail_next("FLOOD_WAIT_1", methods=["upload.GetFile"])
                waited = telegram.flood_waits
        return b"".join(pieces), telegram.flood_waits - waited

    got, floods = run(telegram, scenario, in_flight=1)
    assert got == data[3:] and floods == 1


def test_a_flood_wait_over_the_cap_ends_the_stream_short_with_right_bytes_before(telegram):
    message_id, data = uploaded(telegram, 4 * MIB)

    async def scenario(downloader):
        pieces = []
        with pytest.raises(StreamBroken, match="FloodWait"):
            async for piece in downloader.read(STORAGE, message_id, 0, len(data)):
                pieces.append(piece)
                telegram.fail_next("FLOOD_WAIT_30", methods=["upload.GetFile"], times=10)
        return b"".join(pieces), downloader.in_flood

    got, in_flood = run(telegram, scenario, in_flight=1, max_flood_wait=10)
    assert 0 < len(got) < len(data) and got == data[: len(got)]
    assert in_flood  # the pool skips this bot until the wait is over


def test_a_dropped_connection_or_a_lost_answer_mid_stream_is_asked_again_from_the_exact_byte(telegram):
    message_id, data = uploaded(telegram, 6 * MIB)

    async def scenario(downloader):
        pieces = []
        async for piece in downloader.read(STORAGE, message_id, 4097, len(data) - 1):
            pieces.append(piece)
            if len(pieces) == 1:
                telegram.fail_next(LOSE_ANSWER, methods=["upload.GetFile"])
            if len(pieces) == 3:
                assert telegram.connections_drop() >= 2  # the bot's session and its media session
        return b"".join(pieces)

    assert run(telegram, scenario, in_flight=2, call_timeout=1.0) == data[4097:-1]


def test_a_file_moved_to_another_dc_is_read_there_with_one_exported_authorization(telegram):
    message_id, data = uploaded(telegram, 3 * MIB)

    async def scenario(downloader):
        await downloader.info(STORAGE, message_id)  # the location is cached: DC 2
        telegram.message(STORAGE, message_id).file.dc_id = 4
        first = await read(downloader, message_id, 0, len(data))
        second = await read(downloader, message_id, MIB, 2 * MIB)
        return first, second

    first, second = run(telegram, scenario)
    assert first == data and second == data[MIB : 2 * MIB]
    assert telegram.count("auth.ExportAuthorization") == 1 and telegram.count("auth.ImportAuthorization") == 1


def test_a_deleted_message_is_gone_before_the_first_byte_and_breaks_a_stream_after_it(telegram):
    gone_id, _ = uploaded(telegram, MIB)
    telegram.delete_post(STORAGE, gone_id)
    text_id = telegram.post(STORAGE, "no file here")
    message_id, data = uploaded(telegram, 4 * MIB)

    async def scenario(downloader):
        outcomes = []
        for missing in (gone_id, text_id, 999):
            with pytest.raises(FileGone):
                await downloader.info(STORAGE, missing)
            with pytest.raises(FileGone):
                await read(downloader, missing, 0, 1)
        pieces = []
        with pytest.raises(StreamBroken):
            async for piece in downloader.read(STORAGE, message_id, 0, len(data)):
                pieces.append(piece)
                telegram.delete_post(STORAGE, message_id)
        outcomes.append(b"".join(pieces))
        return outcomes

    (got,) = run(telegram, scenario, in_flight=1)
    assert 0 < len(got) < len(data) and got == data[: len(got)]


def test_the_reader_asks_ahead_only_as_the_consumer_takes(telegram):
    message_id, data = uploaded(telegram, 12 * MIB)

    async def scenario(downloader):
        before = telegram.count("upload.GetFile")
        asked = []
        taken = 0
        async for _ in downloader.read(STORAGE, message_id, 0, len(data)):
            taken += 1
            await asyncio.sleep(0)  # let whatever was ready run
            asked.append((taken, telegram.count("upload.GetFile") - before))
        return asked

    assert all(calls <= taken + 3 for taken, calls in run(telegram, scenario, in_flight=3))


def test_cancelling_a_read_cancels_its_calls_and_leaves_no_task_or_answer_behind(telegram):
    message_id, data = uploaded(telegram, 8 * MIB)

    async def scenario(downloader):
        first = asyncio.Event()

        async def consume():
            async for _ in downloader.read(STORAGE, message_id, 0, len(data)):
                telegram.fail_next(LOSE_ANSWER, methods=["upload.GetFile"], times=100)  # the rest stay in flight
                first.set()

        consumer = asyncio.create_task(consume())
        await first.wait()
        assert downloader.load == 1
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            # at once: the calls in flight (which would wait call_timeout for answers) are cancelled
            await asyncio.wait_for(consumer, timeout=5)
        ours = [t for t in asyncio.all_tasks() if "_part" in repr(t.get_coro())]
        results = sum(len(session.results) for session in downloader.media_sessions())
        return ours, results, downloader.load

    assert run(telegram, scenario, call_timeout=60) == ([], 0, 0)


def test_the_pool_picks_the_least_loaded_bot_and_skips_one_in_a_flood_wait(telegram):
    message_id, data = uploaded(telegram, 2 * MIB)

    async def scenario(one, two):
        pool = DownloaderPool([one, two])
        picks = [pool.choose()]
        stream = one.read(STORAGE, message_id, 0, len(data))
        picks.append(pool.choose())  # one has a stream open
        await stream.aclose()
        telegram.fail_next("FLOOD_WAIT_5", methods=["upload.GetFile"])
        with pytest.raises(StreamBroken):
            await read(one, message_id, 0, 1)  # over this test's cap: one is in a FloodWait now
        second = two.read(STORAGE, message_id, 0, len(data))
        picks.append(pool.choose())  # two is busier, but one must wait
        await second.aclose()
        dropped = two.read(STORAGE, message_id, 0, len(data))
        assert two.load == 1
        del dropped  # never read nor closed: no longer counted
        return [p is one for p in picks], one.load, two.load

    assert run(telegram, scenario, bots=2, max_flood_wait=1) == ([True, False, False], 0, 0)


def test_the_bytes_served_are_the_uploaded_bytes_also_through_telegram_as_its_own_process(tmp_path):
    from offline.telegram.remote import RemoteTelegram, server_process

    path = tmp_path / "telegram.sock"
    with server_process(path):
        remote = RemoteTelegram(path)
        remote.create_channel(STORAGE)
        message_id = remote.post(STORAGE, "", media=Media("video", "v.mp4"), file_size=3 * MIB + 5, dc_id=4)
        info = remote.file_info(STORAGE, message_id)

        async def main():
            downloader = offline_downloader(str(path))
            await downloader.start()
            try:
                return await read(downloader, message_id, 5, info["size"])
            finally:
                await downloader.stop()

        got = asyncio.run(asyncio.wait_for(main(), timeout=60))
        remote.close()
    assert got == content.generated(info["id"], 5, info["size"] - 5)


def test_an_unexpected_exception_is_raised_as_it_is(telegram, monkeypatch):
    message_id, _ = uploaded(telegram, 10)

    async def broken(*args, **kwargs):
        raise KeyError("a bug of ours")

    async def scenario(downloader):
        await downloader.info(STORAGE, message_id)
        monkeypatch.setattr("botapp.telegram.downloads.media_invoke", broken)
        with pytest.raises(KeyError):
            await read(downloader, message_id, 0, 10)

    run(telegram, scenario)


def test_a_range_outside_the_file_is_refused(telegram):
    message_id, _ = uploaded(telegram, 10)

    async def scenario(downloader):
        with pytest.raises(ValueError):
            await read(downloader, message_id, 5, 11)

    run(telegram, scenario)


def test_a_connection_dropped_with_calls_in_flight_resumes_at_the_exact_byte_without_waiting_for_answers(telegram):
    message_id, data = uploaded(telegram, 6 * MIB)

    async def scenario(downloader):
        pieces = []
        async for piece in downloader.read(STORAGE, message_id, 12_345, len(data)):
            pieces.append(piece)
            if len(pieces) == 1:  # the next calls go out and their answers never come
                telegram.fail_next(LOSE_ANSWER, methods=["upload.GetFile"], times=1000)
                while sum(len(s.results) for s in downloader.media_sessions()) < downloader.in_flight - 1:
                    await asyncio.sleep(0)  # until the parts asked ahead are all in flight
                with telegram.lock:
                    telegram.faults.clear()
                telegram.connections_drop(dc_id=2)  # the waits end on the drop, not on call_timeout
        return b"".join(pieces)

    got = asyncio.run(asyncio.wait_for(_run_one(telegram, scenario, call_timeout=600), timeout=60))
    assert got == data[12_345:]


async def _run_one(telegram, scenario, **options):
    downloader = offline_downloader(telegram, **options)
    await downloader.start()
    try:
        return await scenario(downloader)
    finally:
        await downloader.stop()


def test_calls_waiting_for_answers_set_no_timer_but_their_deadline(telegram):
    """100 idle streams of 4 calls must not wake the loop every fraction of a second each: while
    their answers are awaited the loop holds no timer due before the calls' own deadline (kurigram's
    own ping worker aside, which is per session)."""
    message_id, data = uploaded(telegram, 8 * MIB)
    streams = 100

    async def scenario(downloader):
        await downloader.info(STORAGE, message_id)
        telegram.fail_next(LOSE_ANSWER, methods=["upload.GetFile"], times=10_000)
        reads = [downloader.read(STORAGE, message_id, 0, len(data)) for _ in range(streams)]
        tasks = [asyncio.ensure_future(r.__anext__()) for r in reads]
        while sum(len(s.results) for s in downloader.media_sessions()) < streams * downloader.in_flight:
            await asyncio.sleep(0)  # until every call is in flight
        loop = asyncio.get_running_loop()
        now = loop.time()
        timers = [t.when() - now for t in loop._scheduled if not t.cancelled()]  # noqa: SLF001 - the loop's timers
        soon = [when for when in timers if when < 30]
        deadlines = [when for when in timers if 590 < when <= 600]
        sessions = 1 + len(downloader.media_sessions())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for r in reads:
            await r.aclose()
        return len(soon), len(deadlines), sessions

    budget = ReadAhead(streams * (IN_FLIGHT - 1))  # enough for every stream's calls
    soon, deadlines, sessions = asyncio.run(
        asyncio.wait_for(_run_one(telegram, scenario, call_timeout=600, read_ahead=budget), timeout=60)
    )
    assert deadlines == streams * IN_FLIGHT  # one timer per call: its deadline
    assert soon <= sessions  # kurigram's ping worker of each session; none per call


def test_the_calls_in_flight_spread_over_the_bots_connections_to_the_dc_which_share_one_signed_in_key(telegram):
    message_id, data = uploaded(telegram, 12 * MIB)
    telegram.message(STORAGE, message_id).file.dc_id = 4
    # A far DC: each call is still in flight when the reader asks the next (answered at once, they
    # may all be back by then, and one connection is all the reader needs). The second bulk
    # connection opens in a round trip or two, while the read still has several to go.
    telegram.dc_set(4, latency=0.05)

    async def scenario(downloader):
        seen = set()
        pieces = []
        async for piece in downloader.read(STORAGE, message_id, 0, len(data)):
            pieces.append(piece)
            with telegram.lock:
                far = [e for e in telegram.endpoints if e.dc_id == 4]
            seen |= {e for e in far}
        return b"".join(pieces), len(downloader.media_sessions()), {e.auth_key for e in seen}, len(seen)

    got, sessions, keys, connections = run(telegram, scenario, in_flight=4, connections=2)
    assert got == data
    assert sessions == connections == 2 + HEAD_CONNECTIONS and len(keys) == 1  # the head lane's too
    assert telegram.count("auth.ExportAuthorization") == telegram.count("auth.ImportAuthorization") == 1


def test_streams_read_ahead_only_while_the_processs_budget_lasts_and_give_it_back(telegram):
    """Each stream always has its next part asked; what it asks further ahead takes a share of
    the process's ReadAhead: with 3 parts of budget, 4 streams never have more than 4 + 3 calls in
    flight together, each still gets exactly its bytes, and the budget is whole again after."""
    message_id, data = uploaded(telegram, 6 * MIB + 5)
    budget = ReadAhead(3)
    most = 0

    async def scenario(downloader):
        nonlocal most

        async def one(start):
            nonlocal most
            pieces = []
            async for piece in downloader.read(STORAGE, message_id, start, len(data)):
                most = max(most, sum(len(s.results) for s in downloader.media_sessions()))
                pieces.append(piece)
            return b"".join(pieces)

        return await asyncio.gather(*(one(start) for start in (0, 1, MIB + 7, 4 * MIB)))

    got = asyncio.run(asyncio.wait_for(_run_one(telegram, scenario, read_ahead=budget), timeout=60))
    assert got == [data[0:], data[1:], data[MIB + 7 :], data[4 * MIB :]]
    assert 0 < most <= 4 + 3
    assert budget.left == budget.parts == 3


def test_a_stream_with_no_budget_left_reads_one_part_at_a_time_and_a_closed_one_gives_its_share_back(telegram):
    message_id, data = uploaded(telegram, 5 * MIB)
    budget = ReadAhead(0)

    async def scenario(downloader):
        in_flight = []
        pieces = []
        async for piece in downloader.read(STORAGE, message_id, 0, len(data)):
            in_flight.append(sum(len(s.results) for s in downloader.media_sessions()))
            pieces.append(piece)
        ahead = ReadAhead(2)
        downloader.read_ahead = ahead
        reads = downloader.read(STORAGE, message_id, 0, len(data))
        await reads.__anext__()
        taken = ahead.left
        await reads.aclose()  # the client went away mid-stream
        return b"".join(pieces), in_flight, taken, ahead.left

    got, in_flight, taken, left = asyncio.run(asyncio.wait_for(_run_one(telegram, scenario, read_ahead=budget), timeout=60))
    assert got == data
    assert max(in_flight) <= 1  # only the next part, each asked when the last was handed on
    assert taken == 0 and left == 2  # both taken while the stream was open, both given back by its closing


def test_the_first_part_of_each_read_goes_on_the_head_connection_the_rest_never_do(telegram):
    """A seek's first part must not queue behind 1 MiB answers read ahead, its own or other
    streams': it has a connection of its own, which nothing else uses."""
    message_id, data = uploaded(telegram, 4 * MIB)
    asked: list[tuple[str, int]] = []

    async def scenario(downloader):
        original = downloader._session

        async def session_of(dc_id, lane=downloads_module.BULK):
            session = await original(dc_id, lane)
            asked.append((lane, id(session)))
            return session

        downloader._session = session_of
        got = [await read(downloader, message_id, start, len(data)) for start in (0, MIB + 5, 3 * MIB - 1)]
        head = {s for lane, s in asked if lane == downloads_module.HEAD}
        bulk = {s for lane, s in asked if lane == downloads_module.BULK}
        return got, [lane for lane, _ in asked], head, bulk

    got, lanes, head, bulk = run(telegram, scenario)
    assert got == [data[0:], data[MIB + 5 :], data[3 * MIB - 1 :]]
    assert lanes.count(downloads_module.HEAD) == 3  # one first part per read
    assert len(head) == HEAD_CONNECTIONS and not head & bulk
