"""An operator's own Telegram account (a user session), for what Telegram gives no bot: the history
of a public channel the bot is not in (a posts command's, the drip bot's /results, shared/seeds/002).

Logged in once by `manage.py login_user_session` (the phone number, the code Telegram sends to the
account's apps, the two-step verification password when one is set), into a session file of its
own, `user.session` in the sessions folder: never the bot's, never shared with another process
(runbot alone reads through it). A login that fails leaves no file: it is written under another
name and takes `user.session`'s only once signed in. Reads go through the request layer like the
bot's calls (Telegram's refusals become the gateway's domain errors); they are not messages, so no
limiter paces them. The bot itself may not read a channel's history at all (messages.getHistory
answers a bot BOT_METHOD_INVALID).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.utils.module_loading import import_string
from pyrogram import Client, errors, raw, utils

from botapp.telegram.gateway import BadRequest, ChannelPost
from botapp.telegram.kurigram import Abridged, session_account
from botapp.telegram.request import TelegramRequests, on_loop

USER_SESSION = "user"  # the session file's name: user.session
_LOGIN = "user-login"  # where a login writes until it is signed in
HISTORY_READ = 100  # posts one messages.getHistory call returns at most (core.telegram.org/api/offsets)


class UserSessionMissing(Exception):  # noqa: N818 - a state the operator fixes, named as such
    """No user session is logged in: `manage.py login_user_session` makes one."""


class LoginRefused(Exception):  # noqa: N818 - the operator's answer, said in one line
    """Telegram did not sign the account in (a wrong or expired code, a wrong password, no account)."""


def user_client_build(*, api_id: int, api_hash: str, workdir: Path, offline=None, name: str = USER_SESSION) -> Client:
    """kurigram's client for the user session's file `<name>.session` under `workdir`, with no bot
    token; `offline`: the in-memory Telegram instead of Telegram (as client.client_build)."""
    workdir.mkdir(parents=True, exist_ok=True)
    options: dict = {}
    if offline is not None:
        offline_client_options = import_string(settings.TELEGRAM_OFFLINE_CONNECTION)
        options = offline_client_options(offline, name=name, workdir=workdir, in_memory=False, api_id=api_id, bot_token=None)
    return Client(
        name,
        api_id=api_id,
        api_hash=api_hash,
        workdir=str(workdir),
        no_updates=True,  # it only reads; runbot's own session takes the updates
        skip_updates=True,
        sleep_threshold=0,  # a FloodWait reaches the request layer, which decides
        protocol_factory=Abridged,
        **options,
    )


def user_session_account(workdir: Path) -> int | None:
    """The user id `user.session` under `workdir` is signed in as; None when there is no such file
    or it is not signed in (or is a bot's). Reads the file only: no call to Telegram."""
    found = session_account(workdir / f"{USER_SESSION}.session")
    if found is None or found[1]:
        return None
    return found[0] or None


class UserSession(TelegramRequests):
    """The user session's requests: log in (`login`), or read a public channel (`channel_history`)
    once `start()` has connected with a signed-in session file."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._channels: dict[str, raw.types.InputPeerChannel] = {}  # resolved once: resolveUsername is rationed

    def start(self, *, before_start=None, after_start=None) -> None:
        """Connect with the session file; UserSessionMissing when it is not signed in (kurigram's
        start would ask for a phone number on the terminal)."""
        if not self._run(on_loop(self.client.connect)):
            self._run(on_loop(self.client.disconnect))
            raise UserSessionMissing("no user session is logged in: run `python manage.py login_user_session`")

    def stop(self, *, after_stop=None) -> None:
        """Disconnect (a session only connected, never started by kurigram, is not stopped by its
        stop), then stop the loop."""
        if self._thread is not None and self.client.is_connected:
            with contextlib.suppress(Exception):
                self._run(on_loop(self.client.disconnect))
        super().stop(after_stop=after_stop)

    def login(self, *, phone: str, code_ask: Callable[[], str], password_ask: Callable[[], str]) -> str:
        """Sign the account in: Telegram sends a code to its apps, `code_ask()` gives it, and
        `password_ask()` the two-step verification password when the account has one. Returns
        who is signed in ("First name (id)"). Telegram's refusal (a wrong code or password, a
        number with no account) is LoginRefused, with Telegram's word for it."""
        self._run(on_loop(self.client.connect))
        try:
            sent = self._call(self.client.send_code, phone, paced=False)
            user = self._call(self._sign_in, phone, sent.phone_code_hash, code_ask().strip(), paced=False)
            if user is None:
                user = self._call(self.client.check_password, password_ask(), paced=False)
        except BadRequest as exc:
            raise LoginRefused(_refusal(exc)) from exc
        finally:
            if self.client.is_connected:
                self._run(on_loop(self.client.disconnect))
        return f"{user.first_name or ''} ({user.id})".strip()

    async def _sign_in(self, phone: str, code_hash: str, code: str):
        """The signed-in user, or None when the account has a password to give next."""
        try:
            user = await self.client.sign_in(phone, code_hash, code)
        except errors.SessionPasswordNeeded:
            return None
        if not hasattr(user, "id"):  # sign-up required: the number has no Telegram account
            raise BadRequest("PHONE_NUMBER_UNOCCUPIED: no Telegram account has this number")
        return user

    def channel_history(self, username: str, limit: int = HISTORY_READ) -> list[ChannelPost]:
        """The latest `limit` (at most HISTORY_READ) posts of the public channel @`username`,
        newest first. ChatNotFound/BadRequest when there is no such channel."""
        return self._call(self._history, username.lstrip("@"), min(limit, HISTORY_READ), paced=False)

    async def _history(self, username: str, limit: int) -> list[ChannelPost]:
        peer = self._channels.get(username.lower())
        if peer is None:
            resolved = await self.client.invoke(raw.functions.contacts.ResolveUsername(username=username))
            channel = next(
                (
                    c
                    for c in resolved.chats
                    if isinstance(c, raw.types.Channel) and isinstance(resolved.peer, raw.types.PeerChannel)
                ),
                None,
            )
            if channel is None:
                raise BadRequest(f"@{username} is not a channel")
            peer = self._channels[username.lower()] = raw.types.InputPeerChannel(
                channel_id=channel.id, access_hash=channel.access_hash
            )
        answer = await self.client.invoke(
            raw.functions.messages.GetHistory(
                peer=peer, offset_id=0, offset_date=0, add_offset=0, limit=limit, max_id=0, min_id=0, hash=0
            )
        )
        chat_id = utils.get_channel_id(peer.channel_id)
        return [
            ChannelPost(chat_id=chat_id, message_id=m.id, text=m.message or "")
            for m in answer.messages
            if isinstance(m, raw.types.Message)
        ]


def _refusal(exc: BadRequest) -> str:
    text = str(exc)
    for name, said in LOGIN_REFUSALS.items():
        if name in text:
            return said
    return f"Telegram refused the login: {text}"


# What Telegram's refusals of a login mean to the operator typing it.
LOGIN_REFUSALS = {
    "PHONE_CODE_INVALID": "the code is wrong: run the command again for a new one",
    "PHONE_CODE_EXPIRED": "the code has expired: run the command again for a new one",
    "PHONE_CODE_EMPTY": "no code was given",
    "PASSWORD_HASH_INVALID": "the two-step verification password is wrong",
    "PHONE_NUMBER_INVALID": "Telegram says the phone number is invalid (give it with its country code: +15551234567)",
    "PHONE_NUMBER_UNOCCUPIED": "no Telegram account has this number",
    "PHONE_NUMBER_BANNED": "Telegram has banned this number",
}


def user_session_login(
    *, api_id: int, api_hash: str, workdir: Path, phone: str, code_ask: Callable[[], str], password_ask: Callable[[], str],
    offline=None,
) -> str:  # fmt: skip
    """Log the account in and keep it as `user.session` under `workdir` (replacing one there);
    returns who is signed in. On any failure nothing is kept: LoginRefused (Telegram's answer)
    or the error as it is."""
    scratch = workdir / f"{_LOGIN}.session"
    scratch.unlink(missing_ok=True)
    session = UserSession.in_thread(
        user_client_build(api_id=api_id, api_hash=api_hash, workdir=workdir, offline=offline, name=_LOGIN)
    )
    try:
        who = session.login(phone=phone, code_ask=code_ask, password_ask=password_ask)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    finally:
        session.stop()
    scratch.replace(workdir / f"{USER_SESSION}.session")
    return who


class UserHistory:
    """runbot's reader of public channels: the user session `user.session` under `workdir`,
    connected on the first read (never when no command needs it), in a thread of its own, with the
    client `build(workdir=...)` makes. Without a logged-in session file each read raises
    UserSessionMissing, touching nothing (no file is made), and the next read looks again (the
    operator may log in meanwhile)."""

    def __init__(self, build: Callable[..., Client], *, workdir: Path):
        self._build = build
        self._workdir = workdir
        self._session: UserSession | None = None
        self._lock = threading.Lock()

    def channel_history(self, username: str, limit: int = HISTORY_READ) -> list[ChannelPost]:
        with self._lock:
            if self._session is None:
                if user_session_account(self._workdir) is None:
                    raise UserSessionMissing("no user session is logged in: run `python manage.py login_user_session`")
                session = UserSession.in_thread(self._build(workdir=self._workdir))
                try:
                    session.start()
                except BaseException:
                    session.stop()
                    raise
                self._session = session
        return self._session.channel_history(username, limit)

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None
