"""The web process as deployed: gunicorn with config/gunicorn.py (the Procfile's web line) on a free
loopback port, its answers read over HTTP."""

import http.client
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, free_port, manage_env, wait_for

GUNICORN = Path(sys.executable).parent / "gunicorn"


def procfile_web_args() -> list[str]:
    """The Procfile's web command, without its bind, workers and log options (given below)."""
    (line,) = re.findall(r"^web: (.+)$", (ROOT / "Procfile").read_text(), flags=re.M)
    return line.split(" --bind")[0].split()[1:]


@pytest.mark.slow
def test_gunicorn_as_deployed_hides_the_server_and_sends_the_content_security_policy(db):
    args = procfile_web_args()
    assert args[:2] == ["-c", "config/gunicorn.py"]
    port = free_port()
    web = subprocess.Popen(
        [str(GUNICORN), *args, "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT,
        env=manage_env(SECURE_SSL_REDIRECT="0", ALLOWED_HOSTS="127.0.0.1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def answer():
            if web.poll() is not None:
                raise AssertionError(f"gunicorn stopped: {web.stderr.read()[-2000:]}")
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/login/")
                response = conn.getresponse()
                response.read()
                return response
            except OSError:
                return None
            finally:
                conn.close()

        response = wait_for(answer, timeout=30, what="gunicorn answering")
        assert response.status == 200
        assert "gunicorn" not in (response.getheader("Server") or "").lower()
        assert "default-src 'self'" in response.getheader("Content-Security-Policy")
    finally:
        web.terminate()
        web.wait(timeout=30)
