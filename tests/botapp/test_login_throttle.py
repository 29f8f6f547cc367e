"""Login throttling (django-axes): a run of wrong passwords locks one user name from one address
out of the admin for a while, and a run of wrong passwords across user names locks the address;
the reason and the time log-in opens again are on the login page; the right password does not get
through until then; the lock can be lifted by command."""

import pytest
from django.core import checks
from django.core.management import call_command
from django.db.models import F
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOCKED = "Too many failed log-ins with this user name from your address"
ADDRESS_LOCKED = "Too many failed log-ins from your address"


@pytest.fixture
def operator(django_user_model, plain_http):
    return django_user_model.objects.create_superuser("op", "op@example.com", "right-pw")


def log_in(client, password, username="op", **extra):
    return client.post(reverse("admin:login"), {"username": username, "password": password}, **extra)


def logged_in(client):
    return client.get(reverse("admin:index")).status_code == 200


def cool_off_passes(settings):
    """The stored attempts move back by the cool-off, as if that much time had gone by."""
    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME)


def test_thirty_wrong_passwords_lock_the_login_until_the_cool_off(client, operator, settings):
    from axes.models import AccessAttempt

    settings.AXES_FAILURE_LIMIT = 5
    answers = [log_in(client, f"guess-{n}") for n in range(30)]

    assert [r.status_code for r in answers] == [200] * 4 + [429] * 26
    assert "Please enter the correct username and password" in answers[3].content.decode()
    page = answers[-1].content.decode()
    assert LOCKED in page and "locked until" in page and "even with the right password" in page
    assert 'name="username"' in page  # the login page itself, not a bare error text
    assert AccessAttempt.objects.get().failures_since_start == 5  # attempts while locked are refused, not counted

    refused = log_in(client, "right-pw")
    assert refused.status_code == 429 and LOCKED in refused.content.decode()
    assert not logged_in(client)

    cool_off_passes(settings)
    assert log_in(client, "right-pw").status_code == 302
    assert logged_in(client)


def test_a_lock_holds_one_user_name_from_one_address(client, operator, settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 3
    django_user_model.objects.create_superuser("other", "other@example.com", "other-pw")
    for n in range(3):
        log_in(client, f"guess-{n}", REMOTE_ADDR="203.0.113.9")

    assert log_in(client, "right-pw", REMOTE_ADDR="203.0.113.9").status_code == 429
    assert log_in(client, "other-pw", username="other", REMOTE_ADDR="203.0.113.9").status_code == 302
    assert log_in(client, "right-pw", REMOTE_ADDR="198.51.100.7").status_code == 302  # the operator elsewhere


def test_behind_a_proxy_the_address_comes_from_x_forwarded_for(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.PROXY_COUNT = 1
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for n in range(3):  # an attacker who also writes a forged address of their own
        log_in(client, f"guess-{n}", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.9", **proxy)

    assert log_in(client, "right-pw", HTTP_X_FORWARDED_FOR="203.0.113.9", **proxy).status_code == 429
    assert log_in(client, "right-pw", HTTP_X_FORWARDED_FOR="198.51.100.7", **proxy).status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(3):
        log_in(client, "typo")
        log_in(client, "typo")
        assert log_in(client, "right-pw").status_code == 302
        client.logout()


def test_the_reset_command_lifts_a_lock(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for n in range(3):
        log_in(client, f"guess-{n}")
    assert log_in(client, "right-pw").status_code == 429

    call_command("axes_reset_username", "op")

    assert log_in(client, "right-pw").status_code == 302


def test_throttling_is_set_up_as_django_axes_expects():
    """Its own checks: middleware, backend, a handler every gunicorn worker shares, the address in the key."""
    assert [m.id for m in checks.run_checks() if m.id.startswith("axes")] == []


def test_a_lock_out_without_a_login_page_gets_a_page_of_its_own(rf, operator):
    from botapp.views import login_locked_out

    request = rf.post("/elsewhere/", {"username": "op"})
    response = login_locked_out(request, None, {"username": "op"})

    assert response.status_code == 429
    assert LOCKED in response.content.decode() and "for 30 minutes" in response.content.decode()


def test_logging_in_at_the_login_page_lands_on_the_console(client, operator):
    response = log_in(client, "right-pw")  # /login/ opened by hand: no ?next=
    assert response.status_code == 302 and response.url == reverse("admin:index")
    assert logged_in(client)


def test_password_spraying_20_names_4_passwords_from_one_address_is_locked_at_the_address_limit(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 20
    spray = {"REMOTE_ADDR": "203.0.113.9"}
    answers = [log_in(client, f"guess-{p}", username=f"name-{n}", **spray) for p in range(4) for n in range(20)]

    assert [r.status_code for r in answers] == [200] * 19 + [429] * 61
    page = answers[-1].content.decode()
    assert ADDRESS_LOCKED in page and "every user name" in page and "locked until" in page
    cool_off = settings.AXES_COOLOFF_TIME.total_seconds()  # from the 20th failure, counted down since
    assert cool_off - 30 <= int(answers[-1]["Retry-After"]) <= int(answers[19]["Retry-After"]) <= cool_off
    assert log_in(client, "right-pw", **spray).status_code == 429  # the operator too, from that address
    assert log_in(client, "right-pw", REMOTE_ADDR="198.51.100.7").status_code == 302  # not from elsewhere

    cool_off_passes(settings)
    assert log_in(client, "right-pw", **spray).status_code == 302


def test_variants_of_one_user_name_share_one_counter(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 100
    # What the login form makes of them (surrounding spaces, Unicode compatibility forms): "op".
    variants = ["op", " op", "op ", "\uff4f\uff50", "\uff4fp"]
    answers = [log_in(client, f"guess-{n}", username=name) for n, name in enumerate(variants)]

    assert [r.status_code for r in answers] == [200] * 4 + [429]
    assert LOCKED in answers[-1].content.decode()
    assert log_in(client, "right-pw").status_code == 429


def test_a_success_from_the_address_does_not_wipe_the_other_names_failures(client, operator, settings):
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 8
    for n in range(4):
        log_in(client, "guess", username=f"name-{n}")
    for _ in range(3):
        log_in(client, "typo")
    assert log_in(client, "right-pw").status_code == 302  # its own 3 failures are forgiven
    client.logout()

    answers = [log_in(client, "guess", username=f"other-{n}") for n in range(5)]
    assert [r.status_code for r in answers] == [200] * 3 + [429] * 2  # 4 + 4th new one = 8


def test_the_address_lock_page_says_until_when_by_the_oldest_failure_that_still_counts(client, operator, settings):
    from datetime import timedelta

    from axes.models import AccessAttempt

    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 4
    for n in range(3):
        log_in(client, "guess", username=f"name-{n}")
    # The first failures were 10 minutes ago: when they age out, the address is below the limit.
    AccessAttempt.objects.filter(username__in=["name-0", "name-1"]).update(attempt_time=F("attempt_time") - timedelta(minutes=10))
    locked = log_in(client, "guess", username="name-3")

    assert locked.status_code == 429
    retry = int(locked["Retry-After"])
    assert settings.AXES_COOLOFF_TIME.total_seconds() - 600 - 5 <= retry <= settings.AXES_COOLOFF_TIME.total_seconds() - 600
