"""The console tells the truth at a glance (issue 48, rows 1, 2, 3, 4, 10 and 15): the Copy button
works under the Content-Security-Policy, a broadcast whose sends failed looks failed on its page,
in the list and on the dashboard (and says why), Send a test warns when no worker runs, Save lands
on the new broadcast's page, the jobs page follows a "Run now" by itself, and a stale tab's Start
on a finished broadcast gets a page saying why. Screenshot for the docs: broadcast-failures."""

import re
from datetime import timedelta

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery, SequenceMessage
from botapp.services.files import bot_username_record
from tests.browser.conftest import ADMIN, screenshot
from tests.factories import (
    BroadcastDeliveryFactory,
    BroadcastFactory,
    SequenceMessageFactory,
    SequenceStepFactory,
    StoredFileFactory,
    TelegramUserFactory,
)

FAILED = BroadcastDelivery.Status.FAILED


def finished_broadcast(title: str, *, outcomes: dict[str, list[str]], minutes_ago: int = 5) -> Broadcast:
    """A broadcast the sender finished `minutes_ago`, as it records one: a delivery per user with
    its status and error (`outcomes`: status -> the error of each row, "" for none), the counters
    to match."""
    counters = {"sent": "sent", "failed": "failed", "blocked": "blocked", "skipped": "skipped"}
    now = clock.now()
    broadcast = BroadcastFactory(
        title=title,
        status=Broadcast.Status.DONE,
        started_at=now - timedelta(minutes=minutes_ago + 1),
        finished_at=now - timedelta(minutes=minutes_ago),
        total=sum(len(rows) for rows in outcomes.values()),
        **{counters[status]: len(rows) for status, rows in outcomes.items()},
    )
    for status, errors in outcomes.items():
        for error in errors:
            BroadcastDeliveryFactory(broadcast=broadcast, status=status, error=error, sent_at=now if status == "sent" else None)
    return broadcast


def segment_widths(page, scope: str) -> dict[str, float]:
    """The outcome bar's coloured parts in `scope`: outcome -> share of the bar's width (%)."""
    return page.evaluate(
        "(scope) => { const bar = document.querySelector(scope + ' .courier-outcome-bar'); const w = bar.getBoundingClientRect().width;"
        " const out = {}; for (const s of bar.querySelectorAll('[data-outcome]'))"
        " out[s.dataset.outcome] = Math.round(100 * s.getBoundingClientRect().width / w); return out; }",
        scope,
    )


def test_the_copy_button_copies_a_stored_files_deep_link(logged_in):
    """Row 1: the Copy button's inline onclick was blocked by the console's own policy; the page
    fixture fails on the violation it logs."""
    page = logged_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    bot_username_record(username="courier_bot")
    stored = StoredFileFactory(title="Handbook")
    page.goto(f"/botapp/storedfile/{stored.pk}/change/")
    copy = page.get_by_role("button", name="Copy")
    copy.click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == f"https://t.me/courier_bot?start={stored.share_id}"

    page.goto("/botapp/storedfile/")  # the list's Copy too
    page.get_by_role("button", name="Copy").first.click()
    page.get_by_role("button", name="Copied").wait_for()


def test_a_broadcast_whose_sends_all_failed_looks_failed_and_says_why(logged_in):
    """Row 2: all 5 sends failed: no full purple "100 %" bar but a red one, the count a link to
    those deliveries, the most common error in one line, the list's outcome columns, and the
    dashboard keeping it with its result."""
    page = logged_in
    broadcast = finished_broadcast(
        "Spring sale",
        outcomes={FAILED: ["CHAT_WRITE_FORBIDDEN"] * 3 + ["USER_IS_BOT"] * 2},
    )
    page.goto(f"/botapp/broadcast/{broadcast.pk}/change/")
    assert page.locator("#broadcast-status").inner_text() == "Done: 0 of 5 delivered"
    assert segment_widths(page, "#broadcast-live") == {"failed": 100}
    assert page.locator("#broadcast-live .courier-why").inner_text() == "Why: CHAT_WRITE_FORBIDDEN (3 of the 5 failed)"
    page.locator("#broadcast-live").get_by_role("link", name="5 failed").click()
    page.wait_for_url(re.compile(r"/botapp/broadcastdelivery/\?"))
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 5 and all("Failed" in rows.nth(i).inner_text() for i in range(5))

    BroadcastFactory(title="Quiet draft")
    page.goto("/botapp/broadcast/")
    headers = [h.strip().lower() for h in page.locator("#result_list thead th").all_inner_texts()]
    assert {"sent", "failed", "blocked"} <= set(headers), headers
    row = page.get_by_role("row").filter(has_text="Spring sale")
    failed = row.locator("a.outcome-failed")
    assert failed.inner_text() == "5"
    failed.click()
    page.wait_for_url(re.compile(r"status__exact=failed"))
    assert page.locator("#result_list tbody tr").count() == 5

    page.goto("/")
    finished = page.locator(f".dash-finished[data-broadcast='{broadcast.pk}']")
    finished.locator(".courier-why").wait_for()  # the result, fetched when the dashboard loads
    assert "0 of 5 delivered" in finished.inner_text()
    assert finished.get_by_role("link", name="5 failed").is_visible()


def test_the_broadcast_with_failures_screenshot_and_the_dashboard_keeps_sequences_results(logged_in):
    """A mixed result (docs/screenshots/broadcast-failures.png), and the dashboard's sequences card:
    the last 24 hours' sent, failed and skipped per sequence, with why the failed ones failed. A
    broadcast finished longer ago than that has left the dashboard."""
    page = logged_in
    broadcast = finished_broadcast(
        "Autumn sale",
        outcomes={
            "sent": [""] * 7,
            FAILED: ["MEDIA_EMPTY: the media is not there"] * 2 + ["PEER_FLOOD"],
            "blocked": ["USER_IS_BLOCKED"],
            "skipped": ["the user sent /stop"],
        },
    )
    old = finished_broadcast("Last month's news", outcomes={"sent": [""]}, minutes_ago=60 * 25)
    note = finished_broadcast("Reminder", outcomes={"sent": [""] * 2}, minutes_ago=60)
    Broadcast.objects.filter(pk=note.pk).update(kind=Broadcast.Kind.MESSAGE)  # a scheduled message
    step = SequenceStepFactory(sequence__name="Welcome")
    now = clock.now()
    for _ in range(3):
        SequenceMessageFactory(step=step, status=SequenceMessage.Status.SENT, sent_at=now - timedelta(hours=1))
    SequenceMessageFactory(
        step=step, status=SequenceMessage.Status.FAILED, error="PEER_ID_INVALID", due_at=now - timedelta(hours=2)
    )
    SequenceMessageFactory(step=step, status=SequenceMessage.Status.FAILED, error="old", due_at=now - timedelta(hours=30))

    page.goto(f"/botapp/broadcast/{broadcast.pk}/change/")
    assert segment_widths(page, "#broadcast-live") == {"sent": 58, "failed": 25, "blocked": 8, "skipped": 8}
    assert page.locator("#broadcast-live .courier-outcome").inner_text() == (
        "7 sent · 3 failed · 1 blocked · 1 skipped · 0 interrupted · 0 not users"
    )
    assert "MEDIA_EMPTY: the media is not there (2 of the 3 failed)" in page.locator("#broadcast-live").inner_text()
    screenshot(page, "broadcast-failures")

    page.goto("/")
    kept = page.locator(f".dash-finished[data-broadcast='{note.pk}']")
    kept.locator(".courier-outcome").wait_for()
    assert "(scheduled message)" in kept.inner_text() and "2 sent" in kept.inner_text()
    assert page.locator(f".dash-finished[data-broadcast='{old.pk}']").count() == 0
    card = page.locator("#sequences-recent")
    assert card.locator(".courier-outcome").inner_text() == "3 sent · 1 failed · 0 skipped"
    assert card.locator(".courier-why").inner_text() == "Why: PEER_ID_INVALID (1 of the 1 failed)"
    card.get_by_role("link", name="1 failed").click()
    page.wait_for_url(re.compile(r"/botapp/sequencemessage/\?"))
    assert page.locator("#result_list tbody tr").count() == 1


def test_send_a_test_says_up_front_that_no_worker_runs(logged_in, settings):
    """Row 3: like Start and Run now, before the operator confirms, and after."""
    settings.ADMIN_IDS = str(ADMIN)
    page = logged_in
    broadcast = BroadcastFactory(title="Winter sale")
    page.goto(f"/botapp/broadcast/{broadcast.pk}/change/")
    page.get_by_role("link", name="Send a test").click()
    assert "No worker is running" in page.locator("#broker-warning").inner_text()
    page.get_by_role("button", name="Send the test").click()
    page.get_by_text("The test to 1 admin(s) waits: No worker is running").wait_for()
    assert "No worker is running: it is sent when one starts" in page.locator("#test-no-worker").inner_text()

    TelegramUserFactory()
    page.get_by_role("link", name="Start sending…").click()
    assert "No worker is running" in page.locator("#broker-warning").inner_text()


def test_saving_a_new_broadcast_lands_on_its_page(logged_in):
    """Row 4: where the preview, Send a test and Start are; not the list."""
    page = logged_in
    page.goto("/botapp/broadcast/add/")
    page.get_by_label("Title").fill("Summer sale")
    page.get_by_label("Text").fill("<b>Sun</b> is out")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(re.compile(r"/botapp/broadcast/\d+/change/$"))
    assert page.locator(".courier-preview b").inner_text() == "Sun"
    assert page.get_by_role("link", name="Send a test").is_visible()
    assert page.get_by_role("link", name="Start sending…").is_visible()
    page.get_by_text("“Summer sale” is saved as a draft").wait_for()


def test_the_jobs_page_follows_a_run_now_by_itself(logged_in, worker):
    """Row 10: queued, then the worker's run shows up without a reload."""
    page = logged_in
    page.goto("/scheduler/backgroundjob/")
    row = page.locator("tr[data-job=cleanup_tokens]")
    assert row.get_by_text("never").is_visible()
    page.evaluate("window.notReloaded = true")
    row.get_by_role("button", name="Run now").click()
    page.get_by_text("Queued cleanup_tokens").wait_for()
    page.evaluate("window.notReloaded = true")  # the POST's answer is a new page; from here no reload
    page.locator("tr[data-job=cleanup_tokens] .badge.ok").wait_for(timeout=30_000)
    assert "admin" in page.locator("tr[data-job=cleanup_tokens] td.when").first.inner_text()
    assert page.evaluate("window.notReloaded") is True
    page.locator("#jobs-live:not([hx-trigger])").wait_for(timeout=30_000)  # nothing waits any more: it stops asking


def test_a_stale_tabs_start_on_a_finished_broadcast_says_why_and_links_back(logged_in):
    """Row 15: the Start button of a page loaded while it was a draft, and the confirmation's
    button of a page loaded then, after the broadcast was sent meanwhile: a page saying so."""
    page = logged_in
    TelegramUserFactory()
    broadcast = BroadcastFactory(title="Black Friday")
    page.goto(f"/botapp/broadcast/{broadcast.pk}/change/")
    start = page.get_by_role("link", name="Start sending…")
    start.wait_for()
    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.DONE, finished_at=clock.now())
    with page.expect_response(re.compile(r"/start/$")) as answer:
        start.click()
    assert answer.value.status == 409
    page.get_by_text("“Black Friday” is done now").wait_for()
    assert "only a draft can be started" in page.locator("#content").inner_text()
    page.get_by_role("link", name="Back to the broadcast").click()
    page.wait_for_url(re.compile(rf"/botapp/broadcast/{broadcast.pk}/change/$"))
    assert page.get_by_role("link", name="Start sending…").count() == 0  # the page now offers what applies
    assert page.get_by_role("link", name="Duplicate as draft").is_visible()

    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.DRAFT, finished_at=None)
    page.goto(f"/botapp/broadcast/{broadcast.pk}/start/")
    Broadcast.objects.filter(pk=broadcast.pk).update(status=Broadcast.Status.CANCELLED, finished_at=clock.now())
    with page.expect_response(re.compile(r"/start/$")) as answer:
        page.get_by_role("button", name="Send to 1 user").click()
    assert answer.value.status == 409
    page.get_by_text("“Black Friday” is cancelled now").wait_for()
    assert Broadcast.objects.get(pk=broadcast.pk).status == Broadcast.Status.CANCELLED
