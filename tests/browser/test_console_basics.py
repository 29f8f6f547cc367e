"""Logging in, and the two screens that were server errors."""

import re

from botapp.models import StoredFile, TelegramUser
from tests.conftest import STORAGE


def test_an_operator_logs_in_and_sees_the_console(page, operator_account):
    page.goto("/")
    assert "/login/" in page.url
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    page.get_by_text("Please enter the correct username and password").wait_for()
    page.get_by_label("Password").fill("correct horse battery staple")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    assert page.get_by_role("link", name="Broadcasts").first.is_visible()


def test_telegram_users_offer_no_add(logged_in):
    page = logged_in
    page.goto("/botapp/telegramuser/")
    assert page.get_by_role("link", name="Add Telegram user").count() == 0
    response = page.goto("/botapp/telegramuser/add/")
    assert response.status == 403
    assert not TelegramUser.objects.exists()


def test_a_huge_message_range_is_refused_on_the_form(logged_in):
    page = logged_in
    page.goto("/botapp/storedfile/add/")
    page.get_by_label("Title").fill("Everything")
    page.get_by_label("Source chat id").fill(str(STORAGE))
    page.get_by_label("Message ids").fill("1-99999999999")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("A link holds at most 200 messages (got 99,999,999,999).").wait_for()
    assert not StoredFile.objects.exists()


def test_lists_fit_a_laptop_and_the_dashboard_and_broadcast_page_fit_a_phone(logged_in, browser, live_server):
    from tests.factories import BroadcastFactory, JobRunFactory, StoredFileFactory, TelegramUserFactory

    page = logged_in
    TelegramUserFactory(username="a_rather_long_username_indeed", first_name="Maximilian", last_name="Longname-Smith")
    StoredFileFactory(title="Quarterly report with a long title")
    broadcast = BroadcastFactory(title="Autumn sale", status="sending", total=1000, sent=420)
    JobRunFactory(job="send_broadcasts", processed=12, detail="2 broadcast(s): 12 sent, 0 blocked, 0 failed")
    for path in ("/botapp/telegramuser/", "/botapp/storedfile/", "/botapp/broadcast/", "/scheduler/jobrun/"):
        page.goto(path)
        # How far the rightmost cell reaches past the visible part of the table (0: nothing off-screen).
        overflow = page.evaluate(
            "() => { const t = document.querySelector('#result_list');"
            " const box = t.closest('.simplebar-mask') || t.parentElement;"
            " const edge = Math.min(box.getBoundingClientRect().right, window.innerWidth); let right = 0;"
            " for (const c of t.querySelectorAll('th, td')) right = Math.max(right, c.getBoundingClientRect().right);"
            " return Math.max(0, Math.round(right - edge)); }"
        )
        assert overflow == 0, f"{path} overflows by {overflow} px at 1400 px"

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, base_url=live_server.url)
    phone.add_cookies(page.context.cookies())
    tab = phone.new_page()
    for path in ("/", f"/botapp/broadcast/{broadcast.pk}/change/"):
        tab.goto(path)
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390, path
    phone.close()


def test_the_broadcast_claims_page_shows_the_ranges_senders_hold_and_changes_nothing(logged_in):
    """Broadcast claims: the ranges of rows workers hold right now, one per batch in flight. An
    operator looks (which broadcast, which rows, until when); nothing there is added, edited or
    deleted by hand."""
    from datetime import timedelta

    from botapp import clock
    from botapp.models import BroadcastClaim
    from tests.factories import BroadcastFactory

    page = logged_in
    now = clock.now()
    sale, news = BroadcastFactory(title="Autumn sale", status="sending"), BroadcastFactory(title="News", status="sending")
    BroadcastClaim.objects.create(broadcast=sale, first_id=1, last_id=200, claimed_at=now, lease_until=now + timedelta(minutes=5))
    BroadcastClaim.objects.create(broadcast=news, first_id=7, last_id=9, claimed_at=now, lease_until=now + timedelta(minutes=5))
    page.goto("/botapp/broadcastclaim/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    assert page.get_by_role("link", name="Add broadcast claim").count() == 0
    page.locator("#searchbar").fill("Autumn")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"q=Autumn"))
    assert rows.count() == 1 and "Autumn sale" in rows.first.inner_text() and "200" in rows.first.inner_text()
    rows.first.locator("a").first.click()
    assert page.get_by_role("button", name=re.compile("^Save")).count() == 0  # looked at, not edited
    assert page.get_by_role("link", name="Delete").count() == 0


def test_an_operator_bans_a_user_from_the_list_as_the_bots_ban_does(logged_in):
    from botapp.services.moderation import ban_in_force
    from tests.factories import TelegramUserFactory

    mallory = TelegramUserFactory(username="mallory", first_name="Mallory")
    TelegramUserFactory(username="alice", first_name="Alice")
    page = logged_in
    page.goto("/botapp/telegramuser/")
    page.get_by_role("row").filter(has_text="@mallory").get_by_role("checkbox").check()
    page.locator("select[name=action]").select_option(label="Ban for 30 days (as /ban: no files)")
    page.get_by_role("button", name="Run").click()
    page.get_by_text("Banned 1 user(s) for 30 days.").wait_for()
    assert ban_in_force(user=TelegramUser.objects.get(pk=mallory.pk)) is not None

    page.goto("/botapp/telegramuser/?banned=admin")
    rows = page.get_by_role("row").filter(has_text="@")
    assert rows.count() == 1 and "@mallory" in rows.first.inner_text()


def test_the_console_and_the_api_docs_work_under_the_content_security_policy(logged_in):
    """Every page carries the policy; the page fixture fails on anything the browser blocked."""
    page = logged_in
    for path, shown in [
        ("/", "Broadcasts"),
        ("/botapp/telegramuser/", "Telegram users"),
        ("/botapp/storedfile/add/", "Message ids"),
        ("/botapp/broadcast/add/", "Text"),
        ("/botapp/botsettings/", "Welcome text"),
        ("/scheduler/backgroundjob/", "Schedules"),
        ("/api/v1/docs/", "Authorize"),
    ]:
        response = page.goto(path)
        assert "script-src 'self' 'unsafe-eval'" in response.headers["content-security-policy"], path
        page.get_by_text(shown).first.wait_for()
    page.locator(".swagger-ui .opblock").first.wait_for()  # Swagger UI's script ran: the endpoints are listed
