"""The request layer: how one request reaches Telegram and how its answer comes back, whatever it asks.

The client runs on an asyncio loop; the gateway's methods are synchronous and may be called from
any thread except the loop's own: each call is scheduled on the loop and waited for
(`TelegramRequests._run`). runbot runs the client on its main loop and calls services from worker
threads; a Celery worker starts a loop in a background thread (`start_in_thread`).

Every Telegram call goes through `_call` (one call) or the batch (batching.py, in MTProto
containers): a slot of the shared limiter first, then the request, with the user's access hash
handed to kurigram in the same hop (so kurigram never asks Telegram who a user is); after a
refusal, retry.py decides whether it is asked again. Telegram's errors become domain errors
(`error_to_domain`); anything else is a bug and is raised as it is. kurigram's private parts are
used only through botapp/telegram/kurigram.py. What the requests ask, in Telegram's terms, is the
method modules' (messages.py, copies.py, uploads.py, chats.py, deletions.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import re
import threading
import time
from collections.abc import Callable

from pyrogram import Client, errors, raw, utils

from botapp.metrics import ADMISSIONS_LAPSED
from botapp.telegram import retry
from botapp.telegram.gateway import (
    AlreadySent,
    BadRequest,
    BotUnauthorized,
    ChatNotFound,
    FloodWait,
    ForwardsRestricted,
    MessageNotFound,
    MessageTooOld,
    OutcomeUnknown,
    PeerUnknown,
    TelegramError,
    TransientError,
    UserBlocked,
    UserDeactivated,
)
from botapp.telegram.kurigram import (
    Lapsed,
    SentId,
    Unanswered,
    Written,
    asked_through,
    invoke_many,
    loop_bind,
    session_tune,
)
from botapp.telegram.limiter import Limiter
from botapp.telegram.limits import USER_ID_MAX

log = logging.getLogger(__name__)

KNOWN_PEERS_MAX = 20_000  # users whose access hash this process remembers handing to kurigram
# The access hash a bot names a user with when it holds none (imported from another bot): Telegram's
# own Bot API server does so (tdlib, ContactsManager::get_input_user and get_input_peer_user:
# inputUser(user_id, 0) and inputPeerUser(user_id, 0) when the account is a bot), and every Bot API
# bot messages its users by id alone. Telegram's answer decides: PEER_ID_INVALID for a user who
# never started the bot (`refused_unknown`). Telegram's answer to such a call, when it names the
# user (a send's `updates`: its users), carries the hash it holds for this bot: the gateway reads
# those answers whole, keeps the hash in kurigram's storage and hands it to `peers_learnt` (tdlib
# does the same: UpdatesManager::on_get_updates stores the answer's users), so the next call
# carries it. Answers that name no user (deletions' affectedMessages, Bool) teach nothing.
ZERO_HASH = 0

# What a call asked alone takes from the limiter before it is asked again after Telegram left it
# unanswered (`_invoke`): set by `_call` for its own task on the loop; None: asked again unpaced.
_READMIT: contextvars.ContextVar[Callable[[], object] | None] = contextvars.ContextVar("readmit", default=None)

# A 420 whose name kurigram's table does not know (a new FLOOD_* name) reaches us as Flood with the
# value "[420 NAME]": its seconds, when the name carries them, are the number in it.
_SECONDS = re.compile(r"_(\d+)\b")
# What kurigram raises for the transport, not for a request: the connection or the session.
_TRANSPORT = (OSError, errors.SecurityError)


def error_to_domain(exc: BaseException, *, send: bool = False) -> TelegramError | BotUnauthorized | None:
    """The domain error for what Telegram (an RPC error) or the transport raised; None for anything
    else, which is a bug of ours or of kurigram and must reach the caller as it is (never recorded
    as Telegram's refusal). Never raises. `send`: the call delivers something, so a lost answer
    means the outcome is unknown rather than a safe retry."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, errors.Flood):
        seconds = exc.value if isinstance(exc.value, int) and not isinstance(exc.value, bool) else None
        if seconds is None and (found := _SECONDS.search(str(exc.value or ""))):
            seconds = int(found[1])
        if seconds is None or seconds <= 0:  # a 420 that names no wait (FROZEN_METHOD_INVALID): back off
            return TransientError(text)
        return FloodWait(seconds=seconds)
    if isinstance(exc, errors.Unauthorized):
        # 401: AUTH_KEY_UNREGISTERED, SESSION_REVOKED, USER_DEACTIVATED(_BAN) are about the bot itself.
        return BotUnauthorized(text)
    if isinstance(exc, errors.UserIsBlocked):
        return UserBlocked(text)
    if isinstance(exc, errors.InputUserDeactivated):
        return UserDeactivated(text)
    if isinstance(exc, errors.ChatForwardsRestricted):
        return ForwardsRestricted(text)
    if isinstance(
        exc,
        (
            errors.PeerIdInvalid,
            errors.ChatIdInvalid,
            errors.ChannelInvalid,
            errors.ChannelPrivate,
            errors.UserIdInvalid,
            errors.ChatAdminRequired,
            errors.ChatWriteForbidden,
        ),
    ):
        return ChatNotFound(text)
    if isinstance(exc, errors.MessageIdInvalid):
        return MessageNotFound(text)
    if isinstance(exc, (errors.MessageEditTimeExpired, errors.MessageDeleteForbidden)):
        return MessageTooOld(text)
    if isinstance(exc, errors.RandomIdDuplicate):
        return AlreadySent(text)  # an earlier attempt of this very request got through
    if isinstance(exc, (errors.InternalServerError, errors.ServiceUnavailable, TimeoutError)):
        return OutcomeUnknown(text) if send else TransientError(text)
    if isinstance(exc, _TRANSPORT):
        return TransientError(text)  # not connected, or refused before processing: the request never left
    if isinstance(exc, (errors.BadRequest, errors.NotAcceptable)):
        return BadRequest(f"{type(exc).__name__}: {text}")
    if isinstance(exc, errors.RPCError):  # Telegram's, of a kind we do not act on: a refusal all the same
        return TelegramError(f"{type(exc).__name__}: {text}")
    return None


def sent_ids(answer) -> list[int]:
    """The new messages' ids in Telegram's answer to a send or forward, in the order sent. Callers
    look it up here at call time (`request.sent_ids`): tests strike it to stand for an answer of
    a shape never seen."""
    if isinstance(answer, SentId):  # a one-message send's answer, read only as far as its id
        return [answer.id]
    if isinstance(answer, raw.types.UpdateShortSentMessage):
        return [answer.id]
    by_random = [u.id for u in getattr(answer, "updates", []) if isinstance(u, raw.types.UpdateMessageID)]
    if by_random:
        return by_random
    return [
        u.message.id
        for u in getattr(answer, "updates", [])
        if isinstance(u, (raw.types.UpdateNewMessage, raw.types.UpdateNewChannelMessage))
    ]


def peer_check(chat_id: int) -> None:
    """Telegram answers PEER_ID_INVALID to an id outside its ranges (users: 1 to 2**52 - 1, the Bot
    API's "52 significant bits"; groups and channels: kurigram's utils.get_peer_type, which raises
    ValueError before asking). Said as Telegram would, before any call."""
    if 0 < chat_id <= USER_ID_MAX:
        return
    try:
        if chat_id > 0:
            raise ValueError(f"a user id has at most 52 bits: {chat_id}")
        utils.get_peer_type(chat_id)
    except ValueError as exc:
        raise ChatNotFound(f"PEER_ID_INVALID: {exc}") from None


def addressed_by_id(query) -> int | None:
    """The user a request names by id alone (InputPeerUser with ZERO_HASH), or None."""
    for attr in ("peer", "to_peer"):
        peer = getattr(query, attr, None)
        if isinstance(peer, raw.types.InputPeerUser) and peer.access_hash == ZERO_HASH:
            return peer.user_id
    return None


class NotCached(Exception):  # noqa: N818 - a signal between the request layer's halves, never raised out
    """kurigram's storage has no access hash for this user (raised on the loop, before any call)."""


async def on_loop(fn, *args, **kwargs):
    """Call `fn` on the client's loop: kurigram's methods turn into blocking wrappers when called
    from a thread without a running loop."""
    return await fn(*args, **kwargs)


async def noop():
    return None


class TelegramRequests:
    """The connection (a client on its loop, in this thread or a daemon thread), one call
    (`_call`), the requests as they go on the wire (`_invoke`, `_invoke_many`) and the users'
    access hashes handed to kurigram.

    `limiter`: the shared send limiter (None: no pacing, for tests that want raw calls).
    `peers(user_id) -> access_hash | None`: where a worker finds the access hashes runbot stored,
    so a send costs no resolution call. `peers_learnt({user_id: access_hash})`: where the hashes
    Telegram's answers named for users addressed by id alone (ZERO_HASH) go, called from the
    calling thread after the call, never on the loop. `paid`: sends carry the paid-broadcast flag.
    `sleep`: how a back-off waits (tests count it)."""

    def __init__(
        self,
        client: Client,
        loop: asyncio.AbstractEventLoop,
        *,
        limiter: Limiter | None = None,
        max_flood_wait: int = 60,
        peers: Callable[[int], int | None] | None = None,
        peers_learnt: Callable[[dict[int, int]], object] | None = None,
        paid: bool = False,
        sleep=time.sleep,
    ):
        self.client = client
        self.loop = loop
        loop_bind(client, loop)
        self._thread: threading.Thread | None = None
        self.limiter = limiter
        self.max_flood_wait = max_flood_wait
        self.peers = peers
        self.paid = paid or None
        self.sleep = sleep
        self._known_peers: set[int] = set()
        self._peer_hashes: dict[int, int] = {}
        self._zero_hash: set[int] = set()  # users this process addressed by id alone (ZERO_HASH)
        self.peers_learnt = peers_learnt
        self._learnt: dict[int, int] = {}  # hashes learnt on the loop, not yet handed to peers_learnt
        self._learnt_lock = threading.Lock()

    @property
    def policy(self) -> retry.CallPolicy:
        """The call policy for this gateway's limiter (asked only after a refusal)."""
        return retry.CallPolicy(limiter=self.limiter, max_flood_wait=self.max_flood_wait)

    # --- the connection ---------------------------------------------------------------------------

    @classmethod
    def in_thread(cls, client: Client, **options):
        """A gateway for `client` on a private loop in a daemon thread (for workers, which are not
        async); call `start()` next."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="pyrogram", daemon=True)
        thread.start()
        gateway = cls(client, loop, **options)
        gateway._thread = thread
        return gateway

    @classmethod
    def start_in_thread(cls, client: Client, **options):
        gateway = cls.in_thread(client, **options)
        gateway.start()
        return gateway

    def start(self, *, before_start=None, after_start=None) -> None:
        """Sign in; `before_start(client)` runs on the loop first (to add update handlers),
        `await after_start(client)` once signed in (an UpdatePump's `resume`)."""
        if before_start is not None:

            async def prepare():
                before_start(self.client)

            self._run(prepare())
        self._run(on_loop(self.client.start))
        session_tune(self.client)
        if after_start is not None:
            self._run(after_start(self.client))

    def stop(self, *, after_stop=None) -> None:
        """Stop the client; `await after_stop()` on the loop once it has stopped (an UpdatePump's `close`)."""
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._run(on_loop(self.client.stop))
        if after_stop is not None:
            with contextlib.suppress(Exception):
                self._run(after_stop())

        async def cancel_the_rest():  # a stop that failed halfway leaves kurigram's tasks behind
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        if not self.loop.is_running():
            self.loop.close()

    # --- one call -------------------------------------------------------------------------------

    def _call(
        self, fn, *args, chat_id: int | None = None, send: bool = False, paced: bool = True, count: int = 1,
        paid: bool = False, **kwargs,
    ):  # fmt: skip
        """One Telegram call: `await fn(*args, **kwargs)` on the client's loop, under the limiter.
        `send`: it is a message to `chat_id` (its per-chat limit applies); `count`: the messages it
        delivers; `paid`: it carries the paid-broadcast flag."""
        self._refuse_the_loop()
        if chat_id is not None:
            peer_check(chat_id)
        peer = self._peer_for(chat_id) if chat_id is not None and chat_id > 0 else None
        admit = (
            functools.partial(self.limiter.acquire, chat_id if send else None, count=count, paid=paid)
            if self.limiter is not None and paced
            else None
        )
        attempt = 1
        granted = False
        lapsed = 0
        write_by = None
        while True:
            if admit is not None and not granted:
                admit()
                # Admitted to arrive now (the windows): a call that reaches the loop later than
                # retry.ADMITTED_FOR after it (a busy machine) never leaves, and is admitted again.
                bounded = lapsed < retry.ADMISSIONS_LAPSED_MAX
                write_by = time.monotonic() + retry.ADMITTED_FOR if bounded else None
            granted = False
            try:
                answer = self._run(self._on_loop(peer, fn, *args, _write_by=write_by, _readmit=admit, **kwargs), send=send)
                if self._learnt:
                    self._learnt_hand_on()
                return answer
            except NotCached:  # nothing went to Telegram: the stored hash, and the slot still ours
                peer, granted = self._stored_peer(chat_id), True
                continue
            except Lapsed:  # nothing went to Telegram: the limiter is asked again, no attempt spent
                lapsed += 1
                ADMISSIONS_LAPSED.labels(getattr(self.limiter, "lane", "reply")).inc()
                continue
            except (FloodWait, TransientError) as exc:  # Telegram did nothing: asking again is safe
                again = self.policy.after(exc, attempt=attempt, chat_id=chat_id if send else None, paid=paid)
                if isinstance(exc, FloodWait):
                    log.warning("FloodWait %ss chat=%s: the limiter pauses its scope", exc.seconds, chat_id)
                else:
                    log.info("transient error chat=%s attempt=%s: %s", chat_id, attempt, exc)
                if not again.again:
                    raise
                if again.wait:
                    self.sleep(again.wait)
            except TelegramError as exc:
                if chat_id is not None and (refused := self.refused_unknown(chat_id, exc)) is not exc:
                    raise refused from exc
                raise
            except BotUnauthorized:
                raise
            except Exception as exc:
                if send:  # not Telegram's answer (a bug): raised as it is, and said to have maybe left
                    exc.maybe_delivered = True  # type: ignore[attr-defined]
                raise
            attempt += 1

    def _refuse_the_loop(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self.loop:
            raise RuntimeError("PyrogramGateway is synchronous: call it from a worker thread, not from its loop")

    def _run(self, coro, *, send: bool = False):
        try:
            self._refuse_the_loop()
        except RuntimeError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=retry.CALL_TIMEOUT)
        except (TelegramError, BotUnauthorized, NotCached, Lapsed):
            raise
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise (OutcomeUnknown if send else TransientError)(f"no answer in {retry.CALL_TIMEOUT}s") from exc
        except Exception as exc:
            domain = error_to_domain(exc, send=send)
            if domain is None:  # not Telegram's answer: our bug or kurigram's, raised as it is
                raise
            raise domain from exc

    # --- the users' access hashes -----------------------------------------------------------------

    def peers_remember(self, access_hashes: dict[int, int | None]) -> None:
        if len(self._peer_hashes) >= KNOWN_PEERS_MAX:  # hashes of rows handed back, never sent
            self._peer_hashes.clear()
        self._peer_hashes.update((uid, h) for uid, h in access_hashes.items() if h is not None)
        self._zero_hash.difference_update(uid for uid, h in access_hashes.items() if h is not None)

    def _peer_for(self, user_id: int) -> tuple[int, int] | int | None:
        """What to hand kurigram before calling, so that it never asks Telegram who the user is
        (users.getUsers is a call the limiter does not see, and it fails for users the bot never
        met): None when kurigram has the user, (user id, access hash) to give it, or the user id
        alone: look in kurigram's storage first, on the loop in the call's own hop (runbot's
        client stored the user from their update), and raise NotCached when it is not there."""
        if user_id in self._known_peers:
            return None
        access_hash = self._peer_hashes.pop(user_id, None)  # a sweep's batch brought it (used once)
        if access_hash is not None:
            return user_id, access_hash
        return user_id

    def _stored_peer(self, user_id: int) -> tuple[int, int]:
        """The access hash runbot stored for a user kurigram's storage does not have; with none
        stored (a user imported from another bot), ZERO_HASH, as Telegram's Bot API server does."""
        access_hash = self.peers(user_id) if self.peers is not None else None
        if access_hash is None:
            self._addressed_by_id(user_id)
            return user_id, ZERO_HASH
        return user_id, access_hash

    def _addressed_by_id(self, user_id: int) -> None:
        if len(self._zero_hash) >= KNOWN_PEERS_MAX:
            self._zero_hash.clear()
        self._zero_hash.add(user_id)

    def refused_unknown(self, chat_id: int, error: BaseException) -> BaseException:
        """`error` as the gateway says it: Telegram refusing a user addressed without an access
        hash as a peer it does not know (PEER_ID_INVALID: they never started the bot) is
        PeerUnknown, whose row is recorded as for a user who is not the bot's."""
        if isinstance(error, ChatNotFound) and not isinstance(error, PeerUnknown) and chat_id in self._zero_hash:
            unknown = PeerUnknown(f"user {chat_id} has not started the bot (Telegram: {error})"[:255])
            unknown.__cause__ = error
            return unknown
        return error

    async def _knows(self, user_id: int) -> bool:
        """Whether kurigram's storage has the user's access hash; a ZERO_HASH there is only what an
        earlier call addressed by id alone put there (it may have left with the session file), not
        a hash: the stored one is looked for, or the call goes by id alone and learns."""
        try:
            peer = await self.client.storage.get_peer_by_id(user_id)
        except KeyError:
            return False
        return getattr(peer, "access_hash", None) != ZERO_HASH

    async def _on_loop(
        self, peer: tuple[int, int] | int | None, fn, *args, _write_by: float | None = None, _readmit=None, **kwargs
    ):
        """The call, on the client's loop, after making sure kurigram has the user's access hash
        (`_peer_for`; in the same hop: a send costs one trip to the loop). A call by id alone
        (ZERO_HASH) learns the hash kurigram stored from Telegram's answer (its invoke stores the
        answer's users; `_invoke_many` does the same for the answers it reads). A call that starts
        past `_write_by` (time.monotonic(): its admission ran out) is Lapsed, nothing sent."""
        _READMIT.set(_readmit)  # this task's own context: what `_invoke` asks before asking again
        if isinstance(peer, int):
            if not await self._knows(peer):
                raise NotCached(peer)
            self._remember_known(peer)
        elif peer is not None:
            await self.client.storage.update_peers([(peer[0], peer[1], "user", None)])
            self._remember_known(peer[0])
        if _write_by is not None and time.monotonic() > _write_by:
            raise Lapsed(f"reached the loop {(time.monotonic() - _write_by) * 1000:.0f} ms after its admission ran out")
        with asked_through(self._invoke):  # kurigram's own methods' requests, asked as ours are
            answer = await fn(*args, **kwargs)
        if peer is not None and not isinstance(peer, int) and peer[1] == ZERO_HASH:
            stored = await self.client.storage.get_peer_by_id(peer[0])
            if getattr(stored, "access_hash", ZERO_HASH) != ZERO_HASH:
                self._learnt_keep({peer[0]: stored.access_hash})
        return answer

    # --- hashes learnt from Telegram's answers --------------------------------------------------

    async def _learn(self, answers: list, wanted: set[int]) -> None:
        """The access hashes Telegram's answers name for `wanted` (users addressed by id alone),
        stored in kurigram's storage, as its invoke stores an answer's users, and kept for
        `peers_learnt`. A min user's hash is not one to address them with: left out."""
        found = {
            user.id: user.access_hash
            for answer in answers
            for user in getattr(answer, "users", None) or ()
            if isinstance(user, raw.types.User) and user.id in wanted and not user.min and user.access_hash
        }
        if found:
            await self.client.storage.update_peers([(uid, h, "user", None) for uid, h in found.items()])
            self._learnt_keep(found)

    def _learnt_keep(self, found: dict[int, int]) -> None:
        with self._learnt_lock:
            self._learnt.update(found)

    def _learnt_hand_on(self) -> None:
        """Hand the hashes learnt so far to `peers_learnt`, in the calling thread (database code
        never runs on the loop), in one call for a whole batch. Those users are no longer
        addressed by id alone. The call's own result stands whatever the product does with them:
        a failure to store them is logged, and they are handed on again after the next call."""
        with self._learnt_lock:
            learnt, self._learnt = self._learnt, {}
        if not learnt:
            return
        self._zero_hash.difference_update(learnt)
        if self.peers_learnt is None:
            return
        try:
            self.peers_learnt(learnt)
        except Exception:  # the send went; its hash is a saving, not its outcome: said loudly, kept
            log.exception("storing the access hashes Telegram named for users %s failed", sorted(learnt)[:20])
            with self._learnt_lock:
                for uid, access_hash in learnt.items():
                    self._learnt.setdefault(uid, access_hash)

    def _remember_known(self, user_id: int) -> None:
        if len(self._known_peers) >= KNOWN_PEERS_MAX:  # a worker lives for millions of sends
            self._known_peers.clear()  # forgotten ones are found in kurigram's storage again
        self._known_peers.add(user_id)

    def _input_peer(self, chat_id: int) -> raw.base.InputPeer | None:
        """The user's InputPeer from the access hash the claim brought or runbot stored (no
        kurigram storage write or read per send); None: kurigram resolves it (channels, groups,
        users it met itself)."""
        if chat_id <= 0:
            return None
        access_hash = self._peer_hashes.pop(chat_id, None)
        if access_hash is None and chat_id not in self._known_peers and self.peers is not None:
            access_hash = self.peers(chat_id)
        if access_hash is None:
            if chat_id in self._known_peers or self._run(self._knows(chat_id)):
                return None
            self._addressed_by_id(chat_id)
            access_hash = ZERO_HASH
        return raw.types.InputPeerUser(user_id=chat_id, access_hash=access_hash)

    # --- requests on the wire ---------------------------------------------------------------------

    async def _invoke_many(
        self, queries: list, *, write_by: float | None = None, one_sent: bool = False, ask_again: bool = True
    ) -> list:
        """Each query's answer (or the exception it raised), several in one MTProto container
        (kurigram.invoke_many: each request serialized once, on the wire as this client sends;
        `one_sent`: each sends one message, and only its id is read: a SentId)."""
        wired = [q if isinstance(q, Written) and q.query is not None else Written(self._wire(q).write(), q) for q in queries]
        by_id = [addressed_by_id(w.query) for w in wired]
        if not any(by_id):  # the common case: every user named by their hash
            return await invoke_many(self.client, wired, write_by=write_by, one_sent=one_sent, ask_again=ask_again)
        # A user addressed by id alone: their answer is read whole, for the hash it names.
        lean = [one_sent and user_id is None for user_id in by_id]
        answers = await invoke_many(self.client, wired, write_by=write_by, one_sent=lean, ask_again=ask_again)
        await self._learn([a for a, u in zip(answers, by_id, strict=True) if u is not None], {u for u in by_id if u})
        return answers

    def _wire(self, query: raw.core.TLObject) -> raw.core.TLObject:
        """The request as it goes on the wire: a client without updates asks Telegram for none."""
        return raw.functions.InvokeWithoutUpdates(query=query) if self.client.no_updates else query

    async def _invoke(self, query, *, one_sent: bool = False):
        """One request, sent as `_invoke_many` sends them; raises what kurigram's invoke raises.
        Left unanswered (no answer in time, 500, -503: it may or may not have been done), it is
        asked again as a batch's item is (retry.py, 3): the same bytes, so the same random_id,
        after kurigram's RETRY_DELAY, each time once the limiter admits it again (`_READMIT`, the
        call's own admission), ASK_AGAIN_MAX asks in all; then its cause is raised (a send's
        outcome is unknown). kurigram's own retries would go out past the limiter."""
        asked = 0
        while True:
            (answer,) = await self._invoke_many([query], one_sent=one_sent, ask_again=False)
            if not isinstance(answer, Unanswered):
                break
            asked += 1
            after = self.policy.after_unanswered(asked)
            if not after.again:
                raise answer.cause
            query = answer.query  # as it was written: the same random_id
            log.info("no answer from Telegram (%s): asked again, admitted again (ask %d)", answer.cause, asked + 1)
            await asyncio.sleep(after.wait)
            if (readmit := _READMIT.get()) is not None:
                await asyncio.get_running_loop().run_in_executor(None, readmit)
        if isinstance(answer, BaseException):
            raise answer
        return answer
