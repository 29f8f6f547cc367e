"""What an update passes before the router handles it, and the allow-list's admin commands.

- Fair use (services/fair_use.py): a user's message or button tap over their per-minute limit, or
  faster than their chat is answered, is not handled; the first such is answered once with when
  to try again.
- Owner-only mode (services/allow_list.py): a user who is not on the allow-list gets Bot
  settings' text for everyone else, and nothing else happens (no user row written, no delivery).
- The reply lane's class (botapp/telegram/limiter.py: reply_class): admins' replies are queued
  before everyone's, and a user's share of the 30/s paces the messages to them (user_pace).

Both checks come before the update is claimed, on threads of their own (the pump's gate threads:
`admit`): a refused update costs one or two Redis calls (and one query in owner-only mode), no
row, and never waits for a handler thread. Admins (ADMIN_IDS) pass both, and so does a message
fetched with getDifference after a restart that was handled before it (`recovered`, one query):
it was counted then, and the router does not handle it again.

/authorize and /unauthorize (admins): put Telegram ids on the allow-list or take them off.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from botapp.bot.admin_commands import Reply, admin_command, refuse
from botapp.models import BotSettings
from botapp.services.allow_list import allow_list_add, allow_list_blocks, allow_list_remove, telegram_id_parse
from botapp.services.fair_use import fair_use_message, fair_use_pace
from botapp.services.texts import text_render
from botapp.services.updates import Kind, update_claimed
from botapp.telegram.gateway import CallbackQuery, IncomingMessage, TgUser
from botapp.telegram.limiter import REPLY_OWNER, REPLY_USER, reply_class, user_pace

AUTHORIZE_USAGE = "Usage: /authorize <user id> [more ids…]: they may use the bot in owner-only mode."
UNAUTHORIZE_USAGE = "Usage: /unauthorize <user id> [more ids…]"


# The handler queue's priorities (botapp/telegram/handler_pool.py): admins' updates, then those of
# users not heard from in the last RECENT seconds (a new user's /start), then the rest (a user
# writing again and again: a flood waits behind everyone else).
FIRST, FRESH, AGAIN = 0, 1, 2
RECENT = 3.0  # seconds: a chat's burst at one message a second (fair use's PACE)
SEEN_MAX = 100_000  # users remembered for the priority; more, and the oldest half is forgotten


class Gates:
    def __init__(self, router):
        self.router = router
        self.gateway = router.gateway
        # When runbot last took an update of each user (time.monotonic()): only the order in which
        # waiting updates are handled, never a limit (the limits are in Redis).
        self._seen: dict[int, float] = {}

    def priority(self, user_id: int | None) -> int:
        """The handler queue's priority of an update from `user_id` (None: not a user's), asked on
        the event loop as the update arrives."""
        if user_id is None:
            return FRESH
        if user_id in self.router.admin_ids:
            return FIRST
        now = time.monotonic()
        last = self._seen.get(user_id)
        self._seen[user_id] = now
        if len(self._seen) > SEEN_MAX:
            for old in sorted(self._seen, key=self._seen.__getitem__)[: SEEN_MAX // 2]:
                self._seen.pop(old, None)
        return AGAIN if last is not None and now - last < RECENT else FRESH

    def admit(self, update: object) -> bool:
        """Whether `update` is to be handled (refused: the user was answered as the gates say, in
        the reply lane's class of the user). A message or a button tap of a user who is no admin
        goes through the gates; anything else is admitted. The gates' answer carries a random_id
        derived from the update, so an update that Telegram hands over again after a crash is not
        answered twice (a refused update is not claimed: that would cost a row a message of a flood)."""
        if isinstance(update, IncomingMessage):
            tg, chat_id, key, callback = update.user, update.chat_id, f"m{update.chat_id}.{update.message_id}", None
        elif isinstance(update, CallbackQuery):
            tg, chat_id, key, callback = update.user, update.chat_id, f"c{update.id}", update
        else:
            return True
        if tg.id in self.router.admin_ids:
            return True
        if (
            isinstance(update, IncomingMessage)
            and update.recovered
            and update_claimed(kind=Kind.MESSAGE, chat_id=update.chat_id, update_id=update.message_id)
        ):
            return True  # handled before the restart, counted then: the router does not handle it again
        conf = BotSettings.load()
        with self.replies(tg, conf=conf):
            return self._pass(tg, chat_id, conf, f"{key}.gate", callback)

    @contextlib.contextmanager
    def replies(self, tg: TgUser, *, conf: BotSettings | None = None) -> Iterator[None]:
        """The block's replies go in the reply lane's class of `tg` (admins first), paced by their
        share of the 30/s (user_pace)."""
        if tg.id in self.router.admin_ids:
            with reply_class(REPLY_OWNER):
                yield
            return
        conf = conf or BotSettings.load()
        with reply_class(REPLY_USER), user_pace(fair_use_pace(conf=conf)):
            yield

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
        return admin_command(self.router, name, act)

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
