"""The console driven as an operator drives it: the dashboard's numbers, a broadcast from
compose to done through a real Celery worker, the jobs page noticing a stopped worker, and the
settings form refusing a placeholder the bot does not fill. Screenshots for the README."""

import re
import signal
from datetime import timedelta

from botapp import clock
from botapp.models import BotSettings, Broadcast
from scheduler.jobs.registry import JOBS
from tests.browser.conftest import ADMIN, screenshot, wait_for
from tests.factories import BroadcastFactory, JobRunFactory, TelegramUserFactory, met_user


def test_the_dashboard_shows_the_numbers(logged_in):
    page = logged_in
    TelegramUserFactory.create_batch(4)
    TelegramUserFactory(state="blocked")
    TelegramUserFactory(state="stopped")
    page.goto("/")
    counts = {
        name: page.locator(f"[data-count={name}] .dash-number").inner_text()
        for name in ("total", "active", "blocked", "stopped", "new_today")
    }
    assert counts == {"total": "6", "active": "4", "blocked": "1", "stopped": "1", "new_today": "6"}
    assert page.locator("canvas.chart").count() == 2
    assert page.locator("[data-health='Database'] .dot.ok").count() == 1
    screenshot(page, "dashboard")


def test_a_broadcast_from_compose_to_done(logged_in, telegram, worker):
    page = logged_in
    met_user(telegram, telegram_id=ADMIN, username="boss")
    users = [met_user(telegram, telegram_id=5000 + i) for i in range(3)]

    page.goto("/botapp/broadcast/add/")
    page.get_by_label("Title").fill("Autumn sale")
    page.get_by_label("Text").fill("<b>50% off</b> today, <a href='https://shop.example'>in the shop</a>")
    page.get_by_label("Buttons").fill("Shop | https://shop.example")
    page.get_by_role("button", name="Save and continue editing").click()
    page.wait_for_url(re.compile(r"/botapp/broadcast/\d+/change/"))
    preview = page.locator(".courier-preview")
    assert preview.locator("b").inner_text() == "50% off"
    assert preview.get_by_role("link", name="Shop", exact=True).is_visible()
    assert preview.get_by_role("link", name="in the shop").get_attribute("href") == "https://shop.example"  # single quotes

    page.get_by_role("link", name="Send a test").click()
    page.get_by_role("button", name="Send the test").click()
    page.get_by_text(f"admin {ADMIN}: delivered").wait_for(timeout=30_000)  # the page polls by itself
    assert len(telegram.bot_messages(ADMIN)) == 1

    page.get_by_role("link", name="Start sending…").click()
    page.get_by_text("It goes now to 4 active users.").wait_for()  # the three users and the admin
    page.get_by_role("button", name="Send to 4 users").click()
    page.locator("#broadcast-live[data-status=done]").wait_for(timeout=60_000)
    assert page.locator("#broadcast-count").inner_text() == "4 / 4 (100%)"
    assert all(len(telegram.bot_messages(u.telegram_id)) == 1 for u in users)
    assert Broadcast.objects.get().status == "done"
    screenshot(page, "broadcast")


def test_a_large_broadcast_shows_its_preparation_and_cancels_during_it(logged_in, monkeypatch):
    """An audience too large to queue in the request: the page says a worker prepares the rest and
    shows how far it got, updating by itself; cancelled meanwhile, the worker makes no more rows
    and the operator is told the unprepared users will not get it either. (No worker runs here:
    the test plays its part, and the wake-up it would get is not published.)"""
    from botapp.services import broadcasts
    from botapp.signals import broadcast_queued
    from scheduler.receivers import broadcast_sender_wake

    monkeypatch.setattr(broadcasts, "START_ROWS", 2)
    broadcast_queued.disconnect(dispatch_uid="scheduler.broadcast_sender_wake")
    try:
        page = logged_in
        TelegramUserFactory.create_batch(7)
        broadcast = BroadcastFactory(title="Winter sale")
        page.goto(f"/botapp/broadcast/{broadcast.pk}/change/")
        page.get_by_role("link", name="Start sending…").click()
        page.get_by_role("button", name="Send to 7 users").click()
        page.get_by_text("the first 2 users (a worker is preparing the rest)").wait_for()
        assert (
            page.locator("#broadcast-preparing").inner_text()
            == "Recipients: preparing 2 users (a worker adds them while it sends)."
        )

        assert broadcasts._prepare_chunk(broadcast.pk, chunk=2) == (2, False)  # a worker's first chunk of the rest
        page.get_by_text("Recipients: preparing 4 of 7 users").wait_for()  # the page polls by itself

        page.get_by_role("link", name="Cancel…").click()
        page.get_by_text("4 users have not got it yet and will not get it, nor will the 3 users not prepared yet.").wait_for()
        page.get_by_role("button", name="Cancel sending").click()
        page.get_by_text("Cancelled; 4 users will not get it, nor will the 3 users not prepared yet.").wait_for()
        assert page.locator("#broadcast-status").inner_text() == "Cancelled"
        assert page.locator("#broadcast-preparing").count() == 0

        broadcasts.broadcasts_prepare(chunk=2)  # the worker's next turn: nothing more for a cancelled broadcast
        assert broadcast.deliveries.count() == 4
    finally:
        broadcast_queued.connect(broadcast_sender_wake, dispatch_uid="scheduler.broadcast_sender_wake")


def test_the_jobs_page_notices_a_stopped_worker(logged_in, worker):
    page = logged_in
    # Beat ran every job on time a moment ago, except delete_due_messages (due every minute).
    for name in JOBS:
        if name != "delete_due_messages":
            JobRunFactory(job=name, trigger="beat", processed=2, finished_at=clock.now() + timedelta(seconds=1))
    JobRunFactory(job="delete_due_messages", trigger="beat", started_at=clock.now() - timedelta(minutes=5))
    page.goto("/scheduler/backgroundjob/")
    assert page.locator("#worker-health").get_by_text("running", exact=True).is_visible()

    worker.send_signal(signal.SIGKILL)  # no clean shutdown: the heartbeat just stops
    worker.wait()

    def noticed():
        page.reload()
        return page.locator("#no-worker").count() == 1

    wait_for(noticed, timeout=15, what="the jobs page to notice the worker is gone")
    row = page.locator("tr[data-job=cleanup_tokens]")
    row.get_by_role("button", name="Run now").click()
    page.get_by_text("Queued cleanup_tokens, but no worker is running: it runs when one starts.").wait_for()
    assert page.locator("tr[data-job=cleanup_tokens]").get_by_text("queued", exact=True).is_visible()
    assert page.locator("tr.stale").count() == 1
    assert page.locator("tr[data-job=delete_due_messages]").get_by_text("stale", exact=True).is_visible()
    screenshot(page, "jobs")


def test_the_settings_form_refuses_a_placeholder_the_bot_does_not_fill(logged_in):
    page = logged_in
    page.goto("/botapp/botsettings/")
    page.get_by_label("Welcome text").fill("Hello {firstname}!")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("{firstname} is not a placeholder the bot fills").wait_for()
    page.get_by_label("Welcome text").fill("Hello {first_name}!")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("Bot settings saved").wait_for()
    assert BotSettings.load().welcome_text == "Hello {first_name}!"
