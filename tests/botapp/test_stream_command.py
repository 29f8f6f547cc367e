"""`manage.py stream` as the deployment runs it: its own process (uvicorn, its own kurigram session
on the in-memory Telegram served on a socket), read with curl. Byte-exactness through this process
against `manage.py telegram_server`, `curl -C -` included: tests/botapp/test_stream_exact.py."""

import subprocess

import pytest

from tests.botapp.stream_server import curl, link, stream_command, video_file
from tests.factories import telegram_on_socket
from tests.processes import manage, manage_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def stream_process(telegram, conf, tmp_path):
    conf.stream_links = "on"
    conf.save()
    with telegram_on_socket(telegram) as socket_path:
        env = manage_env(
            TELEGRAM_OFFLINE="1",
            TELEGRAM_OFFLINE_SOCKET=str(socket_path),
            TELEGRAM_SESSION_DIR=str(tmp_path / "sessions"),
        )
        with stream_command(env, tmp_path / "stream.log") as url:
            yield url


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
