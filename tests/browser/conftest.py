"""The console in a real browser: Playwright for Python driving Debian's Chromium (/usr/bin/chromium,
installed by `make setup`; Playwright's own browser builds are never downloaded) against
pytest-django's live server on the real test database.

Every test here is `slow` (it starts a browser). Screenshots named by a test go to docs/screenshots/
(the README shows them); a failing test's last page goes to var/browser-failures/."""

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# browser steps are ordinary blocking calls, which Django would otherwise refuse near a loop.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
FAILURES = ROOT / "var" / "browser-failures"
WIDTH, HEIGHT = 1400, 900  # the laptop the console is sized for
PASSWORD = "correct horse battery staple"


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.slow)


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


@pytest.fixture(scope="session")
def browser():
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
    errors = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


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
