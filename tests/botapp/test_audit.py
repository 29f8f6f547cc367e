"""The audit trail: every operator action that changes what users get is recorded with who, when,
what and from where, whether it came from the console, the HTTP API, an admin's bot command or the
command line; the console lists it read only; it is pruned with the job runs."""

import getpass
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from botapp import clock
from botapp.models import AuditEntry, BotSettings
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastFactory, JobRunFactory, TelegramUserFactory
from tests.transcripts import said, sandbox

pytestmark = pytest.mark.django_db
OFFICE = {"REMOTE_ADDR": "203.0.113.9"}


def trail():
    return [(e.actor, e.via, e.address, e.action) for e in AuditEntry.objects.order_by("id")]


@pytest.fixture
def operator(client, django_user_model, plain_http):
    user = django_user_model.objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def test_starting_and_cancelling_a_broadcast_in_the_console_names_the_operator_and_their_address(operator):
    TelegramUserFactory.create_batch(3)
    broadcast = BroadcastFactory(title="Spring sale")
    operator.post(reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk]), **OFFICE)
    operator.post(reverse("admin:botapp_broadcast_cancel_sending", args=[broadcast.pk]), **OFFICE)

    assert trail() == [
        ("op", "console", "203.0.113.9", "broadcast.start"),
        ("op", "console", "203.0.113.9", "broadcast.cancel"),
    ]
    start = AuditEntry.objects.get(action="broadcast.start")
    assert start.target == f"broadcast {broadcast.pk}: Spring sale" and start.detail == "queued for 3 user(s)"
    assert abs(start.at - clock.now()) < timedelta(seconds=5)


def test_behind_a_proxy_the_address_is_the_one_login_throttling_trusts(operator, settings):
    settings.PROXY_COUNT = 1
    broadcast = BroadcastFactory()
    operator.post(
        reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk]),
        REMOTE_ADDR="10.0.0.2",
        HTTP_X_FORWARDED_FOR="not-an-address, 198.51.100.7",
    )
    assert trail() == [("op", "console", "198.51.100.7", "broadcast.start")]


def test_a_settings_change_and_a_deletion_in_the_console_are_recorded_with_what_changed(operator):
    conf = BotSettings.load()
    url = reverse("admin:botapp_botsettings_change", args=[conf.pk])
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    assert operator.post(url, data | {"welcome_text": "Welcome, {first_name}!"}, **OFFICE).status_code == 302

    draft = BroadcastFactory(title="Old draft")
    operator.post(reverse("admin:botapp_broadcast_delete", args=[draft.pk]), {"post": "yes"}, **OFFICE)

    assert trail() == [
        ("op", "console", "203.0.113.9", "botsettings.change"),
        ("op", "console", "203.0.113.9", "broadcast.delete"),
    ]
    change, deletion = AuditEntry.objects.order_by("id")
    assert "Welcome text" in change.detail or "welcome_text" in change.detail.lower()
    assert deletion.target == f"broadcast {draft.pk}: Old draft"


def test_an_api_client_made_in_the_console_is_recorded_once(operator):
    operator.post(reverse("admin:api_apiclient_add"), {"name": "crm", "scopes": "read", "rate": ""}, **OFFICE)
    [entry] = AuditEntry.objects.all()
    assert (entry.actor, entry.action) == ("op", "api_client.create")
    assert entry.target.startswith("API client") and "crm" in entry.target and "scopes read" in entry.detail


def test_an_api_client_is_named_as_the_actor_of_what_it_schedules_and_cancels(plain_http):
    from rest_framework.test import APIClient

    from api.clients import apiclient_create

    TelegramUserFactory()
    _, token = apiclient_create(name="crm", scopes="read,write")
    assert trail() == [(getpass.getuser(), "command", None, "api_client.create")]  # outside any request
    AuditEntry.objects.all().delete()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    send_at = (clock.now() + timedelta(hours=1)).isoformat()
    made = client.post("/api/v1/messages/", {"send_at": send_at, "recipients": "all", "text": "Hi"}, REMOTE_ADDR="198.51.100.20")
    client.post(f"/api/v1/messages/{made.json()['id']}/cancel/", REMOTE_ADDR="198.51.100.20")

    assert trail() == [
        ("api:crm", "api", "198.51.100.20", "message.schedule"),
        ("api:crm", "api", "198.51.100.20", "broadcast.cancel"),
    ]


def test_an_admins_bot_commands_are_recorded_as_that_admin(telegram, bot, gateway, conf):
    box = sandbox(telegram, bot, gateway)
    said(box, "1001: /start", "1000: /ban 1001 2h spam", "1000: /unban 1001", "1000: /addpremium 1001 30d")

    assert trail() == [
        ("telegram:1000", "bot", None, "user.ban"),
        ("telegram:1000", "bot", None, "user.unban"),
        ("telegram:1000", "bot", None, "premium.grant"),
    ]
    assert "reason: spam" in AuditEntry.objects.get(action="user.ban").detail


def test_an_import_from_the_command_line_names_the_os_user_and_a_dry_run_nothing(tmp_path):
    path = tmp_path / "users.csv"
    path.write_text("user_id,username\n101,ann\n102,bob\n")
    call_command("import_users", str(path), "--dry-run", stdout=StringIO())
    assert trail() == []

    call_command("import_users", str(path), stdout=StringIO())
    [entry] = AuditEntry.objects.all()
    assert (entry.actor, entry.via, entry.address, entry.action) == (getpass.getuser(), "command", None, "import.users")
    assert "2" in entry.detail


def test_the_console_lists_the_trail_searchable_filterable_and_read_only(operator):
    broadcast = BroadcastFactory(title="Spring sale")
    operator.post(reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk]), **OFFICE)
    AuditEntry.objects.create(actor="telegram:1000", via="bot", action="user.ban", target="telegram user 5: ann")
    url = reverse("admin:botapp_auditentry_changelist")

    def listed(**query):
        response = operator.get(url, query)
        assert response.status_code == 200
        return [e.action for e in response.context["cl"].result_list]

    assert listed() == ["user.ban", "broadcast.start"]  # newest first
    assert "203.0.113.9" in operator.get(url).content.decode()
    assert listed(q="Spring") == ["broadcast.start"]
    assert listed(q="telegram:1000") == ["user.ban"]
    assert listed(via__exact="bot") == ["user.ban"]
    assert listed(action="broadcast.start") == ["broadcast.start"]

    entry = AuditEntry.objects.first()
    assert operator.get(reverse("admin:botapp_auditentry_add")).status_code == 403
    assert operator.post(reverse("admin:botapp_auditentry_change", args=[entry.pk]), {"actor": "x"}).status_code == 403
    assert operator.post(reverse("admin:botapp_auditentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk, actor=entry.actor).exists()


def test_audit_entries_are_pruned_with_the_job_runs(settings):
    settings.JOB_RUN_RETENTION_DAYS = 30
    old = AuditEntry.objects.create(actor="op", via="console", action="broadcast.start", at=clock.now() - timedelta(days=31))
    kept = AuditEntry.objects.create(actor="op", via="console", action="broadcast.cancel", at=clock.now() - timedelta(days=29))
    JobRunFactory(job="cleanup_tokens", started_at=clock.now() - timedelta(days=40))

    run = job_run("prune_job_runs", trigger="test")

    assert set(AuditEntry.objects.values_list("pk", flat=True)) == {kept.pk}
    assert not AuditEntry.objects.filter(pk=old.pk).exists()
    assert "1 audit entries" in run.detail
