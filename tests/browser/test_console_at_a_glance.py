"""Issue 48's table, rows 5-9, 11-14, 16 and 17, as an operator meets each: fields that look like
fields, line breaks kept, one bound said once, dark mode and a phone's width, a condition on a key
nothing records, a step's preview, labels that read the right way, Ban and Unban on a user's page,
a search that finds users and files, and Bot settings in sections."""

import re
from contextlib import contextmanager

from botapp.models import BotSettings, Broadcast, Sequence, SequenceStep, TelegramUser, UserBan
from tests.browser.test_console_phone_and_dark import UNREADABLE
from tests.factories import (
    BroadcastFactory,
    JobRunFactory,
    SequenceStepFactory,
    StoredFileFactory,
    TelegramUserFactory,
    UserBanFactory,
)


@contextmanager
def viewed(browser, live_server, page, *, width=1400, scheme="light"):
    """Another tab on the same log-in, at this width and colour scheme."""
    context = browser.new_context(
        viewport={"width": width, "height": 844 if width < 600 else 900},
        is_mobile=width < 600,
        color_scheme=scheme,
        base_url=live_server.url,
    )
    context.add_cookies(page.context.cookies())
    errors = []
    tab = context.new_page()
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield tab
    finally:
        context.close()
    assert errors == []


def border_width(page, selector: str) -> float:
    return page.locator(selector).evaluate("el => parseFloat(getComputedStyle(el).borderTopWidth)")


def test_row_5_the_post_and_shortener_key_fields_look_like_fields(logged_in):
    page = logged_in
    page.goto("/botapp/broadcast/add/")
    post = page.get_by_label("Post", exact=True)
    assert post.get_attribute("name") == "post_id"
    assert border_width(page, "input[name=post_id]") >= 1
    assert border_width(page, "input[name=post_id]") == border_width(page, "input[name=title]")

    page.goto("/botapp/botsettings/")
    assert border_width(page, "input[name=shortener_api_key]") >= 1
    assert border_width(page, "input[name=shortener_api_key]") == border_width(page, "input[name=shortener_api_url]")


def test_row_6_a_started_broadcast_keeps_the_line_breaks_of_its_text_and_buttons(logged_in):
    page = logged_in
    b = BroadcastFactory(
        title="Autumn sale",
        status=Broadcast.Status.DONE,
        text="Line one\nLine two",
        buttons="Shop | https://shop.example\nNews | https://news.example",
    )
    page.goto(f"/botapp/broadcast/{b.pk}/change/")
    assert page.get_by_role("button", name="Save", exact=True).count() == 0  # read-only
    text = page.locator(".readonly-text").filter(has_text="Line one")
    assert text.inner_text() == "Line one\nLine two"
    buttons = page.locator(".readonly-text").filter(has_text="Shop | https://shop.example")
    assert buttons.inner_text() == "Shop | https://shop.example\nNews | https://news.example"


def test_row_7_the_lifetime_field_says_its_lower_bound_once(logged_in):
    page = logged_in
    page.goto("/botapp/broadcast/add/")
    lifetime = page.locator("input[name=delete_after_minutes]")
    said = []
    for typed in ("-5", "0"):
        lifetime.fill(typed)
        said.append(lifetime.evaluate("el => el.validationMessage"))
    assert all("greater than or equal to 1" in line for line in said), said
    lifetime.fill("1")
    assert lifetime.evaluate("el => el.validationMessage") == ""


def test_row_8_the_dashboard_reads_in_dark_mode(logged_in, browser, live_server):
    TelegramUserFactory.create_batch(2)
    with viewed(browser, live_server, logged_in, scheme="dark") as tab:
        tab.goto("/")
        assert tab.evaluate("document.documentElement.classList.contains('dark')")
        card = tab.locator("[data-count=total]")
        colour = card.evaluate("el => getComputedStyle(el).backgroundColor")
        assert colour not in ("rgb(255, 255, 255)", "#fff"), colour
        assert tab.evaluate(UNREADABLE) == []


def test_row_9_the_jobs_page_and_a_files_link_fit_a_phone(logged_in, browser, live_server):
    conf = BotSettings.load()
    conf.bot_username = "courier_test_bot"
    conf.save()
    stored = StoredFileFactory(title="Report", share_id="a-very-long-share-id-0123456789")
    JobRunFactory(job="send_broadcasts", processed=12, detail="2 broadcast(s): 12 sent, 0 blocked, 0 failed")
    with viewed(browser, live_server, logged_in, width=390) as tab:
        tab.goto("/scheduler/backgroundjob/")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        run = tab.locator("tr[data-job=cleanup_tokens]").get_by_role("button", name="Run now")
        box = run.bounding_box()
        assert run.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= 390

        tab.goto(f"/botapp/storedfile/{stored.pk}/change/")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        copy = tab.locator(".deep-link").get_by_role("button", name="Copy")
        box = copy.bounding_box()
        assert box["x"] + box["width"] <= 390


def test_row_11_a_condition_on_a_key_no_button_records_is_refused(logged_in):
    page = logged_in
    sequence = Sequence.objects.create(name="Onboarding", start_payload="welcome")
    SequenceStepFactory(sequence=sequence, text="Join us", buttons="Join | tap:joined")
    page.goto("/botapp/sequencestep/add/")
    page.locator("select[name=sequence]").select_option(label=str(sequence))
    page.locator("input[name=delay_seconds]").fill("3600")
    page.locator("textarea[name=text]").fill("Still there?")
    page.locator("select[name=condition]").select_option("not_clicked")
    page.locator("input[name=condition_button]").fill("nosuchkey")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("No button records clicks on “nosuchkey”").wait_for()
    assert sequence.steps.count() == 1

    page.locator("input[name=condition_button]").fill("joined")  # the first step's tap button records it
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(re.compile(r"/botapp/sequencestep/$"))
    assert sequence.steps.filter(condition_button="joined").count() == 1


def test_row_11_a_key_on_a_sibling_step_of_the_same_form_is_accepted(logged_in):
    page = logged_in
    page.goto("/botapp/sequence/add/")
    page.locator("input[name=name]").fill("Drip")
    page.locator("input[name=start_payload]").fill("drip")
    page.locator("input[name='steps-0-delay_seconds']").fill("60")
    page.locator("textarea[name='steps-0-text']").fill("Hello")
    page.locator("select[name='steps-0-condition']").select_option("clicked")
    page.locator("input[name='steps-0-condition_button']").fill("typo")
    page.locator("textarea[name='steps-0-buttons']").fill("Yes | tap:yes")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("No button records clicks on “typo”").wait_for()
    assert not Sequence.objects.exists()
    page.locator("input[name='steps-0-condition_button']").fill("yes")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(re.compile(r"/botapp/sequence/$"))
    assert SequenceStep.objects.get().condition_button == "yes"


def test_row_12_a_text_steps_page_shows_its_message_preview(logged_in):
    page = logged_in
    step = SequenceStepFactory(text="<b>Welcome</b>\nHere is how it works.", buttons="Start | https://start.example")
    page.goto(f"/botapp/sequencestep/{step.pk}/change/")
    preview = page.locator(".courier-preview")
    assert preview.locator("b").inner_text() == "Welcome"
    assert preview.get_by_role("link", name="Start").get_attribute("href") == "https://start.example"
    assert page.get_by_text("Post preview").count() == 0


def test_row_13_labels_read_the_right_way(logged_in, settings):
    page = logged_in
    banned = TelegramUserFactory(username="mallory")
    UserBanFactory(user=banned, reason="spam")
    TelegramUserFactory(username="alice")
    page.goto("/botapp/telegramuser/")
    mallory = page.get_by_role("row").filter(has_text="@mallory")
    alice = page.get_by_role("row").filter(has_text="@alice")
    assert "BANNED" in mallory.inner_text().upper()
    assert "BANNED" not in alice.inner_text().upper()
    assert alice.locator("td.field-banned svg, td.field-banned .material-symbols-outlined").count() == 0  # no ✗ for "not banned"

    stored = StoredFileFactory(title="Report")
    page.goto(f"/botapp/storedfile/{stored.pk}/change/")
    options = page.locator("select[name=protect_content] option").all_inner_texts()
    assert [o.strip() for o in options] == ["As Bot settings", "Yes", "No"]
    assert page.get_by_text("null", exact=True).count() == 0
    page.get_by_text("None yet: the backup job copies the file").wait_for()

    page.goto("/botapp/botsettings/")
    assert page.get_by_label("FAQ text").count() == 1

    settings.PUBLIC_URL = ""
    page.goto("/botapp/broadcast/add/")
    page.get_by_label("Title").fill("Tracked")
    page.locator("textarea[name=text]").fill("Hi")
    page.locator("textarea[name=buttons]").fill("Shop | https://shop.example | shop")
    page.get_by_role("button", name="Save", exact=True).click()
    error = page.get_by_text("clicks cannot be tracked on this server yet")
    error.wait_for()
    assert "Remove “| shop” to send the link untracked" in error.inner_text()


def test_row_14_an_operator_bans_and_unbans_a_user_from_their_page(logged_in):
    page = logged_in
    mallory = TelegramUserFactory(username="mallory", first_name="Mallory")
    page.goto(f"/botapp/telegramuser/{mallory.pk}/change/")
    page.get_by_text("Not banned.").wait_for()
    page.get_by_role("link", name=re.compile(r"(^| )Ban…$")).click()
    page.get_by_role("button", name="Ban", exact=True).click()
    assert page.get_by_label("Reason").evaluate("el => el.validationMessage")  # a reason is asked for
    assert not UserBan.objects.exists()
    page.get_by_label("For").select_option(label="7 days")
    page.get_by_label("Reason").fill("Sharing links in spam")
    page.get_by_role("button", name="Ban", exact=True).click()
    page.wait_for_url(re.compile(rf"/botapp/telegramuser/{mallory.pk}/change/$"))
    page.get_by_text(f"Banned {mallory} for 7 days.").wait_for()
    page.get_by_text("Reason: Sharing links in spam").wait_for()
    ban = UserBan.objects.get(user=mallory)
    assert ban.reason == "Sharing links in spam"
    assert 6.9 < (ban.until - ban.created_at).total_seconds() / 86400 < 7.1

    page.get_by_role("link", name=re.compile(r"(^| )Unban…$")).click()
    page.get_by_role("button", name="Unban", exact=True).click()
    page.get_by_text("Not banned.").wait_for()
    assert not TelegramUser.objects.get(pk=mallory.pk).admin_banned

    page.get_by_role("link", name=re.compile(r"(^| )Ban…$")).click()
    page.get_by_label("For").select_option(label="Until lifted")
    page.get_by_label("Reason").fill("Abuse")
    page.get_by_role("button", name="Ban", exact=True).click()
    page.get_by_text("Banned until lifted").wait_for()
    assert UserBan.objects.filter(user=mallory, lifted_at__isnull=True).get().until is None


def test_row_16_the_sidebar_search_finds_users_by_id_and_name_and_files_by_share_id(logged_in):
    page = logged_in
    alice = TelegramUserFactory(telegram_id=777001, username="alice_w", first_name="Alice")
    stored = StoredFileFactory(title="Report", share_id="sh4reABC")
    page.goto("/")
    search = page.locator("#nav-filter")
    for typed, found, link in (
        ("777001", "@alice_w (777001)", f"/botapp/telegramuser/{alice.pk}/change/"),
        ("Alice", "@alice_w (777001)", f"/botapp/telegramuser/{alice.pk}/change/"),
        ("sh4reABC", "Report (start=sh4reABC)", f"/botapp/storedfile/{stored.pk}/change/"),
    ):
        search.fill("")
        search.press_sequentially(typed)  # the box asks as keys go up
        result = page.locator("#search-results a").filter(has_text=found)
        result.wait_for()
        assert result.get_attribute("href") == link
    for typed in ("zzz-nothing-here", "123456789012345678901234567890"):  # the long number is no id either
        search.fill("")
        search.press_sequentially(typed)
        page.locator("#search-nothing").get_by_text(f"Nothing found for “{typed}”").wait_for()
    search.fill("")
    search.press_sequentially("777001")
    page.locator("#search-results a").filter(has_text="@alice_w").click()
    page.wait_for_url(f"**/botapp/telegramuser/{alice.pk}/change/")


def test_row_17_bot_settings_come_in_sections_with_a_table_of_contents(logged_in):
    page = logged_in
    page.goto("/botapp/botsettings/")
    toc = page.locator("#settings-toc")
    names = toc.get_by_role("link").all_inner_texts()
    assert names[:3] == ["Delivery", "Token verification", "Verification in steps and its log"] and len(names) == 13
    assert page.locator("fieldset.module").count() >= 13
    toc.get_by_role("link", name="Texts").click()
    page.wait_for_url("**#texts")
    welcome = page.get_by_label("Welcome text")
    box = welcome.bounding_box()
    assert 0 <= box["y"] < page.viewport_size["height"]  # scrolled to the section
