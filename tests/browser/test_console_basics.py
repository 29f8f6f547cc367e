"""Logging in, and the two screens that were server errors."""

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
