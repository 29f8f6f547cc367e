"""The send window (quiet hours): Bot settings' `send_window_start` / `send_window_end`, local
times in `send_window_tz` (empty: TIME_ZONE), between which sequence steps and broadcasts go out.

Guarantees: with no window every moment is open. A window whose closing time is earlier than its
opening crosses midnight (22:00-06:00 is open at 23:00 and at 05:59, closed at 06:00). The
opening is the start time included, the closing time excluded. `opens_at` of a closed moment is
the next moment the window opens, later than it, on the wall clock of the window's zone (a
daylight-saving jump moves it with the clock). Only the sweeps that send bulk traffic ask:
runbot's replies are never held. Telegram does not tell a bot its users' time zones, so the
window is the operator's, one for everyone.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.conf import settings

from botapp import clock
from botapp.models import BotSettings


@dataclass(frozen=True)
class SendWindow:
    start: time | None = None
    end: time | None = None
    zone: zoneinfo.ZoneInfo | None = None

    @property
    def always(self) -> bool:
        return self.start is None or self.end is None or self.start == self.end

    def is_open(self, moment: datetime) -> bool:
        """Whether bulk sends may go at `moment`."""
        if self.always:
            return True
        local = moment.astimezone(self.zone).time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end  # crosses midnight

    def opens_at(self, moment: datetime) -> datetime:
        """`moment` itself when the window is open then, else the window's next opening (UTC)."""
        if self.is_open(moment):
            return moment
        local = moment.astimezone(self.zone)
        day = local.date()
        for _ in range(3):  # today's opening, or tomorrow's (a DST gap can push one day on)
            opening = datetime.combine(day, self.start, tzinfo=self.zone).astimezone(UTC)
            if opening > moment:
                return opening
            day += timedelta(days=1)
        raise AssertionError(f"no opening of {self} after {moment}")  # unreachable: an opening is within 2 days

    def describe(self, moment: datetime) -> str:
        """The opening as an operator reads it: "08:00 Europe/Berlin"."""
        return f"{moment.astimezone(self.zone):%Y-%m-%d %H:%M} {self.zone}"


def send_window_of(*, conf: BotSettings) -> SendWindow:
    """The window Bot settings `conf` describe (always open without both times). A zone saved
    before it was checked, and not known here, is TIME_ZONE's."""
    try:
        zone = zoneinfo.ZoneInfo(conf.send_window_tz or settings.TIME_ZONE)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = zoneinfo.ZoneInfo(settings.TIME_ZONE)
    return SendWindow(conf.send_window_start, conf.send_window_end, zone)


def send_window_current() -> SendWindow:
    """The send window of the current Bot settings (cached: usually no query)."""
    return send_window_of(conf=BotSettings.load())


def send_window_due(*, due: datetime, window: SendWindow | None = None) -> datetime:
    """When a row due at `due` may go: `due` itself when the window is open then (or at the
    clock's now, for a row already due), else the window's next opening. For the wake-ups: they
    arm for the opening, not for a held row's due time (which would wake a run that sends nothing)."""
    window = window or send_window_current()
    moment = max(due, clock.now())
    opening = window.opens_at(moment)
    return due if opening == moment else opening
