"""The worker's sender: one per process, lazily; a session slot no other live process holds."""

import fcntl

import pytest

from botapp.telegram.fake import FakeTelegram
from botapp.telegram.limited import LimitedGateway
from scheduler import sender


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path, settings):
    settings.TELEGRAM_SESSION_DIR = tmp_path
    monkeypatch.setattr(sender, "_gateway", None)
    monkeypatch.setattr(sender, "_slot_file", None)


def test_offline_workers_use_the_in_memory_telegram_behind_the_limiter(settings):
    settings.TELEGRAM_OFFLINE = True
    gateway = sender.worker_gateway()
    assert isinstance(gateway, LimitedGateway) and isinstance(gateway.inner, FakeTelegram)
    assert sender.worker_gateway() is gateway  # once per process


def test_session_slots_are_never_shared(tmp_path):
    held = open(tmp_path / "worker-1.lock", "w")
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another live process holds slot 1
    try:
        assert sender._session_slot() == "worker-2"
    finally:
        held.close()
