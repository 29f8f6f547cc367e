"""Two-factor log-in (TOTP, django-otp): optional for every console account, asked after the
password before any console page opens, required of superusers when the operator says so."""

import re
import time
from base64 import b32decode

import pytest
from django.urls import reverse
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from botapp.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(django_user_model, plain_http):
    return django_user_model.objects.create_superuser("op", "op@example.com", "right-pw")


def log_in(client, password="right-pw", username="op"):
    return client.post(reverse("admin:login"), {"username": username, "password": password})


def code_for(device, *, steps_ahead=0):
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():06d}"


def set_up(client):
    """Turn two-factor log-in on through the set-up page, as an operator would; the device."""
    page = client.get(reverse("totp_setup")).content.decode()
    key = re.search(r'id="two-factor-key"[^>]*>([A-Z2-7 ]+)<', page).group(1).replace(" ", "")
    device = TOTPDevice.objects.get(confirmed=False)
    assert b32decode(key + "=" * (-len(key) % 8)) == device.bin_key  # the key shown is the device's
    assert "<svg" in page  # the QR code, drawn inline (no image request the CSP could refuse)
    assert client.post(reverse("totp_setup"), {"code": code_for(device)}).status_code == 302
    device.refresh_from_db()
    return device


def test_an_account_without_two_factor_logs_in_with_its_password_alone(client, operator):
    assert log_in(client).status_code == 302
    assert client.get(reverse("admin:index")).status_code == 200


def test_turned_on_the_console_asks_for_a_code_after_the_password(client, operator):
    log_in(client)
    device = set_up(client)
    assert device.confirmed
    assert AuditEntry.objects.filter(action="two_factor.enable", actor="op").exists()
    client.post(reverse("admin:logout"))

    assert log_in(client).status_code == 302
    index = client.get(reverse("admin:index"))
    assert index.status_code == 302 and index.url.startswith(reverse("totp_verify"))
    assert client.get("/api/v1/docs/").status_code == 302  # the API docs too
    assert client.get(reverse("admin:botapp_broadcast_changelist")).status_code == 302

    wrong = client.post(reverse("totp_verify"), {"code": "000000", "next": "/botapp/broadcast/"})
    assert wrong.status_code == 400 and "not right" in wrong.content.decode()
    assert client.get(reverse("admin:index")).status_code == 302

    device.refresh_from_db()
    device.throttling_failure_count = 0  # the wrong code's pause, as if it had passed
    device.save()
    right = client.post(reverse("totp_verify"), {"code": code_for(device, steps_ahead=1), "next": "/botapp/broadcast/"})
    assert right.status_code == 302 and right.url == "/botapp/broadcast/"
    assert client.get(reverse("admin:index")).status_code == 200


def test_wrong_codes_slow_the_next_tries_even_a_right_one(client, operator):
    log_in(client)
    device = set_up(client)
    client.post(reverse("admin:logout"))
    log_in(client)
    client.post(reverse("totp_verify"), {"code": "000000"})
    refused = client.post(reverse("totp_verify"), {"code": code_for(device, steps_ahead=1)})
    assert refused.status_code == 400 and "Too many wrong codes" in refused.content.decode()
    assert client.get(reverse("admin:index")).status_code == 302


def test_it_is_turned_off_with_a_current_code_only(client, operator):
    log_in(client)
    device = set_up(client)
    assert client.post(reverse("totp_setup"), {"code": "000000"}).status_code == 400
    assert TOTPDevice.objects.filter(confirmed=True).exists()
    device.refresh_from_db()
    device.throttling_failure_count = 0
    device.save()
    assert client.post(reverse("totp_setup"), {"code": code_for(device, steps_ahead=1)}).status_code == 302
    assert not TOTPDevice.objects.exists()
    assert AuditEntry.objects.filter(action="two_factor.disable").exists()


def test_required_for_superusers_sends_one_without_it_to_the_set_up_and_keeps_it_on(
    client, operator, settings, django_user_model
):
    settings.TOTP_REQUIRED_FOR_SUPERUSERS = True
    log_in(client)
    index = client.get(reverse("admin:index"))
    assert index.status_code == 302 and index.url == reverse("totp_setup")
    assert "required for superusers" in client.get(reverse("totp_setup")).content.decode()

    device = set_up(client)
    assert client.get(reverse("admin:index")).status_code == 200
    refused = client.post(reverse("totp_setup"), {"code": code_for(device, steps_ahead=1)})
    assert refused.status_code == 400 and TOTPDevice.objects.filter(confirmed=True).exists()

    # Staff who are not superusers may still go without.
    django_user_model.objects.create_user("helper", password="helper-pw", is_staff=True)
    client.post(reverse("admin:logout"))
    log_in(client, "helper-pw", "helper")
    assert client.get(reverse("admin:index")).status_code == 200


def test_the_code_page_sends_nobody_elsewhere(client, operator):
    log_in(client)
    set_up(client)
    client.post(reverse("admin:logout"))
    log_in(client)
    page = client.get(reverse("totp_verify"), {"next": "https://evil.example/"})
    assert 'value="https://evil.example/"' not in page.content.decode()
