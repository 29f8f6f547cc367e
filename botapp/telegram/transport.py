"""Where kurigram encrypts and decrypts packets.

kurigram hands each packet's MTProto encryption (serialising the request, then AES-IGE) and
decryption, and the obfuscation layer's AES-CTR where the transport has one, to
`connection.protocol.crypto_executor` through `loop.run_in_executor`: a hop to a thread and back
for every request and every answer. For what a bot sends and gets (a message, an answer: a few KB)
the hops cost far more than the cipher (tgcrypto, in C: microseconds): in a profile of runbot they
were most of the event loop's own work. `LoopCrypto` runs small packets at once, on the loop that
asked, and hands only large ones (a container of a batch's answers, file uploads) to a thread, as
kurigram does for all of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io

from pyrogram.connection.transport import TCPAbridged

# Bytes above which a packet is done on the crypto thread. One request or one answer (a message, an
# update, a copy of a few files) is a few KB: at once on the loop. A container of a batch's answers
# is tens of KB (100 "deleted" notices: 38 KB, 6 ms to read), and an upload part 512 KB: there the
# loop goes on sending while the thread reads (the deletion sweep, side by side: 4,200-4,400 ->
# 4,400-4,800 rows/s at 8 KB against 64 KB).
SMALL_PACKET = 8 * 1024


def _size(payload) -> int:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return len(payload)
    if isinstance(payload, io.BytesIO):
        return payload.getbuffer().nbytes
    return getattr(payload, "length", 0)  # an outgoing pyrogram.raw.core.Message: its body's length


class LoopCrypto(concurrent.futures.Executor):
    """An executor for kurigram's crypto: a small packet is done in the caller, and `submit`
    returns the done asyncio future `loop.run_in_executor` passes straight through (awaiting it
    does not yield to the loop); a large one goes to a thread of its own."""

    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="CryptoWorker")

    def submit(self, fn, /, *args, **kwargs):
        if args and _size(args[0]) > SMALL_PACKET:
            return self._pool.submit(fn, *args, **kwargs)
        try:
            future = asyncio.get_running_loop().create_future()
        except RuntimeError:  # not called from a loop: a plain future does
            future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the awaiting side gets it, as from a thread
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


class Abridged(TCPAbridged):
    """kurigram's default transport (TCP abridged), its crypto run by `LoopCrypto`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.crypto_executor.shutdown(wait=False)  # the pool TCP made (no thread started yet)
        self.crypto_executor = LoopCrypto()
