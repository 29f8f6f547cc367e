"""Byte-exact through the production path: `manage.py stream` (uvicorn, its own kurigram session)
reading from `manage.py telegram_server` (the in-memory Telegram as its own process, `--no-rates
--network none`: this module checks bytes, not speed), one pair of processes for the module. Every
answer is checked against the in-memory Telegram's generator (inmemory_telegram/content.py), whose
4 KiB blocks are all different, so a byte from the wrong place, twice or missing is caught:

- whole files of 0 B, 1 B, 4095 B, 1 MiB - 1, 1 MiB, 1 MiB + 1, 10 MiB and 2 GiB by SHA-256;
- 1,000 seeded ranges of a 40 MiB file kept on another data centre: unaligned starts and ends,
  ranges across, starting on and ending on 1 MiB boundaries, suffix ranges, open ranges, a last
  byte past the end, the last byte, all on one keep-alive connection, each byte for byte;
- HEAD's headers equal GET's (200, 206, 416, an empty file); 416 with `Content-Range: bytes */size`;
- a download cut part way and resumed with `curl -C -`, equal by SHA-256.

Measured on the shared 2-core machine: the 2 GiB case 78 s under a load of ~9 (67 s streaming and
hashing the body, 11 s computing the expected SHA-256 from the generator), 115 s under ~12; the
1,000 ranges (170 MiB in all) 28 s to 50 s; every other case under 1.5 s; starting the pair ~10 s.
"""

from __future__ import annotations

import hashlib
import http.client
import random
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from offline.telegram.remote import RemoteTelegram, server_process
from tests.botapp.stream_server import curl, link, stream_command, video_file
from tests.conftest import STORAGE
from tests.processes import manage_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024
GIB = 1024 * MIB
READ = 4 * MIB  # what the test reads of a body at a time


@dataclass
class Pair:
    remote: RemoteTelegram  # steers the telegram_server process
    url: str  # of the streaming process

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(urlsplit(self.url).hostname, urlsplit(self.url).port, timeout=120)


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker, tmp_path_factory):
    logs = tmp_path_factory.mktemp("stream-exact")
    with tempfile.TemporaryDirectory(prefix="sx") as directory:  # short: socket paths are limited to ~100 bytes
        socket_path = Path(directory) / "telegram.sock"
        with (
            open(logs / "telegram_server.log", "w") as server_log,
            server_process(socket_path, "--no-rates", "--network", "none", "--channel", str(STORAGE), stdout=server_log),
        ):
            remote = RemoteTelegram(socket_path, timeout=60)
            env = manage_env(
                TELEGRAM_OFFLINE="1", TELEGRAM_OFFLINE_SOCKET=str(socket_path), TELEGRAM_SESSION_DIR=str(logs / "sessions")
            )
            try:
                with stream_command(env, logs / "stream.log") as url:
                    yield Pair(remote, url)
            finally:
                remote.close()


@pytest.fixture
def served(pair, conf):
    """The pair, with stream links switched on (the database is emptied after each test)."""
    conf.stream_links = "on"
    conf.save()
    return pair


def body_digest(response: http.client.HTTPResponse) -> tuple[str, int]:
    """(SHA-256, length) of a response's body, read a piece at a time."""
    digest, length = hashlib.sha256(), 0
    while piece := response.read(READ):
        digest.update(piece)
        length += len(piece)
    return digest.hexdigest(), length


def generator_digest(data: Callable[[int, int], bytes], start: int, size: int) -> str:
    """SHA-256 of the generator's bytes [start, start + size), a piece at a time."""
    digest = hashlib.sha256()
    for offset in range(start, start + size, READ):
        digest.update(data(offset, min(READ, start + size - offset)))
    return digest.hexdigest()


def get(conn: http.client.HTTPConnection, method: str, path: str, headers: dict | None = None):
    """(status, headers without Date, body) on `conn`, kept open for the next request."""
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders() if k.lower() != "date"}, body


@pytest.mark.parametrize("size", [0, 1, 4095, MIB - 1, MIB, MIB + 1, 10 * MIB])
def test_the_whole_file_is_byte_exact(served, size):
    stored, data = video_file(served.remote, size)
    expected = generator_digest(data, 0, size)
    if size >= 8:  # the expectation tells a file from the same file one byte off (the first 8 bytes: block 0's number)
        assert generator_digest(data, 1, size) != expected
    conn = served.connection()
    conn.request("GET", f"/f/{link(stored)}")
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == str(size)
    assert body_digest(response) == (expected, size)
    conn.close()


def test_a_2_gib_file_is_byte_exact(served):
    size = 2 * GIB
    stored, data = video_file(served.remote, size, name="long film.mkv")
    assert data(size - 4096, 4096) != data(size - 8192, 4096)  # the last blocks differ from their neighbours
    began = time.monotonic()
    conn = served.connection()
    conn.request("GET", f"/f/{link(stored)}")
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == str(size)
    got = body_digest(response)
    conn.close()
    streamed = time.monotonic() - began
    expected = generator_digest(data, 0, size)
    print(f"2 GiB: streamed and hashed in {streamed:.1f} s, expected SHA-256 in {time.monotonic() - began - streamed:.1f} s")
    assert got == (expected, size)


def ranges_drawn(size: int, count: int, seed: int) -> list[str]:
    """`count` Range headers over a file of `size` bytes: the edge cases, then seeded random ones
    of every kind."""
    last_mib = (size - 1) // MIB
    headers = [
        f"bytes={size - 1}-{size - 1}", f"bytes={size - 1}-", "bytes=-1", "bytes=0-0", "bytes=-2000000",
        f"bytes={MIB - 1}-{MIB}", f"bytes={MIB}-{2 * MIB - 1}", f"bytes=0-{MIB - 1}", f"bytes={MIB - 4096}-{MIB + 4095}",
        f"bytes={size - 10}-{size + 1000}", f"bytes=-{size + 10}", f"bytes={last_mib * MIB}-", f"bytes={4095}-{4096}",
    ]  # fmt: skip
    rng = random.Random(seed)
    kinds = ["small", "across", "on", "span", "suffix", "open"]
    while len(headers) < count:
        kind = rng.choices(kinds, weights=[35, 30, 10, 4, 13, 8])[0]
        if kind == "small":  # anywhere, unaligned, a few bytes to a few blocks
            first = rng.randrange(size)
            headers.append(f"bytes={first}-{min(size - 1, first + rng.randrange(9000))}")
        elif kind == "across":  # over a 1 MiB boundary, a byte to 100 KB each side
            boundary = rng.randint(1, last_mib) * MIB
            headers.append(f"bytes={boundary - rng.randint(1, 100_000)}-{min(size - 1, boundary + rng.randrange(100_000))}")
        elif kind == "on":  # starting or ending on a 1 MiB boundary
            boundary = rng.randint(1, last_mib) * MIB
            length = rng.randint(1, MIB // 2)
            pick = rng.random() < 0.5
            headers.append(f"bytes={boundary}-{boundary + length - 1}" if pick else f"bytes={boundary - length}-{boundary - 1}")
        elif kind == "span":  # over two or three boundaries
            first = rng.randrange(size - 3 * MIB)
            headers.append(f"bytes={first}-{first + rng.randint(MIB + 1, MIB * 3 // 2)}")
        elif kind == "suffix":
            headers.append(f"bytes=-{rng.randint(1, 300_000)}")
        else:  # open: from somewhere in the last 300 KB to the end
            headers.append(f"bytes={rng.randrange(size - 300_000, size)}-")
    return headers


def range_resolved(header: str, size: int) -> tuple[int, int]:
    """(first, last) of the bytes a one-range header names in a file of `size` bytes."""
    first, last = header.removeprefix("bytes=").split("-")
    if not first:
        return max(0, size - int(last)), size - 1
    return int(first), min(size - 1, int(last)) if last else size - 1


def test_a_thousand_ranges_are_byte_exact(served):
    size = 40 * MIB + 12_345
    stored, data = video_file(served.remote, size, dc_id=4)  # a media session on another data centre
    path = f"/f/{link(stored)}"
    headers = ranges_drawn(size, 1000, seed=44)
    assert len(set(headers)) > 950
    conn = served.connection()
    get(conn, "HEAD", path)
    sock = conn.sock
    sent = 0
    for header in headers:
        first, last = range_resolved(header, size)
        expected = data(first, last - first + 1)
        if len(expected) >= 8:  # the expectation tells these bytes from those one byte on
            assert data(first + 1, 8) != expected[:8], header
        status, answer, body = get(conn, "GET", path, {"Range": header})
        assert status == 206, (header, status, body[:200])
        assert answer["content-range"] == f"bytes {first}-{last}/{size}", header
        assert answer["content-length"] == str(last - first + 1), header
        assert body == expected, header
        sent += len(body)
    assert conn.sock is sock  # one keep-alive connection
    conn.close()
    assert sent > 50 * MIB


def test_head_answers_what_get_would_without_the_body(served):
    size = 10 * MIB + 7
    stored, _ = video_file(served.remote, size, name="Café ☕.mp4")
    empty, _ = video_file(served.remote, 0, name="empty.bin", kind="document")
    cases = [
        (stored, {}), (stored, {"Range": "bytes=100-"}), (stored, {"Range": "bytes=-5"}),
        (stored, {"Range": f"bytes={size}-"}), (stored, {"Range": "bytes=0-0"}), (empty, {}), (empty, {"Range": "bytes=-5"}),
    ]  # fmt: skip
    conn = served.connection()
    for file, headers in cases:
        path = f"/f/{link(file)}"
        status, answer, body = get(conn, "GET", path, headers)
        head_status, head_answer, head_body = get(conn, "HEAD", path, headers)
        assert (head_status, head_answer, head_body) == (status, answer, b""), (headers, status, answer, body[:300])
        assert answer["content-length"] == str(len(body)), headers
    conn.close()
    assert status == 200 and answer["content-length"] == "0"  # the empty file's suffix: the (empty) whole


@pytest.mark.parametrize(
    ("size", "header"),
    [(5000, "bytes=5000-"), (5000, "bytes=5001-6000"), (5000, "bytes=-0"), (5000, "bytes=9000-,-0"), (0, "bytes=0-")],
)
def test_a_range_past_the_end_is_416_naming_the_size(served, size, header):
    stored, _ = video_file(served.remote, size)
    conn = served.connection()
    for method in ("GET", "HEAD"):
        status, answer, _ = get(conn, method, f"/f/{link(stored)}", {"Range": header})
        assert (status, answer["content-range"]) == (416, f"bytes */{size}"), method
    conn.close()


def test_curl_resumes_a_cut_download_byte_exact(served, tmp_path):
    size = 12 * MIB + 4321
    stored, data = video_file(served.remote, size, name="film.mp4")
    url = f"{served.url}/f/{link(stored)}/film.mp4?download=1"
    expected = generator_digest(data, 0, size)
    cut = tmp_path / "film.mp4"
    slow = subprocess.Popen(["curl", "-sS", "--limit-rate", "2M", "-o", str(cut), url])
    wait_for(lambda: cut.exists() and cut.stat().st_size > 2 * MIB, timeout=60, what="part of the download")
    slow.kill()
    slow.wait(10)
    kept = cut.stat().st_size
    assert kept < size
    assert hashlib.sha256(cut.read_bytes()).hexdigest() == generator_digest(data, 0, kept)  # what came is right
    resumed = curl("-sSf", "-C", "-", "-o", str(cut), "-D", "-", url)
    assert resumed.returncode == 0, resumed.stderr
    assert "HTTP/1.1 206" in resumed.stdout and f"content-range: bytes {kept}-{size - 1}/{size}" in resumed.stdout.lower()
    assert hashlib.sha256(cut.read_bytes()).hexdigest() == expected
