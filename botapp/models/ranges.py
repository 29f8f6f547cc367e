"""The range of every number an operator, an API client or an admin in the bot can set, in one
place: each is checked where it comes in (the admin's forms, the API, the bot's commands, the
sandbox) with the same message, and stated in the field's help text. Telegram's own numbers are
in botapp/telegram/limits.py; the rest are ours, chosen so that no date computed from them leaves
the calendar (a verification of 2,147,483,647 hours would end after the year 9999)."""

from django.core.exceptions import ValidationError

from botapp.telegram.limits import channel_id_problem

DAY_MINUTES = 24 * 60
VERIFICATION_HOURS_MAX = 365 * 24  # a verification lasts at most a year
TOKEN_TTL_MINUTES_MAX = 7 * DAY_MINUTES  # an unused verification token lives at most a week
DAILY_TOKEN_LIMIT_MAX = 1000  # verification links per user per day
BYPASS_SECONDS_MAX = 3600  # returning with a token faster than this is a bypass
SEQUENCE_DELAY_SECONDS_MAX = 365 * DAY_MINUTES * 60  # an onboarding step comes at most a year after /start


def channel_id_validate(value: int | None) -> None:
    """A channel id as the Bot API writes it (-100…): the model fields' validator."""
    if value is not None and (problem := channel_id_problem(value)):
        raise ValidationError(problem)
