"""`make sandbox DEMO=stream`: a newcomer's one command prints the demo video's player page, which
answers, and a `curl -C -` line that resumes a cut download to the very bytes of the demo video."""

import hashlib
import os
import re
import subprocess

import pytest

from offline.demo_video import DEMO_VIDEO
from tests.processes import ROOT, free_port, sandbox_env


@pytest.mark.slow
def test_make_sandbox_demo_stream_prints_a_player_and_a_resumable_download(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ARGS", "MAKEFLAGS", "MAKELEVEL")}
    env["STREAM_PORT"] = str(free_port())
    sandbox = subprocess.Popen(
        ["make", "--no-print-directory", "sandbox", "DEMO=stream"],
        cwd=ROOT,
        env=sandbox_env(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        printed = []
        for line in sandbox.stdout:  # the sandbox prints the links once the streaming process answers
            printed.append(line)
            if "curl -C -" in line or not line:
                break
        text = "".join(printed)
        watch = re.search(r"demo video: open (http://127\.0\.0\.1:\d+/watch/\S+) in a browser", text)
        resume = re.search(r"curl -C - -o demo\.webm '(http://127\.0\.0\.1:\d+/f/[^']+)'", text)
        assert watch and resume, text

        page = subprocess.run(["curl", "-sS", watch[1]], capture_output=True, text=True, timeout=60).stdout
        assert '<video id="media"' in page and "demo.webm" in page

        part = tmp_path / "demo.webm"
        part.write_bytes(DEMO_VIDEO.read_bytes()[:100_000])  # a download cut at 100 kB
        resumed = subprocess.run(
            ["curl", "-sS", "-C", "-", "-o", str(part), "-w", "%{http_code}", resume[1]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert resumed.stdout == "206", resumed.stderr
        assert hashlib.sha256(part.read_bytes()).digest() == hashlib.sha256(DEMO_VIDEO.read_bytes()).digest()
        out, err = sandbox.communicate("1001: /start\n", timeout=120)
    finally:
        if sandbox.poll() is None:
            sandbox.kill()
            sandbox.wait()
    assert sandbox.returncode == 0, err
