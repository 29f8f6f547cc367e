"""Two-factor log-in for console accounts (TOTP, django-otp): an authenticator app's six-digit code
after the password.

- Optional for every account: *Two-factor log-in* in the console sets it up (a QR code and the key,
  then one code to confirm) or turns it off (with a current code).
- An account that has it is asked for a code after its password, on every new log-in, before any
  console page or the API docs open (TwoFactorMiddleware).
- With TOTP_REQUIRED_FOR_SUPERUSERS on, a superuser without it is sent to the set-up page until it is
  on, and cannot turn it off.

Wrong codes slow the next tries down (django-otp's throttling: 1, 2, 4, 8 ... seconds).
"""

from __future__ import annotations

from base64 import b32encode

import segno
from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_http_methods
from django_otp import login as otp_login
from django_otp.plugins.otp_totp.models import TOTPDevice

from botapp.services.audit import audit_record

DEVICE_NAME = "Authenticator app"


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code from your authenticator app",
        max_length=8,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "autofocus": True}),
    )

    def clean_code(self):
        return self.cleaned_data["code"].replace(" ", "")


def totp_required(user) -> bool:
    """Whether this account must have two-factor log-in (superusers, when the operator says so)."""
    return bool(settings.TOTP_REQUIRED_FOR_SUPERUSERS and user.is_superuser)


def _device(user, *, confirmed: bool = True) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=confirmed).order_by("id").first()


def _code_checked(form: CodeForm, device: TOTPDevice) -> bool:
    """Whether the form's code is the device's now; the reason on the form when not."""
    allowed, data = device.verify_is_allowed()
    if not allowed:
        form.add_error("code", f"Too many wrong codes: try again in a few seconds. ({data.get('error_message', '')})".strip())
        return False
    if not device.verify_token(form.cleaned_data["code"]):
        form.add_error("code", "That code is not right (or already used). Wait for the next one and try again.")
        return False
    return True


def _next(request) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return wanted
    return reverse("admin:index")


@require_http_methods(["GET", "POST"])
@login_required(login_url="admin:login")
def totp_verify(request):
    """The second step of a log-in: the code, for an account that has two-factor log-in."""
    device = _device(request.user)
    if device is None or request.user.is_verified():
        return HttpResponseRedirect(_next(request))
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and _code_checked(form, device):
        otp_login(request, device)
        return HttpResponseRedirect(_next(request))
    return render(request, "two_factor_verify.html", {"form": form, "next": _next(request)}, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@login_required(login_url="admin:login")
def totp_setup(request):
    """The console page that turns two-factor log-in on (QR code, key, a code to confirm) or off."""
    user = request.user
    if not user.is_staff:
        return HttpResponseRedirect(reverse("admin:login"))
    confirmed = _device(user)
    form = CodeForm(request.POST or None)
    if confirmed is None:
        pending = _device(user, confirmed=False) or TOTPDevice.objects.create(user=user, name=DEVICE_NAME, confirmed=False)
        if request.method == "POST" and form.is_valid() and _code_checked(form, pending):
            pending.confirmed = True
            pending.save(update_fields=["confirmed"])
            TOTPDevice.objects.filter(user=user, confirmed=False).delete()
            otp_login(request, pending)
            audit_record(action="two_factor.enable", target=user)
            messages.success(request, "Two-factor log-in is on: each log-in now asks for a code from your app.")
            return HttpResponseRedirect(reverse("admin:index"))
        qr = segno.make(pending.config_url, error="m")
        context = {"state": "off", "qr": qr.svg_inline(scale=5, dark="#111", light="#fff"), "key": _key_text(pending)}
    else:
        if request.method == "POST" and totp_required(user):
            form.add_error(None, "Two-factor log-in is required for superusers here: it cannot be turned off.")
        elif request.method == "POST" and form.is_valid() and _code_checked(form, confirmed):
            TOTPDevice.objects.filter(user=user).delete()
            audit_record(action="two_factor.disable", target=user)
            messages.warning(request, "Two-factor log-in is off: your password alone logs you in.")
            return HttpResponseRedirect(reverse("admin:index"))
        context = {"state": "on"}
    context |= admin.site.each_context(request) | {"title": "Two-factor log-in", "form": form, "required": totp_required(user)}
    return render(request, "two_factor_setup.html", context, status=400 if form.errors else 200)


def _key_text(device: TOTPDevice) -> str:
    """The key as an app asks for it when typed in: base32, in groups of four."""
    key = b32encode(device.bin_key).decode().rstrip("=")
    return " ".join(key[i : i + 4] for i in range(0, len(key), 4))


class TwoFactorMiddleware:
    """Between a password log-in and the console: an account with two-factor log-in goes to the
    code page first; a superuser who must have it and does not goes to the set-up page. Requests
    with no console user (the API's tokens, the bot's links) pass as they are."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and user.is_staff and not user.is_verified():
            if redirect := self._redirect(request, user):
                return redirect
        return self.get_response(request)

    @staticmethod
    def _redirect(request, user) -> HttpResponseRedirect | None:
        path = request.path
        if path in (reverse("admin:logout"), reverse("admin:login"), reverse("totp_verify")):
            return None
        if _device(user) is not None:
            back = request.get_full_path() if request.method == "GET" else reverse("admin:index")
            return HttpResponseRedirect(f"{reverse('totp_verify')}?{urlencode({'next': back})}")
        if totp_required(user) and path != reverse("totp_setup"):
            return HttpResponseRedirect(reverse("totp_setup"))
        return None
