"""The console's frame (django-unfold, configured in config/settings.py UNFOLD): where "View site"
leads, the favicon, and the screens that are not the operators' business taken out of the way."""

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.models import Group, User
from django.templatetags.static import static
from django_otp.plugins.otp_totp.admin import TOTPDeviceAdmin
from django_otp.plugins.otp_totp.models import TOTPDevice
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm

from botapp.admin.base import ModelAdmin
from botapp.services.files import bot_username_cached


def site_url(request) -> str | None:
    """ "View site" opens the bot in Telegram: the console is the only web site. Hidden (None)
    until runbot has learnt the bot's username."""
    username = bot_username_cached()
    return f"https://t.me/{username}" if username else None


def favicon_url(request) -> str:
    return static("courier/favicon.svg")


def console_styles(request) -> str:
    """The console's own styles (the composer, phone widths, dark mode), after the theme's."""
    return static("courier/console.css")


def composer_script(request) -> str:
    """The composer's toolbar and live preview (static: the Content-Security-Policy allows no inline script)."""
    return static("courier/composer.js")


def console_script_url(request) -> str:
    """The console's own behaviour (Copy buttons): a static file, as the Content-Security-Policy
    allows no inline handler or script."""
    return static("courier/console.js")


# Operators are Django users; permissions are given per user, so groups only add a screen.
admin.site.unregister(Group)
admin.site.unregister(User)


@admin.register(User)
class OperatorAdmin(DjangoUserAdmin, ModelAdmin):
    form = UserChangeForm
    add_form = UserCreationForm
    change_password_form = AdminPasswordChangeForm


# Other apps' screens (django-axes' log-in attempts, django-otp's devices) on the theme's
# ModelAdmin: with Django's own, the theme's list shows no Run button for their actions.
def _themed(model, model_admin) -> None:
    admin.site.unregister(model)
    admin.site.register(model, type(model_admin.__name__, (model_admin, UnfoldModelAdmin), {}))


for _model, _admin in (
    (AccessAttempt, AccessAttemptAdmin),
    (AccessLog, AccessLogAdmin),
    (AccessFailureLog, AccessFailureLogAdmin),
    (TOTPDevice, TOTPDeviceAdmin),
):
    _themed(_model, _admin)
