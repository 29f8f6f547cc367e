"""Error reports (config/error_reports.py): with SENTRY_DSN set, a failed job run arrives once,
named by its job, with no token and nothing a user wrote; with no DSN nothing is sent."""

import dataclasses
import json

import pytest
import sentry_sdk
from sentry_sdk.transport import Transport

from config.error_reports import error_reports_init, scrub
from scheduler.jobs.registry import JOBS
from scheduler.models import JobRun
from scheduler.tasks import TASKS

TOKEN = "123456789:AAHfakeTokenOnlyForThisTest_abcdefgh"
USER_TEXT = "my secret diary entry"


class Capture(Transport):
    """Where the SDK's envelopes go instead of the network: the events, as JSON."""

    def __init__(self, options=None):
        super().__init__(options)
        self.events = []

    def capture_envelope(self, envelope):
        self.events += [item.payload.json for item in envelope.items if item.type == "event"]


@pytest.fixture
def reports(settings):
    settings.BOT_TOKEN = TOKEN
    capture = Capture()
    error_reports_init(dsn="https://public@errors.example/1", environment="test", transport=capture)
    yield capture.events
    sentry_sdk.init()  # no DSN: nothing is reported after this test


@pytest.fixture
def failing_job(monkeypatch):
    """cleanup_tokens fails the way a bug does: an exception whose message carries the token, with
    what a user wrote in its locals and in the log line before it."""

    def broken(*, gateway, dry_run):
        import logging

        text = USER_TEXT  # noqa: F841 - a local the report must not carry
        logging.getLogger("botapp.test").warning("about to fail, text=%s", USER_TEXT)
        raise RuntimeError(f"Telegram refused https://api.telegram.org/bot{TOKEN}/getMe (shortener api=k3y)")

    monkeypatch.setitem(JOBS, "cleanup_tokens", dataclasses.replace(JOBS["cleanup_tokens"], func=broken))


def test_a_failed_job_run_is_reported_once_with_its_job_name_and_no_secrets(db, reports, failing_job):
    result = TASKS["cleanup_tokens"].apply(kwargs={"trigger": "beat"})  # as a worker runs it

    assert result.failed()
    run = JobRun.objects.get(job="cleanup_tokens")
    assert run.status == JobRun.Status.FAILED
    (event,) = reports
    assert event["tags"]["job"] == "cleanup_tokens"
    assert event["contexts"]["job run"] == {"job": "cleanup_tokens", "run": run.pk, "trigger": "beat"}
    (exception,) = event["exception"]["values"]
    assert exception["type"] == "RuntimeError"
    assert exception["value"] == "Telegram refused https://api.telegram.org/bot[Filtered]/getMe (shortener api=[Filtered])"
    sent = json.dumps(event)
    for secret in (TOKEN, USER_TEXT, "k3y"):
        assert secret not in sent


def test_a_failed_job_run_from_a_command_is_reported_too(db, reports, failing_job):
    from django.core.management import call_command

    with pytest.raises(SystemExit) as exit:
        call_command("cleanup_tokens")

    assert exit.value.code == 1
    (event,) = reports
    assert event["tags"]["job"] == "cleanup_tokens"
    assert TOKEN not in json.dumps(event)


def test_without_a_dsn_nothing_is_reported(db, failing_job):
    assert getattr(sentry_sdk.get_client(), "transport", None) is None  # settings.py sets up nothing without SENTRY_DSN

    with pytest.raises(RuntimeError):
        TASKS["cleanup_tokens"].apply(kwargs={"trigger": "beat"}, throw=True)


def test_user_fields_and_secret_settings_are_scrubbed_anywhere_in_an_event(settings):
    settings.SECRET_KEY = "s" * 10 + "-the-signing-key-" + "t" * 30
    event = {
        "extra": {"update": {"user_id": 1001, "text": USER_TEXT, "first_name": "Alice"}},
        "breadcrumbs": {"values": [{"message": f"signing with {settings.SECRET_KEY}"}]},
    }

    cleaned = scrub(event)

    assert cleaned["extra"]["update"] == {"user_id": 1001, "text": "[Filtered]", "first_name": "[Filtered]"}
    assert cleaned["breadcrumbs"]["values"][0]["message"] == "signing with [Filtered]"


def test_an_unexpected_exception_in_a_handler_is_reported_with_its_update(reports, router, chat, alice, monkeypatch):
    def bug(msg):
        raise KeyError(f"no such thing: {msg.text}")

    monkeypatch.setattr(router, "_dispatch_message", bug)

    chat(alice, USER_TEXT)  # runbot's pump hands the update to the router

    (event,) = reports
    assert event["tags"]["update"] == "IncomingMessage"
    assert event["contexts"]["update"] == {
        "user_id": alice.id,
        "chat_id": alice.id,
        "message_id": event["contexts"]["update"]["message_id"],
    }
    assert event["logentry"]["message"] == "update failed user=%s"
    assert event["exception"]["values"][0]["type"] == "KeyError"
    assert event["exception"]["values"][0]["value"] == "'no such thing: [Filtered]'"
    assert USER_TEXT not in json.dumps(event)
