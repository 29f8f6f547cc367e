"""kurigram's packet crypto on the loop (botapp.telegram.transport), and the session's seen-message
ids answered by bisection (pyrogram_gateway.session_tune)."""

import asyncio
import bisect
import io
import threading

import pytest

from botapp.telegram.pyrogram_gateway import _MessageIds
from botapp.telegram.transport import SMALL_PACKET, Abridged, LoopCrypto


def where(payload):
    return threading.current_thread().name


def test_a_small_packet_is_ciphered_at_once_on_the_loop_a_large_one_on_the_crypto_thread():
    crypto = LoopCrypto()

    async def run():
        loop = asyncio.get_running_loop()
        small = loop.run_in_executor(crypto, where, b"x" * 100)
        assert small.done()  # awaiting it does not even yield to the loop
        return await small, await loop.run_in_executor(crypto, where, io.BytesIO(b"x" * (SMALL_PACKET + 1)))

    try:
        small, large = asyncio.run(run())
    finally:
        crypto.shutdown()
    assert small == threading.current_thread().name
    assert large.startswith("CryptoWorker")


def test_an_error_in_the_cipher_reaches_the_awaiting_side():
    crypto = LoopCrypto()

    def broken(payload):
        raise ValueError("bad packet")

    async def run():
        await asyncio.get_running_loop().run_in_executor(crypto, broken, b"x")

    with pytest.raises(ValueError, match="bad packet"):
        asyncio.run(run())
    crypto.shutdown()


def test_the_production_transport_uses_it():
    transport = Abridged(ipv6=False, proxy=None)
    assert isinstance(transport.crypto_executor, LoopCrypto)
    transport.crypto_executor.shutdown()


def test_the_sessions_seen_message_ids_answer_in_by_bisection():
    ids = _MessageIds()
    for msg_id in (40, 10, 30, 20):
        bisect.insort(ids, msg_id)
    assert list(ids) == [10, 20, 30, 40]
    assert all(i in ids for i in (10, 20, 30, 40))
    assert not any(i in ids for i in (5, 25, 50))
    del ids[:2]  # as kurigram trims it
    assert 10 not in ids and 30 in ids


def test_a_started_clients_session_has_them(gateway):
    assert type(gateway.client.session.stored_msg_ids) is _MessageIds
