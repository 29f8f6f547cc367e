"""What an update passes before the router handles it, and the allow-list's admin commands.

- Fair use (services/fair_use.py): a user's message or button tap over their per-minute limit is
  not handled; the first such is answered once with when to try again.
- Owner-only mode (services/allow_list.py): a user who is not on the allow-list gets Bot
  settings' text for everyone else, and nothing else happens (no user row written, no delivery).
- The reply lane's class (botapp/telegram/limiter.py: reply_class): admins' replies are queued
  before everyone's, and a user's share of the 30/s paces the messages to them (user_pace).

Both checks come before the update is claimed: a refused update costs one Redis call (and one
query in owner-only mode), no row. Admins (ADMIN_IDS) pass both.

/authorize and /unauthorize (admins): put Telegram ids on the allow-list or take them off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from botapp.bot.admin_commands import Reply, as_admin, refuse
from botapp.models import BotSettings
from botapp.services import users
from botapp.services.allow_list import allow_list_add, allow_list_blocks, allow_list_remove, telegram_id_parse
from botapp.services.fair_use import fair_use_message, fair_use_pace
from botapp.services.moderation import admin_command_record
from botapp.services.texts import text_render
from botapp.telegram.gateway import CallbackQuery, IncomingMessage, TgUser
from botapp.telegram.limiter import REPLY_OWNER, REPLY_USER, reply_class, user_pace

AUTHORIZE_USAGE = "Usage: /authorize <user id> [more ids…]: they may use the bot in owner-only mode."
UNAUTHORIZE_USAGE = "Usage: /unauthorize <user id> [more ids…]"


class Gates:
    def __init__(self, router):
        self.router = router
        self.gateway = router.gateway

    @contextlib.contextmanager
    def passed(self, tg: TgUser, *, chat_id: int, key: str, callback: CallbackQuery | None = None) -> Iterator[bool]:
        """Yields whether the update from `tg` may be handled (refused: the user was answered as
        the gates say); the block's replies go in the reply lane's class of the user. `key` names
        the update: an answer of the gates carries a random_id derived from it, so an update that
        Telegram hands over again after a crash is not answered twice (a refused update is not
        claimed: that would cost a row for each message of a flood)."""
        admin = tg.id in self.router.admin_ids
        conf = BotSettings.load()
        with reply_class(REPLY_OWNER if admin else REPLY_USER), user_pace(0.0 if admin else fair_use_pace(conf=conf)):
            yield admin or self._pass(tg, chat_id, conf, f"{key}.gate", callback)

    def _pass(self, tg: TgUser, chat_id: int, conf: BotSettings, key: str, callback: CallbackQuery | None) -> bool:
        refused = fair_use_message(user_id=tg.id, conf=conf)
        if refused is not None:
            self._answer(chat_id, refused.text, key, callback)
            return False
        if allow_list_blocks(user_id=tg.id, conf=conf, admin_ids=self.router.admin_ids):
            self._answer(chat_id, text_render(template=conf.allow_list_text, tg=tg), key, callback)
            return False
        return True

    def _answer(self, chat_id: int, text: str, key: str, callback: CallbackQuery | None) -> None:
        if callback is not None:  # a tap is answered either way (the button stops spinning)
            self.gateway.answer_callback(callback.id, text or None, alert=bool(text))
        elif text:
            self.gateway.send_text(chat_id, text, key=key)

    # --- /authorize, /unauthorize ---------------------------------------------------------------

    def install(self) -> None:
        self.router.commands.update(
            {
                "authorize": self._admin("authorize", self.authorize),
                "unauthorize": self._admin("unauthorize", self.unauthorize),
            }
        )

    def _admin(self, name: str, act: Callable[[IncomingMessage, str], Reply]) -> Callable[[IncomingMessage, str], None]:
        def handler(msg: IncomingMessage, arg: str) -> None:
            users.user_seen(tg=msg.user)
            if msg.user.id not in self.router.admin_ids:
                self.gateway.send_text(msg.chat_id, self.router.unknown_text)
                return
            reply = as_admin(act)(msg, arg)
            admin_command_record(admin_id=msg.user.id, command=name, arguments=arg, ok=reply.ok, result=reply.text)
            self.gateway.send_text(msg.chat_id, reply.text)

        return handler

    @staticmethod
    def _ids(arg: str, usage: str) -> list[int] | Reply:
        if not arg.split():
            return refuse(usage)
        try:
            return [telegram_id_parse(text=token) for token in arg.replace(",", " ").split()]
        except ValueError as exc:
            return refuse(f"{exc} Nothing was changed.")

    def authorize(self, msg: IncomingMessage, arg: str) -> Reply:
        ids = self._ids(arg, AUTHORIZE_USAGE)
        if isinstance(ids, Reply):
            return ids
        added = allow_list_add(telegram_ids=ids)
        mode = "on" if BotSettings.load().allow_list_enabled else "off (Bot settings): everyone may use the bot meanwhile"
        return Reply(
            f"✅ {added} added to the allow-list ({len(set(ids)) - added} were on it already). Owner-only mode is {mode}."
        )

    def unauthorize(self, msg: IncomingMessage, arg: str) -> Reply:
        ids = self._ids(arg, UNAUTHORIZE_USAGE)
        if isinstance(ids, Reply):
            return ids
        removed = allow_list_remove(telegram_ids=ids)
        return Reply(f"{removed} taken off the allow-list ({len(set(ids)) - removed} were not on it).")
