"""Every control works under the Content-Security-Policy (issue 48, scope 2): logged in as a
superuser, with representative data (a broadcast with failures, a stored file, a sequence with
steps, scheduled messages, job runs, users banned and premium, ...), the walk opens every console
page (every admin list, change form, add form and history, the dashboard, the jobs page, the
confirmation pages, two-factor set-up, the API docs) and clicks the console's controls: Copy, Run
now, Send a test, Start, Cancel, Duplicate, Revoke stream links and every list action, on
throwaway rows. It fails on any Content-Security-Policy violation (the page's
securitypolicyviolation events, and the console's own report of them), any console error and any
JavaScript error, in light and dark mode, at 1400 px and at 390 px."""

import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse
from django_celery_beat.models import PeriodicTask

from botapp import clock
from botapp.models import AuditEntry, Broadcast, BroadcastClaim, BroadcastDelivery, SequenceMessage
from botapp.services.files import bot_username_record
from scheduler.models import JobRun
from tests.browser.conftest import ADMIN, PASSWORD
from tests.factories import (
    AdminCommandFactory,
    ApiClientFactory,
    BroadcastAttachmentFactory,
    BroadcastDeliveryFactory,
    BroadcastFactory,
    ButtonClickFactory,
    DailyStatFactory,
    DailyTokenCountFactory,
    ForceSubChannelFactory,
    JobRunFactory,
    PendingDeletionFactory,
    PremiumPlanFactory,
    SequenceMessageFactory,
    SequenceStepFactory,
    StoredFileFactory,
    TelegramUserFactory,
    UserBanFactory,
    VerificationTokenFactory,
)

# Reports every violation as it happens (Playwright's init scripts run whatever the page's policy).
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) =>
  window.cspViolation(`${location.pathname}: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} ${e.sample || ""}`));
"""
CUSTOM_PAGES = ("/", "/scheduler/backgroundjob/", "/account/two-factor/", "/api/v1/docs/")


def representative_data() -> dict:
    """A console in use: what each page lists, and the throwaway rows the walk acts on."""
    now = clock.now()
    bot_username_record(username="courier_bot")
    users = TelegramUserFactory.create_batch(3)
    UserBanFactory(reason="spam")
    PremiumPlanFactory()
    stored = StoredFileFactory(title="Handbook")
    failed = BroadcastFactory(title="Spring sale", status="done", total=3, sent=1, failed=2, started_at=now, finished_at=now)
    BroadcastDeliveryFactory(broadcast=failed, user=users[0], status="sent", sent_at=now)
    for user in users[1:]:
        BroadcastDeliveryFactory(broadcast=failed, user=user, status="failed", error="USER_IS_BOT")
    sending = BroadcastFactory(title="Being sent", status="sending", total=3, sent=1, started_at=now)
    BroadcastDeliveryFactory(broadcast=sending, user=users[0], status=BroadcastDelivery.Status.PENDING)
    BroadcastClaim.objects.create(
        broadcast=sending, first_id=1, last_id=3, claimed_at=now, lease_until=now + timedelta(minutes=5)
    )
    message = BroadcastFactory(title="Tomorrow's note", kind="message", status="scheduled", scheduled_at=now + timedelta(days=1))
    BroadcastAttachmentFactory(broadcast=message, file_name="note.pdf", kind="document")
    step = SequenceStepFactory(sequence__name="Welcome", buttons="Join | https://t.me/+abc")
    SequenceStepFactory(sequence=step.sequence, delay_seconds=3600, condition="not_clicked", condition_button="joined")
    SequenceMessageFactory(step=step, user=users[0], status=SequenceMessage.Status.SENT, sent_at=now)
    SequenceMessageFactory(step=step, user=users[1], status=SequenceMessage.Status.FAILED, error="PEER_ID_INVALID")
    SequenceMessageFactory(step=step, user=users[2])
    JobRunFactory(job="send_broadcasts", processed=3, detail="1 broadcast(s): 1 sent, 0 blocked, 2 failed")
    JobRunFactory(job="delete_due_messages", status=JobRun.Status.FAILED, error="RuntimeError: boom")
    ButtonClickFactory(user=users[0])
    VerificationTokenFactory()
    DailyTokenCountFactory()
    DailyStatFactory()
    PendingDeletionFactory()
    ForceSubChannelFactory()
    AdminCommandFactory()
    ApiClientFactory(name="shop")
    AuditEntry.objects.create(at=now, actor="operator", via="console", action="broadcast.start", target="broadcast 1")
    return {"stored": stored, "failed": failed}


def console_pages(superuser) -> list[str]:
    """Every registered model's list, add form (where adding is allowed), first row's change form and
    history, then the console's own pages."""
    request = RequestFactory().get("/")
    request.user = superuser
    pages = []
    for model, model_admin in admin.site._registry.items():
        info = (model._meta.app_label, model._meta.model_name)
        if not model_admin.has_view_or_change_permission(request):
            continue
        pages.append(reverse("admin:{}_{}_changelist".format(*info)))
        if model_admin.has_add_permission(request):
            pages.append(reverse("admin:{}_{}_add".format(*info)))
        first = model_admin.get_queryset(request).order_by("pk").first()
        if first is not None:
            for view in ("change", "history"):
                try:
                    pages.append(reverse(f"admin:{info[0]}_{info[1]}_{view}", args=[first.pk]))
                except NoReverseMatch:  # a singleton (Bot settings) has its own address
                    pass
    return sorted(set(pages)) + list(CUSTOM_PAGES)


@pytest.fixture
def walker(browser, live_server, operator_account, request):
    """A tab in the mode and width asked, logged in, recording what went wrong on any page."""
    scheme, width = request.param
    context = browser.new_context(
        viewport={"width": width, "height": 900 if width > 600 else 844},
        is_mobile=width < 600,
        color_scheme=scheme,
        base_url=live_server.url,
        accept_downloads=True,
    )
    context.set_default_timeout(15_000)
    problems = []
    context.expose_function("cspViolation", lambda text: problems.append(f"CSP violation: {text}"))
    context.add_init_script(REPORT_VIOLATIONS)
    tab = context.new_page()
    tab.on("pageerror", lambda exc: problems.append(f"JavaScript error on {tab.url}: {exc}"))
    tab.on("console", lambda m: m.type == "error" and problems.append(f"console error on {tab.url}: {m.text}"))
    tab.goto("/login/")
    tab.get_by_label("Username").fill(operator_account.username)
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url("**/")
    assert tab.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
    yield tab, problems
    context.close()


def visit(tab, path: str) -> None:
    response = tab.goto(path)
    if tab.locator("[hx-trigger=load]").count():  # parts fetched once the page is there (the dashboard's)
        tab.wait_for_load_state("networkidle")
    assert response.status == 200, f"{path} answered {response.status}"


def click_action(tab, name: str) -> None:
    """An action of an object's page (the links at the top right); below 1024 px they are behind
    the "more" button, as an operator on a phone finds them."""
    more = tab.locator("a:has(> span.material-symbols-outlined:text-is('more_horiz'))")
    if more.count() and more.first.is_visible():
        more.first.click()
    with tab.expect_navigation():
        tab.get_by_role("link", name=name).first.click()


def run_list_actions(tab, path: str) -> int:
    """Every action of the list at `path`, each on its first row; returns how many ran."""
    visit(tab, path)
    select = tab.locator("select[name=action]")
    if select.count() == 0 or tab.locator("#result_list tbody tr").count() == 0:
        return 0
    names = [v for v in select.first.locator("option").evaluate_all("os => os.map(o => o.value)") if v]
    for name in names:
        visit(tab, path)
        tab.locator("#result_list tbody tr").first.locator("input[name=_selected_action]").check()
        tab.locator("select[name=action]").first.select_option(name)
        run = tab.get_by_role("button", name="Run")
        run.wait_for()  # shown once an action is chosen
        if name == "export_csv":
            with tab.expect_download():
                run.click()
        else:
            with tab.expect_navigation() as answer:
                run.click()
            assert answer.value.status == 200, f"{path} {name} answered {answer.value.status}"
    return len(names)


@pytest.mark.parametrize(
    "walker",
    [("light", 1400), ("dark", 1400), ("light", 390), ("dark", 390)],
    ids=["light-1400", "dark-1400", "light-390", "dark-390"],
    indirect=True,
)
def test_every_console_page_and_control_works_under_the_policy(walker, operator_account, settings):
    tab, problems = walker
    settings.ADMIN_IDS = str(ADMIN)
    data = representative_data()

    pages = console_pages(operator_account)
    for path in pages:
        visit(tab, path)
    assert len(pages) > 80, pages  # every model's pages were found

    # celery-beat's schedule form: the crontab in words, from a static file instead of its inline script.
    task = PeriodicTask.objects.filter(crontab__isnull=False).order_by("pk").first()
    visit(tab, f"/django_celery_beat/periodictask/{task.pk}/change/")
    assert tab.locator(".crontab-in-words").inner_text() == f"In words: {task.crontab.human_readable}"

    # Copy (a stored file's deep link), and Revoke stream links' confirmation.
    visit(tab, f"/botapp/storedfile/{data['stored'].pk}/change/")
    tab.get_by_role("button", name="Copy").click()
    tab.get_by_role("button", name="Copied").wait_for()
    click_action(tab, "Revoke stream links")
    tab.get_by_role("button", name="Revoke the links").click()
    tab.get_by_text("no longer works").wait_for()

    # Run now on the jobs page (no worker here: it waits in the queue, and the page says so).
    visit(tab, "/scheduler/backgroundjob/")
    run_now = tab.locator("tr[data-job=cleanup_tokens]").get_by_role("button", name="Run now")
    run_now.click()  # at 390 px too: there the jobs table is a card per job, Run now on screen
    tab.get_by_text("Queued cleanup_tokens").wait_for()

    # A throwaway draft: Send a test, Start, Cancel, Duplicate; and the broadcast with failures.
    draft = BroadcastFactory(title="Throwaway")
    visit(tab, f"/botapp/broadcast/{draft.pk}/change/")
    click_action(tab, "Send a test")
    tab.get_by_role("button", name="Send the test").click()
    tab.get_by_text("The test to 1 admin(s)").wait_for()
    click_action(tab, "Start sending…")
    tab.get_by_role("button", name=re.compile(r"^Send to \d+ users?$")).click()
    tab.locator("#broadcast-live[data-status=sending], #broadcast-live[data-status=queued]").wait_for()
    click_action(tab, "Cancel…")
    tab.get_by_role("button", name="Cancel sending").click()
    tab.locator("#broadcast-status").get_by_text("Cancelled").wait_for()
    click_action(tab, "Duplicate as draft")
    tab.get_by_role("button", name="Create the draft").click()
    tab.get_by_text("is a new draft").wait_for()
    assert Broadcast.objects.filter(title__startswith="Throwaway", status="draft").exists()  # the copy
    visit(tab, f"/botapp/broadcast/{data['failed'].pk}/change/")
    tab.locator("#broadcast-live").get_by_role("link", name="2 failed").click()
    tab.wait_for_url(re.compile(r"/botapp/broadcastdelivery/\?"))

    # Every list action, on the first row of its list.
    ran = sum(run_list_actions(tab, path) for path in pages if path.endswith("/") and path.count("/") == 3)
    assert ran >= 8, ran  # the console's own (ban, unban, …, revoke) and the deletes

    assert problems == [], "\n".join(problems)
