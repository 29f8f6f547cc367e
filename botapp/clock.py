"""The one clock every part of Courier asks for "now".

In production it is the system clock. The offline sandbox and tests move it forward with
`clock_advance()` so that deletions, token expiry and daily resets can be seen without waiting.
The offset is process-wide: only tests and the sandbox touch it.
"""

from datetime import datetime, timedelta

from django.utils import timezone

_offset = timedelta(0)


def now() -> datetime:
    """Timezone-aware UTC now, plus whatever the sandbox or a test has moved the clock by."""
    return timezone.now() + _offset


def today():
    """The operator's calendar date (TIME_ZONE): daily limits reset at local midnight."""
    return timezone.localdate(now())


def clock_advance(delta: timedelta) -> datetime:
    """Move the clock by `delta` (tests, the sandbox). A move past the calendar's end raises
    OverflowError and leaves the clock where it was."""
    global _offset
    moved = timezone.now() + (_offset + delta)  # raises before anything changes
    _offset += delta
    return moved


def clock_reset() -> None:
    global _offset
    _offset = timedelta(0)


def today_start() -> datetime:
    """Midnight at the start of today in the operator's time zone, as an aware datetime."""
    local = timezone.localtime(now())
    return local.replace(hour=0, minute=0, second=0, microsecond=0)
