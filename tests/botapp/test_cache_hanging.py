"""A Redis that accepts connections and never answers (a hung server, a network that drops
packets) costs runbot one timeout, not one per cache call: after the first the cache is left
alone for a while (`botapp.cache`), and the hot path reads the database instead."""

import socket
import threading

import pytest
from django.core.cache import caches

from botapp import cache as hot_cache
from botapp import clock
from botapp.models import DailyStat, StoredFile
from botapp.services.files import file_store
from botapp.services.stats import counters_flush
from botapp.telegram.gateway import TgUser
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db


class HungRedis:
    """A TCP server that accepts every connection, reads what it is sent and never answers;
    `connections` counts the calls that reached it (redis-py drops a connection that timed out)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.open:
            conn.close()


@pytest.fixture
def hung_cache(settings):
    hung = HungRedis()
    settings.CACHES = {
        "default": {
            "BACKEND": "botapp.cache.SharedClientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{hung.port}/0",
            "OPTIONS": {"socket_timeout": 0.2, "socket_connect_timeout": 0.2},
            "KEY_PREFIX": "courier-hung",
        }
    }
    hot_cache.HotValue.forget_local_all()
    yield hung
    hung.close()
    hot_cache.HotValue.forget_local_all()
    caches["default"].close()


@pytest.fixture
def link(telegram, db):
    return file_store(source_chat_id=STORAGE, message_ids=[telegram.post(STORAGE, "Report")])


def start(chat, n, link):
    events = chat(TgUser(id=7001 + n, first_name=f"U{n}"), f"/start {link.share_id}")
    assert [e.action for e in events][:1] == ["copy"], events  # the user got the file


def test_a_hung_cache_costs_runbot_one_timeout_not_one_per_call(chat, conf, link, hung_cache):
    for n in range(5):
        start(chat, n, link)
    # Without the pause: 21 calls, each its timeout (1.5 s in production: 6 s per /start).
    assert hung_cache.connections == 1
    # The deliveries were counted all the same: in the database, whatever the cache does.
    counters_flush()
    assert DailyStat.objects.get(date=clock.today()).deliveries == 5
    assert StoredFile.objects.get(pk=link.pk).delivery_count == 5


def test_the_cache_is_asked_again_after_the_pause(chat, conf, link, hung_cache, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(hot_cache, "_monotonic", lambda: now[0])
    start(chat, 0, link)
    start(chat, 1, link)
    assert hung_cache.connections == 1
    now[0] += hot_cache.CACHE_RETRY_AFTER + 0.1
    hot_cache.HotValue.forget_local_all()  # the second this process keeps hot values is over too
    start(chat, 2, link)
    assert hung_cache.connections == 2  # asked once more, failed once more: paused again


def test_when_the_pause_ends_one_thread_asks_and_the_others_go_on_without_the_cache(monkeypatch):
    now = [5000.0]
    monkeypatch.setattr(hot_cache, "_monotonic", lambda: now[0])
    hot_cache.cache_failed(OSError("hung"), "a test")
    assert not hot_cache.cache_usable()
    now[0] += hot_cache.CACHE_RETRY_AFTER + 0.1
    barrier = threading.Barrier(8)
    answers = []

    def ask():
        barrier.wait()
        answers.append(hot_cache.cache_usable())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [False] * 7 + [True]  # one probe at a time
    hot_cache.cache_answered()  # the probe got its answer
    assert hot_cache.cache_usable()
