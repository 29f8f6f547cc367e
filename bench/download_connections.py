"""Streams of one bot read from a far data centre over one or more media connections.

The reader (botapp/telegram/downloads.py) against the in-memory Telegram in this process: the
file kept on DC 4, every answer there `--latency` seconds late, each connection carrying at most
`--cap-mib` MiB/s (answers one after another), `in_flight` 1 MiB calls per stream. It prints MiB/s
(min / median / max of `--runs`) for each number of connections and of streams, so one can see
where a second connection helps (a capped connection) and where it costs (it should not).

    python bench/download_connections.py --runs 3
"""

import argparse
import asyncio
import time

import _setup

from botapp import clock
from inmemory_telegram.server import TelegramServer
from inmemory_telegram.state import Media
from offline.telegram.clients import offline_downloader

STORAGE = -1001000000001
MIB = 1024 * 1024


async def rate(telegram, message_id: int, size: int, *, connections: int, streams: int, in_flight: int) -> float:
    """MiB/s of `streams` concurrent whole-file reads by one bot."""
    downloader = offline_downloader(telegram, in_flight=in_flight, connections=connections)
    await downloader.start()
    try:
        await downloader.info(STORAGE, message_id)  # the location cached, as for a stream after its HEAD

        async def one() -> int:
            return sum([len(piece) async for piece in downloader.read(STORAGE, message_id, 0, size)])

        started = time.perf_counter()
        total = sum(await asyncio.gather(*(one() for _ in range(streams))))
        return total / (time.perf_counter() - started) / MIB
    finally:
        await downloader.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--cap-mib", type=float, nargs="*", default=[10.0, 0.0], help="0: no cap")
    parser.add_argument("--streams", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--connections", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--in-flight", type=int, default=4)
    args = parser.parse_args()
    size = args.size_mib * MIB
    for cap in args.cap_mib:
        telegram = TelegramServer(now=clock.now, enforce_rates=False)
        telegram.create_channel(STORAGE, title="Storage")
        message_id = telegram.post(STORAGE, "", media=Media("video", "v.mp4"), file_size=size, dc_id=4)
        telegram.dc_set(4, latency=args.latency, bandwidth=cap * MIB or None)
        for streams in args.streams:
            for connections in args.connections:
                rates = [
                    asyncio.run(
                        rate(telegram, message_id, size, connections=connections, streams=streams, in_flight=args.in_flight)
                    )
                    for _ in range(args.runs)
                ]
                print(
                    f"cap {cap or 'none'} MiB/s per connection, {streams} stream(s), {connections} connection(s): "
                    f"{_setup.spread(rates)} MiB/s (min / median / max)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
