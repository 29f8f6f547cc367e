"""The streaming process end to end, under uvicorn against the in-memory Telegram: what a browser
or a downloader gets for GET and HEAD, ranges, If-Range, 416, the 403/404/429 pages, and a client
that goes away."""

import asyncio
import hashlib
import random
import socket
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from prometheus_client import REGISTRY

from botapp.services.premium import premium_grant, premium_revoke
from botapp.services.stream_links import stream_links_revoke
from botapp.services.stream_stats import stream_stats_24h
from botapp.stream.slots import Slots
from botapp.stream.views import COUNT_EVERY, bytes_counted
from tests.botapp.stream_server import CONSOLE_SETTINGS, link, stream_server, video_file
from tests.factories import TelegramUserFactory
from tests.processes import free_port, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024


@pytest.fixture
def server(telegram, settings, conf, plain_http):
    settings.STREAM_PUBLIC_URL = "http://127.0.0.1"
    conf.stream_links = "on"
    conf.save()
    with stream_server(telegram, settings) as running:
        yield running


@pytest.mark.parametrize("size", [0, 1, 4095, MIB - 1, MIB, MIB + 1, 3 * MIB + 12345])
def test_the_whole_file_is_byte_exact(server, telegram, size):
    stored, data = video_file(telegram, size)
    status, headers, body = server.request("GET", f"/f/{link(stored)}")
    assert status == 200
    assert headers["content-length"] == str(size) and headers["accept-ranges"] == "bytes"
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(data(0, size)).hexdigest()


def test_ranges_are_byte_exact_wherever_they_start_and_end(server, telegram):
    size = 3 * MIB + 777
    stored, data = video_file(telegram, size)
    token = link(stored)
    rng = random.Random(44)
    cases = [(0, 0), (size - 1, size - 1), (MIB - 1, MIB), (MIB - 5, 2 * MIB + 5), (4095, 4096), (123, 456789)]
    cases += [tuple(sorted((rng.randrange(size), rng.randrange(size)))) for _ in range(20)]
    for first, last in cases:
        status, headers, body = server.request("GET", f"/f/{token}", {"Range": f"bytes={first}-{last}"})
        assert status == 206, (first, last)
        assert headers["content-range"] == f"bytes {first}-{last}/{size}"
        assert body == data(first, last - first + 1), (first, last)
    status, headers, body = server.request("GET", f"/f/{token}", {"Range": "bytes=-1000"})
    assert (status, body) == (206, data(size - 1000, 1000))


def test_head_says_what_get_would_send_without_a_body(server, telegram):
    stored, _ = video_file(telegram, 5000, name="Café ☕.mp4")
    token = link(stored)
    status, headers, body = server.request("HEAD", f"/f/{token}")
    assert (status, body) == (200, b"")
    assert headers["content-length"] == "5000" and headers["content-type"] == "video/mp4"
    assert headers["etag"].startswith('"') and headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"] == "inline; filename=\"Cafe _.mp4\"; filename*=UTF-8''Caf%C3%A9%20%E2%98%95.mp4"
    status, headers, _ = server.request("HEAD", f"/f/{token}", {"Range": "bytes=100-"})
    assert (status, headers["content-length"], headers["content-range"]) == (206, "4900", "bytes 100-4999/5000")
    status, headers, _ = server.request("HEAD", f"/f/{token}?download=1")
    assert headers["content-disposition"].startswith("attachment; ")


def test_a_range_past_the_end_is_416_naming_the_size(server, telegram):
    stored, _ = video_file(telegram, 5000)
    status, headers, _ = server.request("GET", f"/f/{link(stored)}", {"Range": "bytes=5000-"})
    assert status == 416 and headers["content-range"] == "bytes */5000"


def test_if_range_resumes_only_the_same_file(server, telegram):
    stored, data = video_file(telegram, 9000)
    token = link(stored)
    etag = server.request("HEAD", f"/f/{token}")[1]["etag"]
    status, _, body = server.request("GET", f"/f/{token}", {"Range": "bytes=8000-", "If-Range": etag})
    assert (status, body) == (206, data(8000, 1000))
    status, _, body = server.request("GET", f"/f/{token}", {"Range": "bytes=8000-", "If-Range": '"another"'})
    assert (status, len(body)) == (200, 9000)


def test_active_content_is_only_an_attachment(server, telegram):
    stored, _ = video_file(telegram, 100, name="page.html", kind="document", body=b"<script>alert(1)</script>" + b" " * 75)
    _, headers, _ = server.request("HEAD", f"/f/{link(stored)}")
    assert headers["content-type"] == "text/html" and headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"].startswith("attachment; ")


def test_bad_expired_and_revoked_links_get_a_403_page_saying_what_to_do(server, telegram):
    stored, _ = video_file(telegram, 100)
    token = link(stored)
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    status, headers, body = server.request("GET", f"/f/{tampered}")
    assert status == 403 and b"Open the file link in the bot again" in body
    assert headers["content-security-policy"].startswith("default-src 'self'")
    status, _, body = server.request("GET", f"/watch/{link(stored, hours=-1)}")
    assert status == 403 and b"This link has expired" in body
    stream_links_revoke(stored=stored)
    status, _, body = server.request("GET", f"/f/{token}")
    assert status == 403 and b"no longer works" in body


def test_a_premium_only_link_stops_when_its_users_premium_ends(server, telegram):
    stored, _ = video_file(telegram, 100)
    stored.stream_links = "premium"
    stored.save()
    user = TelegramUserFactory()
    premium_grant(user=user, duration=timedelta(hours=1))
    token = link(stored, hours=6, user_id=user.telegram_id)
    assert server.request("GET", f"/f/{token}")[0] == 200
    premium_revoke(user=user)
    for method, path in (("GET", f"/f/{token}"), ("HEAD", f"/f/{token}"), ("GET", f"/watch/{token}")):
        status, _, body = server.request(method, path)
        assert status == 403, (method, path)
        assert method == "HEAD" or b"Streaming is for premium users" in body
    assert server.request("GET", f"/f/{link(stored)}")[0] == 200  # the console's link: no user


def test_a_file_deleted_from_the_storage_channel_is_a_404_and_shows_as_gone(server, telegram):
    stored, _ = video_file(telegram, 100)
    telegram.delete_post(stored.source_chat_id, stored.message_ids[0])
    status, _, body = server.request("GET", f"/watch/{link(stored)}")
    assert status == 404 and b"This file is gone" in body
    stored.refresh_from_db()
    assert stored.stream_gone_at is not None


def test_the_player_page_plays_videos_with_the_browsers_player_and_links_out(server, telegram):
    stored, _ = video_file(telegram, 2048, name="Holiday film.mp4")
    token = link(stored)
    status, headers, body = server.request("GET", f"/watch/{token}")
    page = body.decode()
    assert (
        status == 200
        and f'<video id="media" controls preload="metadata" playsinline src="/f/{token}/Holiday%20film.mp4">' in page
    )
    assert "intent://127.0.0.1/f/" in page and "package=org.videolan.vlc" in page and "com.mxtech.videoplayer.ad" in page
    assert "vlc-x-callback://x-callback-url/stream?url=http%3A%2F%2F127.0.0.1%2Ff%2F" in page
    assert "infuse://x-callback-url/play?url=" in page
    assert '<script src="/assets/player.js" defer></script>' in page and "<script>" not in page
    assert headers["content-security-policy"].startswith("default-src 'self'")
    assert server.request("GET", "/assets/player.js")[0] == 200


def test_other_files_get_a_download_page_with_name_size_and_type(server, telegram):
    stored, _ = video_file(telegram, 2048, name="notes.pdf", kind="document")
    _, _, body = server.request("GET", f"/watch/{link(stored)}")
    page = body.decode()
    assert 'id="download-page"' in page and "<video" not in page and "notes.pdf" in page
    assert "2.0\xa0KB" in page and "application/pdf" in page


def test_the_console_is_not_on_the_streaming_origin(server):
    for path in ("/", "/login/", "/api/v1/", "/metrics", "/admin/"):
        assert server.request("GET", path)[0] == 404, path


def test_a_client_that_goes_away_cancels_the_reads_and_frees_its_slot(server, telegram):
    stored, _ = video_file(telegram, 64 * MIB)
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"GET /f/{link(stored, user_id=77)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    got = b""
    while len(got) < 2 * MIB:
        got += sock.recv(256 * 1024)
    assert got.startswith(b"HTTP/1.1 200")
    assert server.load() == 1
    sock.close()
    wait_for(lambda: server.load() == 0, timeout=20, what="the reads to be cancelled")
    wait_for(lambda: not server.serving.slots.held, timeout=20, what="the slot to be given back")


def test_open_streams_hold_no_database_connection(server, telegram):
    stored, _ = video_file(telegram, 64 * MIB)
    token = link(stored)

    def ours() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            return cursor.fetchone()[0]

    before = ours()
    socks = []
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(f"GET /f/{token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        assert sock.recv(64).startswith(b"HTTP/1.1 200")
        socks.append(sock)
    wait_for(lambda: server.load() == 5, timeout=20, what="the five streams to be read")
    assert ours() == before  # each request's connection closed once its bytes started flowing
    for sock in socks:
        sock.close()
    wait_for(lambda: server.load() == 0, timeout=20, what="the reads to be cancelled")


def test_streams_past_a_users_limit_get_a_429_page(server, telegram, settings):
    settings.STREAM_MAX_PER_USER = 1
    stored, _ = video_file(telegram, 64 * MIB)
    token = link(stored, user_id=78)
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"GET /f/{token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert sock.recv(64).startswith(b"HTTP/1.1 200")
    status, headers, body = server.request("GET", f"/f/{token}")
    assert status == 429 and b"You have 1 streams open already" in body and headers["retry-after"] == "30"
    assert server.request("HEAD", f"/f/{token}")[0] == 200  # HEAD takes no slot
    sock.close()
    wait_for(lambda: not server.serving.slots.held, timeout=20, what="the slot to be given back")
    assert server.request("GET", f"/f/{token}", {"Range": "bytes=0-9"})[0] == 206


def test_the_consoles_dashboard_counts_the_streams_and_bytes_of_the_last_day(server, telegram, admin_client):
    stored, _ = video_file(telegram, 300_000)
    token = link(stored)
    server.request("GET", f"/f/{token}")
    server.request("GET", f"/f/{token}", {"Range": "bytes=0-99999"})
    wait_for(lambda: (stream_stats_24h() or {}).get("bytes") == 400_000, timeout=20, what="both streams to be counted")
    assert stream_stats_24h() == {"streams": 2, "bytes": 400_000, "open": 0}
    with override_settings(**CONSOLE_SETTINGS):  # the console's own process
        page = admin_client.get("/").content.decode()
    assert 'data-count="streams"' in page and "390.6\xa0KB sent, 0 open now" in page


def test_a_long_streams_bytes_are_counted_as_they_are_sent_not_at_its_end(server, telegram):
    stored, _ = video_file(telegram, 6 * COUNT_EVERY)
    before = (stream_stats_24h() or {}).get("bytes", 0)
    sock = socket.socket()
    # A small receive buffer (no autotuning: the kernel's may grow to tens of MiB), so the bytes
    # not read yet stay mostly unsent: the stream is still open when half the file is read.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
    sock.connect(("127.0.0.1", server.port))
    try:
        sock.sendall(f"GET /f/{link(stored)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        got = 0
        while got < 3 * COUNT_EVERY:  # half the file read, the other half not asked yet
            got += len(sock.recv(1024 * 1024))
        wait_for(
            lambda: (stream_stats_24h() or {}).get("bytes", 0) - before >= 2 * COUNT_EVERY,
            timeout=20, what="the bytes sent so far to be counted",
        )  # fmt: skip
        assert server.serving.slots.held  # the stream is still open
    finally:
        sock.close()
    wait_for(lambda: not server.serving.slots.held, timeout=20, what="the stream to end")
    counted = stream_stats_24h()["bytes"] - before
    assert 3 * COUNT_EVERY <= counted < 6 * COUNT_EVERY  # what was sent, counted once, no more


def test_bytes_redis_does_not_take_are_counted_with_the_next_and_the_stream_goes_on(settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    slots = Slots()
    try:
        assert asyncio.run(bytes_counted(slots, 12345)) == 12345
    finally:
        asyncio.run(slots.client.aclose())


def test_metrics_count_the_bytes_served_and_the_answers(server, telegram):
    stored, _ = video_file(telegram, 50_000)
    token = link(stored)
    bot = server.serving.pool.downloaders[0].name

    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0

    before = value("courier_stream_bytes_total", bot=bot), value("courier_stream_answers_total", status="206", method="GET")
    calls = value("courier_getfile_seconds_count", bot=bot)
    server.request("GET", f"/f/{token}", {"Range": "bytes=0-9999"})
    wait_for(lambda: value("courier_streams_open", bot=bot) == 0, timeout=20, what="the stream to end")
    assert value("courier_stream_bytes_total", bot=bot) - before[0] == 10_000
    assert value("courier_stream_answers_total", status="206", method="GET") - before[1] == 1
    assert value("courier_getfile_seconds_count", bot=bot) > calls
