"""The worker's sender: one per process, lazily; a session slot no other live process holds."""

import fcntl

import pytest

from botapp.telegram.limiter import RedisLimiter
from botapp.telegram.pyrogram_gateway import PyrogramGateway
from scheduler import sender
from tests.factories import telegram_on_socket


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path, settings):
    settings.TELEGRAM_SESSION_DIR = tmp_path
    monkeypatch.setattr(sender, "_gateway", None)
    monkeypatch.setattr(sender, "_slot_file", None)
    yield
    if sender._slot_file is not None:
        sender._slot_file.close()


@pytest.fixture
def offline_telegram(telegram, settings):
    """The in-memory Telegram as offline workers reach it: `manage.py telegram_server`'s socket."""
    with telegram_on_socket(telegram) as path:
        settings.TELEGRAM_OFFLINE = True
        settings.TELEGRAM_OFFLINE_SOCKET = path
        yield telegram
        if sender._gateway is not None:
            sender._gateway.stop()  # the worker's client goes before its Telegram


def test_offline_workers_use_the_in_memory_telegram_behind_the_limiter(offline_telegram):
    gateway = sender.worker_gateway()
    assert isinstance(gateway, PyrogramGateway) and isinstance(gateway.limiter, RedisLimiter)  # the shared limiter
    assert gateway.bot_username == "CourierBot"  # the in-memory Telegram's bot answered
    assert offline_telegram.endpoints  # connected to it
    assert sender.worker_gateway() is gateway  # once per process


def test_session_slots_are_never_shared(tmp_path):
    held = open(tmp_path / "worker-1.lock", "w")
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another live process holds slot 1
    try:
        assert sender._session_slot() == "worker-2"
    finally:
        held.close()
