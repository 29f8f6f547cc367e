"""The offline tooling (the sandbox, the in-memory Telegram's commands) is an installed app only
where it is used: with TELEGRAM_OFFLINE, when manage.py runs one of its own commands, and under
pytest. Production's processes (gunicorn, runbot, celery) never load it."""

import os
import subprocess
import sys

import pytest
from django.conf import settings

# Reads the settings as a process started with `argv` does, and says whether offline is installed.
PROBE = "import sys; sys.argv = {argv!r}; import config.settings as s; print('offline' in s.INSTALLED_APPS)"


def installed(argv: list[str], **env: str) -> bool:
    environment = {k: v for k, v in os.environ.items() if k != "TELEGRAM_OFFLINE"} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        cwd=settings.BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip() == "True"


def test_the_tests_have_the_offline_app():
    assert "offline" in settings.INSTALLED_APPS


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["manage.py", "sandbox", "--fresh", "--demo"], {}, True),
        (["manage.py", "telegram_server"], {}, True),
        (["manage.py", "runbot"], {"TELEGRAM_OFFLINE": "1"}, True),
        (["manage.py", "runbot"], {"TELEGRAM_OFFLINE": "0"}, False),
        (["manage.py", "migrate"], {}, False),
        (["gunicorn", "config.wsgi"], {}, False),
        (["celery", "-A", "config", "worker"], {}, False),
    ],
)
def test_a_process_has_the_offline_app_only_where_it_is_used(argv, env, expected):
    assert installed(argv, **env) is expected
