"""Fair use: what one user can make the bot do (Bot settings, "Fair use limits").

Guarantees, while the limits are on:
- a user's messages (commands, texts, button taps) beyond `fair_use_commands_per_minute` in any
  minute, or faster than their chat can be answered (PACE), are not answered, and file
  deliveries beyond `fair_use_deliveries_per_minute` in any minute or `fair_use_deliveries_per_day`
  in the calendar day (TIME_ZONE) are not made;
- the first refused one in a window is answered, once, with the limit and when to try again; the
  ones after it until then get nothing (too fast for the chat: told at most once a minute);
- a user told `fair_use_strikes` times within an hour is banned from files (an admin ban, as /ban
  makes: /unban and the console lift it), for longer each time (FAIR_USE_BANS);
- admins (ADMIN_IDS) are never limited;
- every count is in Redis (botapp/telegram/quotas.py), shared by every process and kept through
  their restarts; the bans are rows in PostgreSQL. Refused calls are not counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from botapp import clock
from botapp.models import BotSettings, TelegramUser, UserBan
from botapp.services.growth_stats import growth_count
from botapp.services.moderation import ban_in_force, user_ban
from botapp.services.texts import human_span
from botapp.telegram.limits import GLOBAL_RATE, PRIVATE_CHAT_INTERVAL
from botapp.telegram.quotas import Refusal, Window, quotas

log = logging.getLogger(__name__)

MINUTE = 60.0
STRIKE_SPAN = 3600.0  # seconds within which the told refusals count toward a ban
# Each fair-use ban lasts longer than the one before (as verification-bypass bans do).
FAIR_USE_BANS = (timedelta(hours=1), timedelta(hours=6), timedelta(hours=24), timedelta(days=7))
BAN_REASON = "Fair use: limits hit {strikes} times within an hour"

# Messages faster than one chat can be answered are not handled: each would hold a handler thread
# until its chat's next slot, and a flood of them held every thread. PACE_MESSAGES in any
# PACE_MESSAGES seconds: a message and a tap right after it, then one a second, the chat's pace
# (three at once, the chat's burst, made a flood of new users' first seconds three times as heavy:
# docs/benchmarks.md). Told at most once a minute, and not a strike (a quick typist is no abuser).
PACE_MESSAGES = 2
PACE = Window("pace", PACE_MESSAGES * PRIVATE_CHAT_INTERVAL, PACE_MESSAGES)
TOO_QUICK = "⏳ One message at a time, please: I answer about one a second. Messages sent faster than that are not answered."
TOO_FAST = "⏳ You are sending faster than this bot answers: at most {limit} messages a minute. Try again in {wait}; until then your messages are not answered."
FILES_MINUTE = "⏳ You have had {limit} file links delivered in the last minute, the most one user can. Try again in {wait}."
FILES_DAY = "⏳ You have had {limit} file links delivered today, the most one user can. More from midnight, in {wait}."
BANNED_NOW = "🚫 You kept on after being told: files cannot be sent to you for {ban}."


@dataclass(frozen=True)
class Refused:
    """A call over a limit. `text`: what to tell the user ("": they were told already in this
    window); `retry_after`: when it would fit."""

    text: str
    retry_after: timedelta


def _wait_text(seconds: float) -> str:
    return f"{max(1, round(seconds))} s" if seconds < 90 else human_span(delta=timedelta(seconds=seconds))


def fair_use_message(*, user_id: int, conf: BotSettings) -> Refused | None:
    """Count one message (a command, a text, a button tap) of `user_id`; a Refused when it comes
    faster than their chat can be answered (PACE: told at most once a minute, never a strike) or
    is over their per-minute limit (see the module). Admins are the caller's to leave out."""
    if not conf.fair_use_enabled:
        return None
    paced = quotas().take(user_id, "pace", [PACE], now=_now(), quiet=MINUTE, strike=False)
    if paced is not None:
        return Refused(TOO_QUICK if paced.tell else "", timedelta(seconds=paced.retry_after))
    limit = conf.fair_use_commands_per_minute
    refusal = quotas().take(user_id, "messages", [Window("messages", MINUTE, limit)], now=_now(), strike_span=STRIKE_SPAN)
    if refusal is None:
        return None
    return _refused(user_id, refusal, TOO_FAST.format(limit=limit, wait=_wait_text(refusal.retry_after)), conf)


def fair_use_delivery(*, user: TelegramUser, conf: BotSettings) -> Refused | None:
    """Count one file delivery of `user`; a Refused when it is over their per-minute or daily
    limit (see the module)."""
    if not conf.fair_use_enabled:
        return None
    per_minute, per_day = conf.fair_use_deliveries_per_minute, conf.fair_use_deliveries_per_day
    day = None
    if per_day:
        ends = clock.today_start() + timedelta(days=1)
        day = (clock.today().isoformat(), per_day, (ends - clock.now()).total_seconds())
    refusal = quotas().take(
        user.telegram_id, "deliveries", [Window("deliveries", MINUTE, per_minute)], now=_now(), day=day, strike_span=STRIKE_SPAN
    )
    if refusal is None:
        return None
    wait = _wait_text(refusal.retry_after)
    text = FILES_DAY.format(limit=per_day, wait=wait) if refusal.which == 1 else FILES_MINUTE.format(limit=per_minute, wait=wait)
    return _refused(user.telegram_id, refusal, text, conf, user=user)


def fair_use_pace(*, conf: BotSettings) -> float:
    """Seconds between two messages to one user that keep them within their share of the 30/s
    (0: no share set apart, fair use off)."""
    if not conf.fair_use_enabled:
        return 0.0
    return 100.0 / (conf.fair_use_share_percent * GLOBAL_RATE)


def _now() -> float:
    return clock.now().timestamp()


def _refused(user_id: int, refusal: Refusal, text: str, conf: BotSettings, *, user: TelegramUser | None = None) -> Refused:
    retry_after = timedelta(seconds=refusal.retry_after)
    if not refusal.tell:
        return Refused("", retry_after)
    log.info("fair use: user=%s over a limit, told (strikes %s); again in %.0f s", user_id, refusal.strikes, refusal.retry_after)
    growth_count(kind="limit_hit")  # the dashboard's and /stats' limit hits (told once a window: one row write)
    if conf.fair_use_strikes and refusal.strikes >= conf.fair_use_strikes:
        ban = _ban(user_id, refusal.strikes, user=user)
        if ban is not None:
            text = f"{text}\n{BANNED_NOW.format(ban=human_span(delta=ban))}"
    return Refused(text, retry_after)


def _ban(user_id: int, strikes: int, *, user: TelegramUser | None) -> timedelta | None:
    """Ban the user from files for the next of FAIR_USE_BANS (none when a ban holds already or
    they never wrote to the bot); their strikes start again."""
    user = user or TelegramUser.objects.filter(telegram_id=user_id).first()
    if user is None or ban_in_force(user=user) is not None:
        return None
    earlier = UserBan.objects.filter(user=user, reason__startswith=BAN_REASON.split("{", 1)[0]).count()
    duration = FAIR_USE_BANS[min(earlier, len(FAIR_USE_BANS) - 1)]
    user_ban(user=user, duration=duration, reason=BAN_REASON.format(strikes=strikes))
    quotas().strikes_forget(user_id)
    log.warning("fair use: user=%s banned for %s after %s limit hits", user_id, duration, strikes)
    return duration
