"""`manage.py login_user_session`: log the operator's own Telegram account in once, for the posts
commands of public channels the bot is not in (a bot may not read a channel's history). Asks the
phone number (unless --phone), the code Telegram sends to the account's apps, and the two-step
verification password if the account has one; keeps the session as `user.session` in the sessions
folder, never the bot's. A wrong code or password is one line and exit status 1, with nothing kept.
"""

import getpass

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from botapp.config import ConfigError, bot_config_load
from botapp.telegram.gateway import TelegramError
from botapp.telegram.user_session import USER_SESSION, LoginRefused, user_session_login

# How the command asks (tests answer through these).
ask = input
ask_secret = getpass.getpass


class Command(BaseCommand):
    help = "Log your own Telegram account in once, for posts commands that read a public channel the bot is not in."

    def add_arguments(self, parser):
        parser.add_argument("--phone", default="", help="the account's phone number with its country code (asked if not given)")

    def handle(self, *args, phone="", **options):
        try:
            config = bot_config_load()
        except ConfigError as exc:
            raise CommandError("; ".join(exc.problems)) from None
        try:
            phone = phone or _asked("Phone number of your Telegram account, with its country code: ")
            who = user_session_login(
                api_id=config.api_id,
                api_hash=config.api_hash,
                workdir=config.session_dir,
                phone=phone,
                code_ask=lambda: _asked("The code Telegram sent to your Telegram apps: "),
                password_ask=lambda: _asked("Your two-step verification password: ", secret=True),
                offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
            )
        except LoginRefused as exc:
            raise CommandError(f"not logged in: {exc}") from None
        except TelegramError as exc:
            raise CommandError(f"not logged in: Telegram answered {exc}") from None
        return f"Logged in as {who}: {config.session_dir / (USER_SESSION + '.session')} (runbot reads public channels through it)"


def _asked(prompt: str, *, secret: bool = False) -> str:
    try:
        answer = (ask_secret if secret else ask)(prompt).strip()
    except EOFError:
        answer = ""
    if not answer:
        raise CommandError(f"not logged in: nothing given for “{prompt.rstrip(': ')}”")
    return answer
