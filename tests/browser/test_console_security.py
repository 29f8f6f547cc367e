"""The console's security pages in a browser: the lock-out page, two-factor log-in from set-up to
the code asked at the next log-in, and the audit trail's list."""

import time
from base64 import b32decode
from datetime import timedelta

from django.urls import reverse
from django_otp.oath import TOTP

from botapp import clock
from botapp.models import AuditEntry
from tests.browser.conftest import PASSWORD


def log_in(page, password=PASSWORD, username="operator"):
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def test_the_lock_out_page_says_why_and_until_when(page, operator_account, settings):
    settings.AXES_FAILURE_LIMIT = 3
    page.goto("/login/")
    for n in range(3):
        log_in(page, f"guess-{n}")
        page.wait_for_load_state()

    error = page.get_by_text("Too many failed log-ins with this user name from your address")
    error.wait_for()
    assert "log-in is locked until" in error.inner_text() and "even with the right password" in error.inner_text()

    log_in(page)  # the right password, still refused
    page.get_by_text("Too many failed log-ins").wait_for()
    assert "/login/" in page.url


def open_from_system_menu(page, path: str) -> None:
    """The sidebar's (collapsed) System group links the page; opened by its address."""
    assert page.locator(f'nav a[href="{path}"]').count() >= 1
    page.goto(path)


def code_for(key_text: str, *, steps_ahead: int = 0) -> str:
    key = key_text.replace(" ", "")
    totp = TOTP(b32decode(key + "=" * (-len(key) % 8)))
    totp.time = time.time() + steps_ahead * 30
    return f"{totp.token():06d}"


def test_an_operator_turns_on_two_factor_log_in_and_is_asked_for_a_code_next_time(logged_in):
    page = logged_in
    open_from_system_menu(page, "/account/two-factor/")
    page.wait_for_url("**/account/two-factor/")
    assert "is off" in page.locator("#two-factor-state").inner_text()
    assert page.locator("#two-factor svg").count() == 1  # the QR code
    key = page.locator("#two-factor-key").inner_text()

    page.get_by_label("Code from your authenticator app").fill("000000")
    page.get_by_role("button", name="Turn on").click()
    page.get_by_text("That code is not right").wait_for()

    from django_otp.plugins.otp_totp.models import TOTPDevice

    TOTPDevice.objects.update(throttling_failure_count=0)  # the wrong code's pause, as if it had passed
    page.get_by_label("Code from your authenticator app").fill(code_for(key))
    page.get_by_role("button", name="Turn on").click()
    page.get_by_text("Two-factor log-in is on").wait_for()

    page.context.clear_cookies()  # a new log-in
    page.goto("/botapp/broadcast/")
    log_in(page)
    page.wait_for_url("**/login/verify/**")
    page.get_by_label("Code from your authenticator app").fill(code_for(key, steps_ahead=1))
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/botapp/broadcast/")
    assert AuditEntry.objects.filter(action="two_factor.enable", actor="operator").exists()


def test_the_audit_trail_lists_searches_and_filters_and_offers_no_change(logged_in):
    page = logged_in
    now = clock.now()
    AuditEntry.objects.create(
        at=now - timedelta(minutes=5),
        actor="operator",
        via="console",
        address="203.0.113.9",
        action="broadcast.start",
        target="broadcast 7: Spring sale",
        detail="queued for 1200 user(s)",
    )
    AuditEntry.objects.create(at=now, actor="telegram:1000", via="bot", action="user.ban", target="Telegram user 5: ann")

    open_from_system_menu(page, "/botapp/auditentry/")
    page.wait_for_url("**/botapp/auditentry/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2 and "user.ban" in rows.first.inner_text()  # newest first
    assert "203.0.113.9" in page.content()
    assert page.get_by_role("link", name="Add audit entry").count() == 0

    page.locator("#searchbar").fill("Spring")
    page.locator("#searchbar").press("Enter")
    page.wait_for_url("**q=Spring**")
    assert page.locator("#result_list tbody tr").count() == 1 and "broadcast.start" in page.locator("#result_list").inner_text()

    page.goto("/botapp/auditentry/?via__exact=bot")
    assert page.locator("#result_list tbody tr").count() == 1 and "telegram:1000" in page.locator("#result_list").inner_text()


def test_a_refused_page_says_why_in_the_consoles_frame(logged_in):
    page = logged_in
    answer = page.goto(reverse("admin:botapp_auditentry_add"))  # the audit trail is never written by hand
    assert answer.status == 403
    page.get_by_role("heading", name="Your account may not do this").wait_for()
    assert "no permission for this page" in page.locator("#why").inner_text()
    assert page.locator('nav a[href="/botapp/storedfile/"]').count() >= 1  # the console's own menu
    page.get_by_role("link", name="Back to the dashboard").click()
    page.wait_for_url("**/")
