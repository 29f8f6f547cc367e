"""The console in a real browser: Playwright for Python driving Debian's Chromium (/usr/bin/chromium,
installed by `make setup`; Playwright's own browser builds are never downloaded) against
pytest-django's live server on the real test database.

Every test here is `slow` (it starts a browser). Screenshots named by a test go to docs/screenshots/
(the README shows them); a failing test's last page goes to var/browser-failures/."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
FAILURES = ROOT / "var" / "browser-failures"
WIDTH, HEIGHT = 1400, 900  # the laptop the console is sized for
PASSWORD = "correct horse battery staple"
ADMIN = 1000  # ADMIN_IDS while a worker runs


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")
def _sync_orm_beside_playwright():
    """Playwright's sync API keeps an event loop in this thread while the browser is open; the ORM
    calls a test (and pytest-django's flush) make between browser steps are ordinary blocking calls,
    which Django would otherwise refuse near a loop. Only while this package's browser is open
    (never in a process the project runs: `check --deploy` refuses the variable)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(autouse=True)
def _real_clock():
    """The browser tests share the database with a worker process, which runs on the real clock:
    so does this process (the suite's fixture moved it to 10:00 tomorrow)."""
    from botapp import clock

    clock.clock_reset()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed and "page" in item.funcargs:
        FAILURES.mkdir(parents=True, exist_ok=True)
        item.funcargs["page"].screenshot(path=str(FAILURES / f"{item.name}.png"), full_page=True)
    return report


@pytest.fixture(scope="package")
def live_server():
    """pytest-django's live server, started over plain http: the settings a TLS proxy needs in
    production (redirect to https, secure cookies, HSTS) are off for the server's life."""
    from django.test import override_settings
    from pytest_django.live_server_helper import LiveServer

    with override_settings(
        SECURE_SSL_REDIRECT=False, SESSION_COOKIE_SECURE=False, CSRF_COOKIE_SECURE=False, SECURE_HSTS_SECONDS=0
    ):
        server = LiveServer("localhost")
        yield server
        server.stop()


@pytest.fixture(scope="package")
def browser(_sync_orm_beside_playwright):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run `make setup` (it installs Debian's chromium)")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def operator_account(django_user_model):
    return django_user_model.objects.create_superuser("operator", "op@example.com", PASSWORD)


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, base_url=live_server.url)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors, refused = [], []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    # What the Content-Security-Policy blocked (the browser reports it on the console).
    tab.on("console", lambda m: m.type == "error" and "Content Security Policy" in m.text and refused.append(m.text))
    yield tab
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
    assert refused == [], f"the Content-Security-Policy blocked: {refused}"


@pytest.fixture
def logged_in(page, operator_account):
    """The page, logged in through the login form as an operator would."""
    page.goto("/login/")
    page.get_by_label("Username").fill(operator_account.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    return page


def screenshot(page, name: str) -> None:
    """Save the page for the README (docs/screenshots/NAME.png)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=False)


def wait_for(condition, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for {what}")


@pytest.fixture
def worker(telegram, tmp_path, settings):
    """A real Celery worker process (`celery -A config worker`, one solo process) on the test
    database and the test Redis, sending through the in-memory Telegram (as offline workers do),
    with a one-second heartbeat. Yields the process; stopped (or found killed) at the end."""
    from django.db import connection

    from botapp.services.health import processes_state
    from tests.factories import telegram_on_socket

    settings.HEARTBEAT_SECONDS = 1
    settings.ADMIN_IDS = str(ADMIN)  # the worker sends tests to them; the console counts them
    db = connection.settings_dict
    database_url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    FAILURES.mkdir(parents=True, exist_ok=True)
    log_name = f"worker-{os.environ['PYTEST_XDIST_WORKER']}.log" if "PYTEST_XDIST_WORKER" in os.environ else "worker.log"
    with telegram_on_socket(telegram) as socket, open(FAILURES / log_name, "w") as log:  # one per xdist worker
        env = {
            **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
            "DATABASE_URL": database_url,
            "TELEGRAM_OFFLINE": "1",
            "TELEGRAM_OFFLINE_SOCKET": str(socket),
            "TELEGRAM_SESSION_DIR": str(tmp_path),
            "ADMIN_IDS": settings.ADMIN_IDS,
            "HEARTBEAT_SECONDS": "1",
            "CONN_MAX_AGE": "0",  # no idle connection outlives a test's flush
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool",
                "solo",
                "--purge",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "WARNING",
                "-n",
                f"browser-{os.getpid()}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: processes_state()["worker"].ok, timeout=60, what="the worker's first heartbeat")
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
