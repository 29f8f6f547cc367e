"""`manage.py stream` as the deployment runs it: its own process (uvicorn, its own kurigram session
on the in-memory Telegram served on a socket), read with curl, a download cut and resumed with
`curl -C -`."""

import hashlib
import signal
import subprocess
import sys

import pytest

from tests.botapp.stream_server import link, video_file
from tests.factories import telegram_on_socket
from tests.processes import ROOT, free_port, manage, manage_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024


@pytest.fixture
def stream_process(telegram, conf, tmp_path):
    conf.stream_links = "on"
    conf.save()
    port = free_port()
    with telegram_on_socket(telegram) as socket_path:
        env = manage_env(
            TELEGRAM_OFFLINE="1",
            TELEGRAM_OFFLINE_SOCKET=str(socket_path),
            TELEGRAM_SESSION_DIR=str(tmp_path / "sessions"),
            STREAM_PUBLIC_URL=f"http://127.0.0.1:{port}",
            SECURE_SSL_REDIRECT="0",
            DJANGO_SETTINGS_MODULE="config.settings",  # config/asgi_stream.py replaces it: the console never serves here
        )
        log = open(tmp_path / "stream.log", "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "stream", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(
                lambda: (
                    proc.poll() is not None or curl("-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/x").stdout == "404"
                ),
                timeout=60,
                what="the streaming process to answer",
            )
            assert proc.poll() is None, (tmp_path / "stream.log").read_text()
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", *args], capture_output=True, text=True, timeout=120)


def test_curl_gets_the_file_byte_exact_and_resumes_a_cut_download(stream_process, telegram, tmp_path):
    size = 24 * MIB + 4321
    stored, data = video_file(telegram, size, name="film.mp4")
    url = f"{stream_process}/f/{link(stored)}/film.mp4?download=1"
    expected = hashlib.sha256(data(0, size)).hexdigest()

    whole = tmp_path / "whole.mp4"
    assert curl("-sSf", "-o", str(whole), url).returncode == 0
    assert hashlib.sha256(whole.read_bytes()).hexdigest() == expected

    cut = tmp_path / "cut.mp4"
    slow = subprocess.Popen(["curl", "-sS", "--limit-rate", "2M", "-o", str(cut), url])
    wait_for(lambda: cut.exists() and cut.stat().st_size > 3 * MIB, timeout=60, what="part of the download")
    slow.kill()
    slow.wait(10)
    assert cut.stat().st_size < size
    resumed = curl("-sSf", "-C", "-", "-o", str(cut), "-D", "-", url)
    assert resumed.returncode == 0, resumed.stderr
    assert "HTTP/1.1 206" in resumed.stdout and f"/{size}" in resumed.stdout
    assert hashlib.sha256(cut.read_bytes()).hexdigest() == expected


def test_the_process_answers_head_and_ranges_and_keeps_the_console_away(stream_process, telegram):
    stored, data = video_file(telegram, 10_000)
    url = f"{stream_process}/f/{link(stored)}"
    head = curl("-sSI", url).stdout
    assert "HTTP/1.1 200" in head and "content-length: 10000" in head.lower() and "accept-ranges: bytes" in head.lower()
    ranged = subprocess.run(["curl", "-sS", "-r", "9990-", url], capture_output=True, timeout=60).stdout
    assert ranged == data(9990, 10)
    assert curl("-s", "-o", "/dev/null", "-w", "%{http_code}", stream_process + "/api/v1/").stdout == "404"


def test_bad_options_get_a_one_line_error():
    result = manage("stream", "--workers", "0", env=manage_env())
    assert result.returncode != 0 and "--workers is at least 1." in result.stderr
