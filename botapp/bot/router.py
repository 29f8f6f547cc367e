"""Updates -> service calls -> replies. No pyrogram here: botapp/telegram/updates.py (real Telegram) and the
offline sandbox both feed this the same domain updates, so they run the very same code.

Each handler parses, calls services, and replies; business rules live in `botapp/services/`. Each
message, callback query and broadcast-channel post is claimed before it is handled
(services/updates.py), so one Telegram sends again is recognised, and an admin's message, a
button's tap or a broadcast post never runs twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.utils.html import escape

from botapp.bot.admin_commands import AdminCommands
from botapp.bot.gates import Gates
from botapp.bot.growth_commands import GrowthCommands
from botapp.models import BotSettings, TelegramUser
from botapp.services import batches, users
from botapp.services.broadcast_bot import channel_post_broadcast
from botapp.services.campaign_stats import campaign_stats, campaign_stats_text
from botapp.services.channel_posts import post_link_attach
from botapp.services.delivery import Delivery, channels_missing
from botapp.services.growth_stats import growth_today_text
from botapp.services.optout import optout_data, optout_handle
from botapp.services.outgoing import TAP_CALLBACK
from botapp.services.posts import welcome_send
from botapp.services.posts_commands import channel_post_keep, posts_command_answer, posts_command_channels
from botapp.services.premium import user_is_premium
from botapp.services.sequences import sequence_payloads, sequences_enroll, sequences_enroll_campaign
from botapp.services.shortener import shortener_for
from botapp.services.stats import button_clicks_by_key, stat_today
from botapp.services.taps import tap_handle
from botapp.services.texts import text_render
from botapp.services.updates import Kind, update_claim, update_done, update_run
from botapp.telegram.gateway import (
    AlreadySent,
    BotUnauthorized,
    Button,
    CallbackQuery,
    ChannelPost,
    Gateway,
    IncomingMessage,
    OutcomeUnknown,
    TelegramError,
    UserBlocked,
    UserDeactivated,
)
from botapp.telegram.limiter import REPLY_PREMIUM, reply_class_raise
from botapp.telegram.limits import TEXT_LENGTH, utf16_length

log = logging.getLogger(__name__)

CLICK_KEYS_SHOWN = 20  # button keys /stats names; the rest are counted

SORRY = "Sorry, something went wrong on our side. Please try again in a minute."
UNKNOWN = "I did not understand that. Send /help to see what I can do."
# What an admin's plain text gets: how to send it to users, not "I did not understand that".
ADMIN_TEXT = (
    "To send this to every active user, reply to it with /broadcast (/pbroadcast pins it). "
    "Files and forwarded storage-channel posts are stored. /help lists the admin commands."
)
ADMIN_HELP = """<b>Admin commands</b>
Send a file, an album or forward a storage-channel post: it is stored and you get its link.
/batch: store a range of storage-channel posts as one link (forward the first and the last); /cancel stops it
/genlink: reply to a post forwarded from the storage channel to get its link
/broadcast, /pbroadcast: reply to a message to send it to every active user (p: pinned)
/ban &lt;user id&gt; [duration] [reason], /unban &lt;user id&gt;, /banlist
/addpremium &lt;user id&gt; &lt;duration&gt;, /delpremium &lt;user id&gt;, /premiumusers
/autodelete [time]: when delivered files are deleted (e.g. 30, 2h, off)
/gencode &lt;premium time&gt; [count] [uses]: redeem codes that give premium
/users, /stats: counts"""
# What an admin is told when runbot died while handling their message: it is never run twice.
INTERRUPTED = (
    "⚠️ runbot was restarted while it handled your message “{text}”. It was not run again, in case it "
    "had already taken effect: check, and send it again if it had not."
)


class Router:
    unknown_text = UNKNOWN

    def __init__(
        self,
        gateway: Gateway,
        *,
        admin_ids: frozenset[int],
        storage_channel_id: int | None = None,
        shortener=None,
        broadcast_channel_id: int | None = None,
        posts_channels: frozenset[int] | None = None,
        user_history=None,
    ):
        self.gateway = gateway
        # The operator's user session (botapp/telegram/user_session.py: UserHistory), which reads
        # the public channels of posts commands; None: such a command says it cannot be read.
        self.user_history = user_history
        self.admin_ids = admin_ids
        self.storage_channel_id = storage_channel_id
        self.broadcast_channel_id = broadcast_channel_id  # marked posts there are broadcast
        self.shortener = shortener  # None: the one configured in Bot settings, per request
        # The posts commands' channels, whose posts runbot hears: read now unless given (runbot
        # reads them off its event loop, where the database may not be used).
        self.posts_channels = posts_command_channels() if posts_channels is None else posts_channels
        self.run = update_run()  # this runbot's claims on updates are told from a dead run's by it
        # Per handler thread: whether the update being handled was claimed before by a run that
        # died handling it (what it did then may be in the database: a delivery looks for its row).
        self._handling = threading.local()
        self.commands: dict[str, Callable[[IncomingMessage, str], None]] = {
            "start": self.cmd_start,
            "help": self.cmd_help,
            "about": self.cmd_text("about_text"),
            "faq": self.cmd_text("faq_text"),
            "stop": self.cmd_stop,
            "stats": self.cmd_stats,
            "batch": self.cmd_batch,
            "cancel": self.cmd_cancel,
        }
        self.callbacks: dict[str, Callable[[CallbackQuery, str], None]] = {
            "close": self.cb_close,
            "retry": self.cb_retry,
            TAP_CALLBACK: self.cb_tap,
        }
        AdminCommands(self).install()  # admins' commands (premium, bans, broadcasts, links) and /myplan
        self.growth = GrowthCommands(self)  # /refer, /redeem, /gencode and referral links
        self.growth.install()
        self.gates = Gates(self)  # fair use and owner-only mode, before an update is handled
        self.gates.install()  # /authorize, /unauthorize

    # --- entry points: never raise ------------------------------------------------------------

    def handle_message(self, msg: IncomingMessage) -> None:
        # Everything an admin sends is once-only (commands, files to store, /batch steps); a user's
        # message can be handled again if runbot died midway (its sends carry fixed random_ids).
        once = msg.user.id in self.admin_ids

        def run() -> None:
            with self.gates.replies(msg.user):
                self._once(
                    Kind.MESSAGE,
                    msg.chat_id,
                    msg.message_id,
                    once,
                    lambda: self._dispatch_message(msg),
                    lambda: self._interrupted(msg),
                )

        self._guarded(msg.user.id, run)

    def handle_callback(self, cq: CallbackQuery) -> None:
        def run():
            name, _, arg = cq.data.partition(":")
            handler = self.callbacks.get(name)
            if handler is None:
                self.gateway.answer_callback(cq.id, "This button is no longer available.")
                return
            handler(cq, arg)

        # Telegram never sends a callback query again after a restart (getDifference has none), so
        # one that comes twice is twice in one run: once-only.
        def replied() -> None:
            with self.gates.replies(cq.user):
                self._once(Kind.CALLBACK, cq.user.id, int(cq.id), True, run)

        self._guarded(cq.user.id, replied)

    def _once(self, kind: int, chat_id: int, update_id: int, once: bool, handle: Callable[[], None], interrupted=None) -> None:
        """`handle()` unless this update was handled before (services/updates.py: update_claim); done
        whatever it answered. A once-only update that a dead run left midway gets `interrupted()`."""
        claim = update_claim(kind=kind, chat_id=chat_id, update_id=update_id, once=once, run=self.run)
        if not claim.handle:
            if claim.interrupted:
                log.warning(
                    "update kind=%s chat=%s id=%s: runbot died while handling it; not run again", kind, chat_id, update_id
                )
                try:
                    if interrupted is not None:
                        interrupted()
                finally:
                    update_done(claim=claim)
            else:
                log.info(
                    "update kind=%s chat=%s id=%s came again (%s times): not handled again",
                    kind,
                    chat_id,
                    update_id,
                    claim.attempts,
                )
            return
        if claim.again:
            log.warning(
                "update kind=%s chat=%s id=%s: runbot died while handling it; handling it again", kind, chat_id, update_id
            )
        self._handling.again = claim.again
        try:
            handle()
        finally:
            self._handling.again = None
            update_done(claim=claim)

    def _interrupted(self, msg: IncomingMessage) -> None:
        text = msg.text if len(msg.text) <= 60 else msg.text[:59] + "…"
        self.gateway.send_text(msg.chat_id, INTERRUPTED.format(text=escape(text or "(a file)")))

    def _guarded(self, user_id: int, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BotUnauthorized as exc:
            # The token was revoked (or the bot deleted): no reply can go out, and no user is to blame.
            log.critical("Telegram refuses the bot itself (%s): check BOT_TOKEN in @BotFather. user=%s", exc, user_id)
        except (UserBlocked, UserDeactivated) as exc:
            users.users_mark_unreachable(by_telegram_id={user_id: users.unreachable_state(exc=exc)})
        except OutcomeUnknown as exc:
            # Telegram lost the answer to a reply (500 INTERNAL, -503, a dropped connection): it may
            # well have arrived, so no "Sorry" after it, and it is not sent again.
            log.warning("a reply to user=%s may or may not have arrived: %s", user_id, exc)
        except AlreadySent as exc:
            # Asked again with the same random_id, Telegram refused the repeat: it had arrived.
            log.warning("a reply to user=%s arrived, its answer lost (message id unknown): %s", user_id, exc)
        except Exception:
            log.exception("update failed user=%s", user_id)
            try:
                self.gateway.send_text(user_id, SORRY)
            except TelegramError:
                pass

    def admit(self, update: object) -> bool:
        """Whether runbot handles `update` (gates.py: fair use, owner-only mode); a user refused is
        answered as the gates say. Never raises."""
        user = getattr(update, "user", None)
        admitted = [False]  # the gates failed: the user was told "Sorry" (_guarded)

        def gates() -> None:
            admitted[0] = self.gates.admit(update)

        if user is None:
            return True
        self._guarded(user.id, gates)
        return admitted[0]

    def update_priority(self, update: object) -> int:
        """Which waiting updates runbot handles first (gates.py: admins, then users it has not
        heard from in the last seconds, then the rest). On the event loop: no database."""
        user = getattr(update, "user", None)
        return self.gates.priority(user.id if user is not None else None)

    def handle_bot_stopped(self, *, user_id: int, stopped: bool) -> None:
        """The user blocked the bot (stopped) or unblocked it."""
        users.user_block_changed(telegram_id=user_id, blocked=stopped)

    def channel_post_sources(self) -> frozenset[int]:
        """The channels whose posts runbot hands to `handle_channel_post`: the storage channel
        (share links), the broadcast source channel and the posts commands' channels (read when
        runbot starts)."""
        return frozenset({self.storage_channel_id, self.broadcast_channel_id} - {None}) | self.posts_channels

    def handle_channel_post(self, post: ChannelPost) -> None:
        """A post in the broadcast source channel that starts with the marker is broadcast; any other
        post made straight in the storage channel gets its share link, if Bot settings ask for one.
        A post in the broadcast channel is claimed, once-only: a broadcast is never started twice."""

        def run() -> None:
            if post.chat_id in self.posts_channels:
                channel_post_keep(post=post)
            conf = BotSettings.load()
            if post.chat_id == self.broadcast_channel_id and channel_post_broadcast(post=post, conf=conf) is not None:
                return
            if post.chat_id == self.storage_channel_id:
                post_link_attach(
                    gateway=self.gateway,
                    chat_id=post.chat_id,
                    message_id=post.message_id,
                    text=post.text,
                    mode=conf.channel_post_links,
                )

        try:
            if post.chat_id == self.broadcast_channel_id:
                self._once(Kind.CHANNEL_POST, post.chat_id, post.message_id, True, run)
            else:  # a storage-channel post seen again keeps its one link (post_link_attach): no claim needed
                run()
        except BotUnauthorized as exc:
            log.critical("Telegram refuses the bot itself (%s): check BOT_TOKEN in @BotFather", exc)
        except Exception:
            log.exception("channel post failed chat=%s message=%s", post.chat_id, post.message_id)

    def handle_join_request(self, *, channel_id: int, user_id: int) -> None:
        """A user asked to join a join-request-mode channel: that counts as subscribed."""
        users.join_request_record(channel_id=channel_id, user_id=user_id)

    def _dispatch_message(self, msg: IncomingMessage) -> None:
        text = msg.text.strip()
        if msg.user.id in self.admin_ids and (msg.has_media or msg.forward_from_chat_id is not None) and not text.startswith("/"):
            self.admin_store(msg)
            return
        if text.startswith("/"):
            command, _, arg = text[1:].partition(" ")
            command = command.split("@", 1)[0].lower()  # /start@CourierBot
            handler = self.commands.get(command)
            if handler is not None:
                handler(msg, arg.strip())
                return
        users.user_seen(tg=msg.user)
        if not text.startswith("/"):
            self.gateway.send_text(msg.chat_id, ADMIN_TEXT if msg.user.id in self.admin_ids else UNKNOWN)
            return
        # A command the operator defined (a channel's latest posts), or one their previous bot had
        # (Bot settings: its note), not "I did not understand".
        history = self.user_history.channel_history if self.user_history is not None else None
        answer = posts_command_answer(name=command, history=history) or BotSettings.load().retired_command_note(command)
        self.gateway.send_text(msg.chat_id, answer or UNKNOWN)

    # --- commands -------------------------------------------------------------------------------

    def cmd_start(self, msg: IncomingMessage, payload: str) -> None:
        """/start: a file or verification link is answered by the delivery; anything else (no
        payload, or a campaign tag) gets the welcome, or "welcome back" for a returning user, who
        is enrolled only in the sequences of a campaign they had not come through yet."""
        user, created = users.user_seen(tg=msg.user, start_payload=payload)
        referred = self.growth.start_referred(user=user, created=created, payload=payload, is_bot=msg.user.is_bot)
        if user_is_premium(user=user):
            reply_class_raise(REPLY_PREMIUM)  # queued before other users' replies
        if created:
            sequences_enroll(user=user)
        else:
            users.user_resume(user=user)
        conf = BotSettings.load()
        update_key = f"m{msg.chat_id}.{msg.message_id}"  # a replay of this update delivers with the same random_ids
        delivery = self.delivery(user, msg.chat_id, conf, new_user=created, update_key=update_key, after_id=msg.message_id)
        if payload and delivery.request(payload, campaigns=sequence_payloads()):
            return
        if not created and payload:  # a campaign tag: it becomes their latest, and its sequences start if new to them
            users.user_payload_record(user=user, payload=payload)
            sequences_enroll_campaign(user=user, payload=payload)
        if created:  # the welcome text, or the welcome post, with the welcome buttons
            welcome_send(gateway=self.gateway, conf=conf, user=user, tg=msg.user, chat_id=msg.chat_id)
            if referred:  # counted once they pass the gates
                self.growth.referral_gates(user=user, chat_id=msg.chat_id, conf=conf)
            return
        self.gateway.send_text(msg.chat_id, text_render(template=conf.welcome_back_text, tg=msg.user))

    def delivery(
        self,
        user: TelegramUser,
        chat_id: int,
        conf: BotSettings,
        *,
        new_user: bool = False,
        update_key: str = "",
        after_id: int | None = None,
    ) -> Delivery:
        again = getattr(self._handling, "again", None)
        return Delivery(
            new_user=new_user,
            update_key=update_key,
            after_id=after_id,
            again=True if again is None else again,  # outside a claimed update: look, to be sure
            gateway=self.gateway,
            user=user,
            chat_id=chat_id,
            conf=conf,
            shortener=self.shortener or shortener_for(api_url=conf.shortener_api_url, api_key=conf.shortener_api_key),
            is_admin=user.telegram_id in self.admin_ids,
        )

    def cmd_text(self, field: str) -> Callable[[IncomingMessage, str], None]:
        """/about, /faq: the text of Bot settings, with the button to the operator's channel when
        one is set (the drip bot's "Join Channel", shared/seeds/002)."""

        def handler(msg: IncomingMessage, arg: str) -> None:
            users.user_seen(tg=msg.user)
            conf = BotSettings.load()
            buttons = [[Button(conf.channel_button_text, url=conf.channel_url)]] if conf.channel_url else None
            self.gateway.send_text(msg.chat_id, text_render(template=getattr(conf, field), tg=msg.user), buttons=buttons)

        return handler

    def cmd_help(self, msg: IncomingMessage, arg: str) -> None:
        """/help: Bot settings' help text; admins get their commands under it."""
        users.user_seen(tg=msg.user)
        text = text_render(template=BotSettings.load().help_text, tg=msg.user)
        if msg.user.id in self.admin_ids:
            text = f"{text}\n\n{ADMIN_HELP}"
        self.gateway.send_text(msg.chat_id, text)

    def cmd_stop(self, msg: IncomingMessage, arg: str) -> None:
        user, _ = users.user_seen(tg=msg.user)
        stopped = users.user_stop(user=user)
        self.gateway.send_text(msg.chat_id, users.STOPPED_TEXT if stopped else users.STOPPED_ALREADY_TEXT)

    def cmd_stats(self, msg: IncomingMessage, arg: str) -> None:
        users.user_seen(tg=msg.user)
        if msg.user.id not in self.admin_ids:
            self.gateway.send_text(msg.chat_id, UNKNOWN)
            return
        counts = users.user_counts()
        today = stat_today()
        lines = [f"<b>Users</b>: {counts['total']} (new today: {counts['new_today']})"]
        lines += [f"• {label}: {counts['by_state'][state]}" for state, label in TelegramUser.State.choices]
        lines.append(
            f"<b>Today</b>: {today['deliveries']} deliveries, {today['verifications']} verifications, {today['bypasses']} bypasses"
        )
        clicks = button_clicks_by_key()
        shown = ", ".join(f"{escape(key)} {n}" for key, n in list(clicks.items())[:CLICK_KEYS_SHOWN])
        more = f", …and {len(clicks) - CLICK_KEYS_SHOWN} more" if len(clicks) > CLICK_KEYS_SHOWN else ""
        lines.append(f"<b>Button clicks</b>: {sum(clicks.values())}" + (f" ({shown}{more})" if clicks else ""))
        lines.append(growth_today_text())
        text = "\n".join(lines)
        sequences = campaign_stats()
        if sequences:  # a block per sequence, cut to what one message holds
            head = f"{text}\n\n<b>Sequences</b>\n"
            text = head + campaign_stats_text(stats=sequences, room=TEXT_LENGTH - utf16_length(head))
        self.gateway.send_text(msg.chat_id, text)

    # --- admins: storing files ----------------------------------------------------------------------

    def _admin_only(self, msg: IncomingMessage) -> bool:
        users.user_seen(tg=msg.user)
        if msg.user.id not in self.admin_ids:
            self.gateway.send_text(msg.chat_id, UNKNOWN)
            return False
        if self.storage_channel_id is None:
            self.gateway.send_text(msg.chat_id, "Files cannot be stored: STORAGE_CHANNEL_ID is not set.")
            return False
        return True

    def cmd_batch(self, msg: IncomingMessage, arg: str) -> None:
        if self._admin_only(msg):
            batches.batch_start(admin_id=msg.user.id)
            self.gateway.send_text(msg.chat_id, batches.ASK_FIRST)

    def cmd_cancel(self, msg: IncomingMessage, arg: str) -> None:
        if self._admin_only(msg):
            cancelled = batches.batch_cancel(admin_id=msg.user.id)
            self.gateway.send_text(msg.chat_id, "Batch cancelled." if cancelled else "Nothing to cancel.")

    def admin_store(self, msg: IncomingMessage) -> None:
        if not self._admin_only(msg):
            return
        reply = batches.admin_message_store(gateway=self.gateway, msg=msg, storage_channel_id=self.storage_channel_id)
        if reply is None:
            return  # a message of an album that another of its messages stores (and answers for)
        buttons = [[Button("🔗 Open link", url=reply.link)]] if reply.link else None
        self.gateway.send_text(msg.chat_id, reply.text, buttons=buttons)

    # --- callbacks ------------------------------------------------------------------------------

    def cb_close(self, cq: CallbackQuery, arg: str) -> None:
        self.gateway.delete_messages(cq.chat_id, [cq.message_id])
        self.gateway.answer_callback(cq.id)

    def cb_tap(self, cq: CallbackQuery, arg: str) -> None:
        """A callback button an operator wrote (`Text | tap:key`): recorded, answered, turned. The
        opt-out button and its confirmation are signed taps too (services/optout.py)."""
        user, _ = users.user_seen(tg=cq.user)
        if optout_data(arg=arg):
            optout_handle(gateway=self.gateway, cq=cq, user=user, arg=arg)
            return
        tap_handle(gateway=self.gateway, cq=cq, user=user, arg=arg)

    def cb_retry(self, cq: CallbackQuery, share_id: str) -> None:
        """ "Try again" under a join prompt: check membership for real, then finish the request."""
        user, _ = users.user_seen(tg=cq.user)
        missing = channels_missing(gateway=self.gateway, user_id=user.telegram_id)
        if missing:
            names = ", ".join(c.title for c in missing)
            self.gateway.answer_callback(cq.id, f"You have not joined {names} yet.", alert=True)
            return
        self.gateway.answer_callback(cq.id)
        self.gateway.delete_messages(cq.chat_id, [cq.message_id])
        self.delivery(user, cq.chat_id, BotSettings.load(), update_key=f"c{cq.id}", after_id=cq.message_id).request(share_id)
