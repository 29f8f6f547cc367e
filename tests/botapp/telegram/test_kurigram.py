"""kurigram's packet crypto on the loop (botapp.telegram.kurigram), and the session's seen-message
ids answered by bisection (kurigram.session_tune)."""

import asyncio
import bisect
import io
import os
import threading

import pytest
import tgcrypto
from pyrogram.crypto import aes

from botapp.telegram.kurigram import SMALL_PACKET, Abridged, LoopCrypto, MessageIds


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


@pytest.mark.parametrize("size", [16, 48, 1024, 64 * 1024 + 16, 1 << 20])
def test_kurigrams_cipher_is_cryptg_giving_tgcryptos_bytes(size):
    data, key, iv = os.urandom(size), os.urandom(32), os.urandom(32)
    assert (aes.ige256_encrypt.__name__, aes.ige256_decrypt.__name__) == ("encrypt_ige", "decrypt_ige")  # cryptg's
    assert aes.ige256_encrypt(data, key, iv) == tgcrypto.ige256_encrypt(data, key, iv)
    assert aes.ige256_decrypt(data, key, iv) == tgcrypto.ige256_decrypt(data, key, iv)
    view = memoryview(io.BytesIO(b"head" + data).getbuffer())[4:]  # what unpack_lean hands it
    assert aes.ige256_decrypt(view, bytearray(key), iv) == tgcrypto.ige256_decrypt(data, key, iv)


def test_a_length_the_cipher_cannot_take_is_a_value_error_not_a_panic():
    for cipher in (aes.ige256_encrypt, aes.ige256_decrypt):
        with pytest.raises(ValueError):
            cipher(b"x" * 40, os.urandom(32), os.urandom(32))
    with pytest.raises(ValueError):
        aes.ige256_decrypt(b"x" * 32, os.urandom(16), os.urandom(32))


def test_the_production_transport_uses_it():
    transport = Abridged(ipv6=False, proxy=None)
    assert isinstance(transport.crypto_executor, LoopCrypto)
    transport.crypto_executor.shutdown()


def test_the_sessions_seen_message_ids_answer_in_by_bisection():
    ids = MessageIds()
    for msg_id in (40, 10, 30, 20):
        bisect.insort(ids, msg_id)
    assert list(ids) == [10, 20, 30, 40]
    assert all(i in ids for i in (10, 20, 30, 40))
    assert not any(i in ids for i in (5, 25, 50))
    del ids[:2]  # as kurigram trims it
    assert 10 not in ids and 30 in ids


def test_a_started_clients_session_has_them(gateway):
    assert type(gateway.client.session.stored_msg_ids) is MessageIds


def test_the_installed_kurigram_is_the_one_the_adapter_was_checked_against():
    """An upgrade of kurigram must re-read what botapp/telegram/kurigram.py mirrors, then move
    KURIGRAM_CHECKED: this fails on any other version and says what to re-check."""
    from botapp.telegram.kurigram import KURIGRAM_CHECKED, RECHECK, kurigram_version

    installed = kurigram_version()
    assert installed == KURIGRAM_CHECKED, (
        f"kurigram {installed} is installed; botapp/telegram/kurigram.py was checked against {KURIGRAM_CHECKED}. "
        "Re-read, then set KURIGRAM_CHECKED:\n  " + "\n  ".join(RECHECK)
    )


# kurigram's private parts, as they would be spelled by code using them (attribute names, and the
# modules that hold only internals). Only botapp/telegram/kurigram.py may use them.
PRIVATE = (
    ".msg_factory",
    ".results[",
    "session.salt",
    ".session_id",
    ".auth_key",
    "connection.send(",  # kurigram's transport (a Redis connection's send_command is not)
    "mtproto.",
    "MsgContainer",
    "stored_msg_ids",
    "crypto_executor",
    "._parse(",
    "_set_server_time",
    "client.loop =",
    "is_started",
    "pyrogram.session.session",
    "pyrogram.crypto",
    "pyrogram.raw.core import Message",
)


def private_uses(source: str, name: str) -> list[str]:
    return [
        f"{name}:{n}: {line.strip()}"
        for n, line in enumerate(source.splitlines(), start=1)
        if not line.lstrip().startswith("#") and any(p in line for p in PRIVATE)
    ]


def test_the_private_names_check_sees_them():
    source = (
        "x = session.msg_factory\n# session.salt in a comment\ny = client.session.stored_msg_ids\n"
        "await session.connection.send(payload)\nredis_connection.send_command('PING')\n"
    )
    assert [hit.split(": ")[0] for hit in private_uses(source, "f.py")] == ["f.py:1", "f.py:3", "f.py:4"]


def test_no_module_but_the_adapter_uses_kurigrams_private_parts():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = []
    for package in ("botapp", "scheduler", "api", "config"):
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "botapp" / "telegram" / "kurigram.py":
                continue
            found += private_uses(path.read_text(), str(path.relative_to(root)))
    assert found == [], "kurigram's private parts outside botapp/telegram/kurigram.py:\n" + "\n".join(found)


def test_the_harness_reaches_kurigrams_internals_only_through_the_adapter():
    """offline/ (the harness around the product's clients) takes nothing of kurigram's internals
    but through botapp/telegram/kurigram.py, so the version pin covers it. The in-memory Telegram
    is a package of its own on kurigram's public modules (MTProto framing and crypto included):
    tests/inmemory_telegram/test_package.py."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    internals = ("pyrogram.crypto", "pyrogram.session", "import Message", "MsgContainer,", "import MsgContainer")
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted((root / "offline").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if line.lstrip().startswith(("from ", "import ")) and "botapp.telegram.kurigram" not in line
        and any(i in line for i in internals)
    ]  # fmt: skip
    assert found == [], "\n".join(found)
