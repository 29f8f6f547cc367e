"""The console never lets an operator type what Telegram, the bot or a job writes, and the two
former server errors answer with a page."""

import json

import pytest
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from botapp import views
from botapp.models import (
    BroadcastDelivery,
    ButtonClick,
    ChannelJoinRequest,
    DailyStat,
    DailyTokenCount,
    PendingBatch,
    PendingDeletion,
    SequenceMessage,
    StoredFile,
    TelegramUser,
    VerificationToken,
)
from scheduler.models import JobRun
from tests.conftest import STORAGE
from tests.factories import (
    BroadcastDeliveryFactory,
    DailyStatFactory,
    JobRunFactory,
    PendingDeletionFactory,
    TelegramUserFactory,
)

pytestmark = pytest.mark.django_db

INTERNAL = [
    DailyStat,
    BroadcastDelivery,
    PendingDeletion,
    VerificationToken,
    DailyTokenCount,
    ButtonClick,
    ChannelJoinRequest,
    SequenceMessage,
    PendingBatch,
    JobRun,
]


@pytest.fixture
def operator(client, django_user_model, plain_http):
    client.force_login(django_user_model.objects.create_superuser("op", "op@example.com", "pw"))
    return client


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.mark.parametrize("model", INTERNAL, ids=lambda m: m.__name__)
def test_internal_tables_have_no_add_and_no_edit(operator, rf, django_user_model, model):
    request = rf.get("/")
    request.user = django_user_model.objects.get(username="op")
    model_admin = admin.site._registry[model]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert model_admin.has_view_permission(request)
    refused = operator.get(url(model, "add"))
    assert refused.status_code == 403 and "Your account may not do this" in refused.content.decode()


def test_a_pending_deletion_cannot_be_changed_or_deleted(operator):
    deletion = PendingDeletionFactory()
    page = operator.get(url(PendingDeletion, "change", deletion.pk))
    assert page.status_code == 200  # viewable
    assert b'name="message_ids"' not in page.content
    assert operator.post(url(PendingDeletion, "change", deletion.pk), {"message_ids": "not json"}).status_code == 403
    assert operator.post(url(PendingDeletion, "delete", deletion.pk), {"post": "yes"}).status_code == 403
    assert PendingDeletion.objects.filter(pk=deletion.pk).exists()


def test_deliveries_and_day_totals_cannot_be_deleted_but_job_runs_can(operator):
    delivery, stat, run = BroadcastDeliveryFactory(), DailyStatFactory(), JobRunFactory()
    assert operator.post(url(BroadcastDelivery, "delete", delivery.pk), {"post": "yes"}).status_code == 403
    assert operator.post(url(DailyStat, "delete", stat.pk), {"post": "yes"}).status_code == 403
    assert operator.post(url(JobRun, "delete", run.pk), {"post": "yes"}).status_code == 302
    assert not JobRun.objects.filter(pk=run.pk).exists()


def test_telegram_users_cannot_be_added(operator):
    # Was a 500: Add was offered while telegram_id was read-only.
    assert operator.get(url(TelegramUser, "add")).status_code == 403
    assert operator.post(url(TelegramUser, "add"), {"state": "active"}).status_code == 403
    assert not TelegramUser.objects.exists()


def test_telegram_fields_and_join_date_are_read_only_while_the_ban_is_editable(operator):
    user = TelegramUserFactory(username="alice", first_name="Alice")
    page = operator.get(url(TelegramUser, "change", user.pk))
    form = page.context["adminform"].form
    for name in ("telegram_id", "username", "first_name", "last_name", "language_code", "start_payload", "joined_at", "state"):
        assert name not in form.fields, name
    assert "banned_until" in form.fields and "verified_until" in form.fields
    response = operator.post(
        url(TelegramUser, "change", user.pk),
        {
            "username": "mallory",
            "banned_until_0": "2030-01-01",
            "banned_until_1": "10:00:00",
            "verified_until_0": "",
            "verified_until_1": "",
        },
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.username == "alice" and user.banned_until.year == 2030


def test_a_huge_message_range_is_a_form_error_not_a_server_error(operator):
    # Was a 500 (MemoryError): the range was built before the 200-message limit was checked.
    response = operator.post(url(StoredFile, "add"), {"title": "x", "source_chat_id": STORAGE, "message_ids": "1-99999999999"})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["message_ids"]
    assert errors[0] == "A link holds at most 200 messages (got 99,999,999,999)."
    assert not StoredFile.objects.exists()


def test_several_ranges_count_together_against_the_limit(operator):
    response = operator.post(url(StoredFile, "add"), {"title": "x", "source_chat_id": STORAGE, "message_ids": "1-150, 201-300"})
    assert response.context["adminform"].form.errors["message_ids"][0] == "A link holds at most 200 messages (got 250)."
    response = operator.post(url(StoredFile, "add"), {"title": "x", "source_chat_id": STORAGE, "message_ids": "1-150, 201-250"})
    assert response.status_code == 302
    assert len(StoredFile.objects.get().message_ids) == 200


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ("99999999999999999999", "99999999999999999999 is not a Telegram message id (they go from 1 to 2,147,483,647)."),
        ("3, 3, 4", "Message 3 is listed twice: a link delivers each message once."),
        ("5-8, 7", "Message 7 is listed twice: a link delivers each message once."),
        ("abc", "'abc' is not a message id or a range like 10-20."),
    ],
)
def test_message_ids_telegram_cannot_deliver_are_one_clear_form_error(operator, typed, error):
    response = operator.post(url(StoredFile, "add"), {"title": "x", "source_chat_id": STORAGE, "message_ids": typed})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["message_ids"] == [error]  # one error, not the model's too
    assert not StoredFile.objects.exists()


def test_a_link_given_a_past_expiry_is_saved_and_said_to_have_expired(operator):
    response = operator.post(
        url(StoredFile, "add"),
        {"title": "Old", "source_chat_id": STORAGE, "message_ids": "5", "expires_at_0": "2020-01-01", "expires_at_1": "00:00:00"},
        follow=True,
    )
    assert "“Old” has expired already: its link answers that it has expired." in response.content.decode()
    assert StoredFile.objects.get().expires_at.year == 2020


def test_a_refusal_under_the_api_is_json_not_the_consoles_page(rf):
    response = views.permission_denied(rf.get("/api/v1/anything/"), PermissionDenied("Not yours."))
    assert response.status_code == 403
    assert json.loads(response.content) == {"detail": "Not yours."}
    assert json.loads(views.permission_denied(rf.get("/api/v1/x/"), PermissionDenied()).content)["detail"]
