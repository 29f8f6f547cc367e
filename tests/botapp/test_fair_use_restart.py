"""Every limit and mode survives a restart of every process: `manage.py runbot` killed and started
again (a process of its own, on `manage.py telegram_server`) keeps refusing a user over their
limit without telling them again, and keeps owner-only mode, because the counts are in Redis and
the settings and the allow-list in PostgreSQL. (The console and the workers hold none of it.)"""

import contextlib
import signal
import subprocess
import sys
import time

import pytest
import redis
from django.conf import settings

from botapp.models import AllowedUser, BotSettings
from botapp.telegram.gateway import TgUser
from offline.readiness import ready_line_wait
from offline.telegram.remote import RemoteTelegram, server_process
from tests.conftest import ADMIN, STORAGE
from tests.processes import ROOT, manage_env, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PRIVATE = "Private bot: ask the owner."


@contextlib.contextmanager
def runbot(env: dict):
    """`manage.py runbot` with one handler thread (and one gate thread: updates through the gates in
    the order they came), once it
    is listening; SIGKILLed on the way out (a crash: nothing is written on the way down)."""
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runbot", "--threads", "1"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        ready_line_wait(proc, "runbot: listening")
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def test_limits_and_owner_only_mode_survive_runbot_being_killed_and_started_again(tmp_path):
    base = 900_000_000 + time.time_ns() % 1_000_000 * 10  # users of this run alone (their counts are in Redis)
    alice, bob, carol = (TgUser(id=base + n, first_name=name) for n, name in enumerate(("Alice", "Bob", "Carol"), start=1))
    admin = TgUser(id=ADMIN, first_name="A")
    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.fair_use_enabled, conf.fair_use_commands_per_minute = True, 1
    conf.allow_list_enabled, conf.allow_list_text = True, PRIVATE
    conf.save()
    AllowedUser.objects.create(telegram_id=alice.id)
    path = tmp_path / "telegram.sock"
    with server_process(path, "--no-rates", "--channel", str(STORAGE)):
        remote = RemoteTelegram(path)
        env = manage_env(
            TELEGRAM_OFFLINE="1", TELEGRAM_OFFLINE_SOCKET=str(path), TELEGRAM_SESSION_DIR=str(tmp_path),
            STORAGE_CHANNEL_ID=str(STORAGE), ADMIN_IDS=str(ADMIN),
        )  # fmt: skip

        def texts(user) -> list[str]:
            return [text for chat, _, text in remote.send_times() if chat == user.id]

        try:
            with runbot(env):
                for _ in range(2):  # over the limit of 1 a minute, within fair use's pace (two at once)
                    remote.user_sends(alice, "/help")
                remote.user_sends(bob, "/help")
                wait_for(lambda: len(texts(bob)) == 1 and len(texts(alice)) == 2, timeout=60, what="their answers")
                assert sum(text.startswith("⏳ You are sending faster") for text in texts(alice)) == 1  # told once
                assert texts(bob) == [PRIVATE]
            with runbot(env):  # a new process: nothing of the first one's memory
                remote.user_sends(alice, "/help")  # over the minute's limit still (and maybe too soon: the pace's)
                remote.user_sends(carol, "/help")  # a stranger who never wrote before
                remote.user_sends(admin, "/help")  # through the gates after theirs (one thread, in order)
                wait_for(lambda: texts(admin), timeout=60, what="the admin's answer")
                answered = [text for text in texts(alice) if not text.startswith("⏳")]
                assert len(answered) == 1  # still over the limit
                assert sum(text.startswith("⏳ You are sending faster") for text in texts(alice)) == 1  # not told again
                assert texts(carol) == [PRIVATE]  # owner-only mode still on
                assert texts(bob) == [PRIVATE]  # his message, handed over again after the crash, not answered twice
        finally:
            remote.close()
            client = redis.Redis.from_url(settings.REDIS_URL)
            for user in (alice, bob, carol):
                for key in client.scan_iter(f"courier:quota:{user.id}:*"):
                    client.delete(key)
