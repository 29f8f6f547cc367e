"""Login throttling on top of django-axes: two locks, each counted in the database.

- One user name from one address (axes' own, AXES_LOCKOUT_PARAMETERS): LOGIN_FAILURE_LIMIT failures
  lock that pair. The name is the one the login form cleaned (spaces around it and Unicode
  compatibility forms folded), so its variants share one counter.
- One address across user names (here): LOGIN_ADDRESS_FAILURE_LIMIT failures, whatever names they
  tried, lock the address for every name. Password spraying (a few guesses at each of many names)
  never reaches the first limit; it reaches this one.

Both count the failures of the last LOGIN_COOLOFF_MINUTES; a lock lifts when enough of them are
older than that. A successful log-in forgives only its own name's failures from that address, so a
valid account cannot be used to wipe the count of the names sprayed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from axes.signals import user_locked_out
from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone


@dataclass(frozen=True)
class Lock:
    """Why log-in is refused, and when it opens again."""

    by_address: bool  # across user names; False: this user name from this address
    until: datetime


def _opens_at(attempts: QuerySet, limit: int, since: datetime) -> datetime | None:
    """When the failures counted since `since` drop below `limit` (None: they are below it now):
    the newest failures are kept longest, so it is when the one that brings the count to the
    limit, counting from the newest, ages out."""
    counted = 0
    for attempt_time, failures in (
        attempts.filter(attempt_time__gte=since).order_by("-attempt_time").values_list("attempt_time", "failures_since_start")
    ):
        counted += failures
        if counted >= limit:
            return attempt_time + settings.AXES_COOLOFF_TIME
    return None


def login_lock(*, username: str | None, ip_address: str | None, now: datetime | None = None) -> Lock | None:
    """The lock on a log-in with this user name from this address, if any (the later to lift
    when both hold)."""
    now = now or timezone.now()
    since = now - settings.AXES_COOLOFF_TIME
    from_address = AccessAttempt.objects.filter(ip_address=ip_address)
    locks = []
    if (until := _opens_at(from_address.filter(username=username), settings.AXES_FAILURE_LIMIT, since)) is not None:
        locks.append(Lock(by_address=False, until=until))
    if (until := _opens_at(from_address, settings.LOGIN_ADDRESS_FAILURE_LIMIT, since)) is not None:
        locks.append(Lock(by_address=True, until=until))
    return max(locks, key=lambda lock: lock.until, default=None)


class LoginThrottle(AxesDatabaseHandler):
    """axes' database handler, which locks a user name from an address, plus the address lock."""

    def _address_locked(self, request) -> bool:
        since = (getattr(request, "axes_attempt_time", None) or timezone.now()) - settings.AXES_COOLOFF_TIME
        attempts = AccessAttempt.objects.filter(ip_address=request.axes_ip_address)
        return _opens_at(attempts, settings.LOGIN_ADDRESS_FAILURE_LIMIT, since) is not None

    def is_locked(self, request, credentials=None) -> bool:
        return super().is_locked(request, credentials) or self._address_locked(request)

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or request.axes_locked_out or self.is_whitelisted(request, credentials):
            return
        if self._address_locked(request):  # this failure brought the address to its limit
            request.axes_locked_out = True
            request.axes_credentials = credentials
            user_locked_out.send(
                "axes", request=request, username=(credentials or {}).get("username"), ip_address=request.axes_ip_address
            )
