"""Admins' commands in the bot, and /myplan for everyone. Parse, call a service, reply: the rules
live in services (premium, moderation, broadcast_bot). Someone who is not an admin gets the usual
hint; bad input gets a one-line explanation and changes nothing. Every admin command is recorded
(AdminCommand) with what came of it, for the operator console.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from django.core.exceptions import ValidationError
from django.utils.html import escape

from botapp import clock
from botapp.models import AuditEntry, BotSettings, Broadcast, TelegramUser
from botapp.services import users
from botapp.services.audit import AuditContext, audit_context
from botapp.services.autodelete import auto_delete_set
from botapp.services.broadcast_bot import (
    broadcast_audience,
    broadcast_copy_draft,
    broadcast_report_attach,
    broadcast_report_text,
)
from botapp.services.broadcasts import broadcast_cancel, broadcast_start
from botapp.services.files import deep_link, file_store
from botapp.services.moderation import admin_command_record, bans_in_force, user_ban, user_unban
from botapp.services.premium import (
    DURATION_HELP,
    duration_parse,
    moment_text,
    plan_describe,
    premium_grant,
    premium_plans_active,
    premium_revoke,
)
from botapp.services.texts import human_span
from botapp.telegram.gateway import Button, CallbackQuery, Gateway, IncomingMessage, MessageNotFound, TelegramError

log = logging.getLogger(__name__)

# A word meant as a duration but not a valid one ("10", "0h", "-5h", "+2d"): refused, never taken as
# the start of the reason (which would make the ban permanent).
DURATION_LIKE = re.compile(r"^[-+\u2212]?\d")
LIST_MAX = 50  # lines in /premiumusers and /banlist; the rest are counted
AUTODELETE_USAGE = "Usage: /autodelete <minutes or duration>, e.g. /autodelete 30, /autodelete 2h, /autodelete off (never)."
NOT_A_REPLY = "Reply to the message you want to broadcast with /{command} (text, media or an album)."


@dataclass
class Reply:
    text: str
    ok: bool = True
    buttons: list[list[Button]] | None = field(default=None)


class Conversation(Protocol):
    """What admin commands need of the router that holds them (botapp/bot/router.py)."""

    gateway: Gateway
    admin_ids: frozenset[int]
    storage_channel_id: int | None
    unknown_text: str
    commands: dict[str, Callable]
    callbacks: dict[str, Callable]


def as_admin(act: Callable) -> Callable:
    """Run an admin's command or button as them for the audit trail (telegram:<id>): what the
    services it calls record names the admin. The message or callback is the first argument
    after `self`, if any."""

    @functools.wraps(act)
    def run(*args, **kwargs):
        update = next(a for a in args if isinstance(a, IncomingMessage | CallbackQuery))
        with audit_context(context=AuditContext(actor=f"telegram:{update.user.id}", via=AuditEntry.Via.BOT)):
            return act(*args, **kwargs)

    return run


def refuse(text: str) -> Reply:
    return Reply(text, ok=False)


def user_label(user: TelegramUser) -> str:
    name = f"@{user.username}" if user.username else " ".join(filter(None, [user.first_name, user.last_name]))
    return f"{user.telegram_id} ({escape(name)})" if name else str(user.telegram_id)


def admin_command(
    router: Conversation, name: str, act: Callable[[IncomingMessage, str], Reply]
) -> Callable[[IncomingMessage, str], None]:
    """The handler of admin command `name`: anyone else gets the router's "not understood" (the
    command's existence is not told); an admin gets `act`'s reply (`as_admin`: bad input a reply,
    never an exception), and the command is recorded with its result."""

    def handler(msg: IncomingMessage, arg: str) -> None:
        users.user_seen(tg=msg.user)
        if msg.user.id not in router.admin_ids:
            router.gateway.send_text(msg.chat_id, router.unknown_text)
            return
        reply = as_admin(act)(msg, arg)
        admin_command_record(admin_id=msg.user.id, command=name, arguments=arg, ok=reply.ok, result=reply.text)
        router.gateway.send_text(msg.chat_id, reply.text, buttons=reply.buttons)

    return handler


class AdminCommands:
    def __init__(self, router: Conversation):
        self.router = router
        self.gateway = router.gateway

    def install(self) -> None:
        admin = self._admin
        self.router.commands.update(
            {
                "myplan": self.cmd_myplan,
                "addpremium": admin("addpremium", self.addpremium),
                "delpremium": admin("delpremium", self.delpremium),
                "premiumusers": admin("premiumusers", self.premiumusers),
                "ban": admin("ban", self.ban),
                "unban": admin("unban", self.unban),
                "banlist": admin("banlist", self.banlist),
                "users": admin("users", self.users),
                "genlink": admin("genlink", self.genlink),
                "autodelete": admin("autodelete", self.autodelete),
                "broadcast": admin("broadcast", lambda msg, arg: self.broadcast(msg, pin=False)),
                "pbroadcast": admin("pbroadcast", lambda msg, arg: self.broadcast(msg, pin=True)),
            }
        )
        self.router.callbacks["bcast"] = self.cb_broadcast

    def _admin(self, name: str, act: Callable[[IncomingMessage, str], Reply]) -> Callable[[IncomingMessage, str], None]:
        return admin_command(self.router, name, act)

    # --- anyone -----------------------------------------------------------------------------

    def cmd_myplan(self, msg: IncomingMessage, arg: str) -> None:
        user, _ = users.user_seen(tg=msg.user)
        text, rows = plan_describe(user=user, conf=BotSettings.load())
        self.gateway.send_text(msg.chat_id, text, buttons=rows or None)

    # --- parsing ------------------------------------------------------------------------------

    def _user(self, token: str) -> TelegramUser | Reply:
        """The user a command names by Telegram id, or the refusal to send."""
        try:
            telegram_id = int(token)
        except ValueError:
            return refuse(f"{escape(token)} is not a Telegram user id (a number, e.g. 123456789).")
        user = TelegramUser.objects.filter(telegram_id=telegram_id).first()
        if user is None:
            return refuse(f"No user {telegram_id} has used this bot.")
        return user

    def _tell(self, user: TelegramUser, text: str) -> None:
        """A note to the user about their plan; they may have blocked the bot, which changes nothing."""
        try:
            self.gateway.send_text(user.telegram_id, text)
        except TelegramError as exc:
            log.info("user not told user=%s: %s", user.telegram_id, exc)

    # --- premium ------------------------------------------------------------------------------

    def addpremium(self, msg: IncomingMessage, arg: str) -> Reply:
        parts = arg.split()
        if len(parts) != 2:
            return refuse(escape("Usage: /addpremium <user id> <duration>, e.g. /addpremium 123456789 30d"))
        user = self._user(parts[0])
        if isinstance(user, Reply):
            return user
        duration = duration_parse(text=parts[1])
        if duration is None:
            return refuse(f"{escape(parts[1])} is not a duration. {DURATION_HELP}")
        plan = premium_grant(user=user, duration=duration, granted_by=msg.user.id)
        until = moment_text(moment=plan.ends_at)
        self._tell(user, f"⭐ You are premium until {until}: file links need no verification.")
        return Reply(f"⭐ {user_label(user)} is premium until {until}.")

    def delpremium(self, msg: IncomingMessage, arg: str) -> Reply:
        parts = arg.split()
        if len(parts) != 1:
            return refuse(escape("Usage: /delpremium <user id>"))
        user = self._user(parts[0])
        if isinstance(user, Reply):
            return user
        if premium_revoke(user=user) is None:
            return refuse(f"{user_label(user)} has no premium plan.")
        self._tell(user, "Your premium plan was ended by an admin. File links ask you to verify again.")
        return Reply(f"Premium of {user_label(user)} ended.")

    def premiumusers(self, msg: IncomingMessage, arg: str) -> Reply:
        plans = premium_plans_active()
        if not plans:
            return Reply("No premium users.")
        now = clock.now()
        lines = [f"<b>Premium users</b>: {len(plans)}"]
        lines += [
            f"• {user_label(p.user)}: until {moment_text(moment=p.ends_at)} ({human_span(delta=p.ends_at - now)} left)"
            for p in plans[:LIST_MAX]
        ]
        if len(plans) > LIST_MAX:
            lines.append(f"… and {len(plans) - LIST_MAX} more (see Premium plans in the admin).")
        return Reply("\n".join(lines))

    # --- bans ---------------------------------------------------------------------------------

    def ban(self, msg: IncomingMessage, arg: str) -> Reply:
        parts = arg.split(maxsplit=2)
        if not parts:
            return refuse(escape("Usage: /ban <user id> [duration] [reason], e.g. /ban 123456789 7d spam"))
        user = self._user(parts[0])
        if isinstance(user, Reply):
            return user
        if user.telegram_id in self.router.admin_ids:
            return refuse("Admins cannot be banned.")
        duration = duration_parse(text=parts[1]) if len(parts) > 1 else None
        rest = parts[2:] if duration is not None else parts[1:]
        if duration is None and len(parts) > 1 and DURATION_LIKE.match(parts[1]):
            return refuse(f"{escape(parts[1])} is not a duration. {DURATION_HELP} Leave it out to ban until /unban.")
        reason = " ".join(rest).strip()
        ban = user_ban(user=user, duration=duration, reason=reason, banned_by=msg.user.id)
        until = f"until {moment_text(moment=ban.until)}" if ban.until else "until /unban"
        return Reply(f"🚫 {user_label(user)} is banned {until}." + (f" Reason: {escape(reason)}" if reason else ""))

    def unban(self, msg: IncomingMessage, arg: str) -> Reply:
        parts = arg.split()
        if len(parts) != 1:
            return refuse(escape("Usage: /unban <user id>"))
        user = self._user(parts[0])
        if isinstance(user, Reply):
            return user
        if not user_unban(user=user, lifted_by=msg.user.id):
            return refuse(f"{user_label(user)} is not banned.")
        return Reply(f"✅ {user_label(user)} is no longer banned.")

    def banlist(self, msg: IncomingMessage, arg: str) -> Reply:
        bans, total = bans_in_force(limit=LIST_MAX)
        if not total:
            return Reply("Nobody is banned.")
        lines = [f"<b>Banned users</b>: {total}"]
        for b in bans:
            until = f"until {moment_text(moment=b.until)}" if b.until else "until /unban"
            lines.append(f"• {user_label(b.user)}: {until}" + (f" ({escape(b.reason)})" if b.reason else ""))
        if total > len(bans):
            lines.append(f"… and {total - len(bans)} more (see User bans in the admin).")
        return Reply("\n".join(lines))

    # --- users and links ----------------------------------------------------------------------

    def users(self, msg: IncomingMessage, arg: str) -> Reply:
        counts = users.user_counts()
        premium = TelegramUser.objects.filter(premium_until__gt=clock.now()).count()
        _, banned = bans_in_force(limit=0)
        lines = [f"<b>Users</b>: {counts['total']} (new today: {counts['new_today']})"]
        lines += [f"• {label}: {counts['by_state'][state]}" for state, label in TelegramUser.State.choices]
        lines.append(f"• Premium: {premium}")
        lines.append(f"• Banned: {banned}")
        return Reply("\n".join(lines))

    def genlink(self, msg: IncomingMessage, arg: str) -> Reply:
        storage = self.router.storage_channel_id
        if storage is None:
            return refuse("Links cannot be made: STORAGE_CHANNEL_ID is not set.")
        reply = msg.reply_to
        if reply is None:
            return refuse("Reply with /genlink to a message forwarded from the storage channel.")
        if reply.forward_from_chat_id != storage or not reply.forward_from_message_id:
            return refuse("That message was not forwarded from the storage channel: forward one from there, then reply to it.")
        stored = file_store(
            source_chat_id=storage, message_ids=[reply.forward_from_message_id], title="/genlink", created_by=msg.user.id
        )
        link = deep_link(bot_username=self.gateway.bot_username, payload=stored.share_id)
        return Reply(f"🔗 {link}", buttons=[[Button("🔗 Open link", url=link)]])

    # --- settings -----------------------------------------------------------------------------

    def autodelete(self, msg: IncomingMessage, arg: str) -> Reply:
        """/autodelete [time]: the deletion time of delivered files, read or set from the bot (the
        file-store bot's "deletion time: configurable via admin bot", shared/seeds/001)."""
        word = arg.strip().lower()
        if not word:
            minutes = BotSettings.load().auto_delete_minutes
            now = (
                f"Files are deleted {human_span(delta=timedelta(minutes=minutes))} after delivery."
                if minutes
                else "Files are never deleted."
            )
            return Reply(f"{now} {escape(AUTODELETE_USAGE)}")
        if word in ("off", "never", "0"):
            minutes = 0
        elif word.isdigit():
            minutes = int(word)
        elif (duration := duration_parse(text=word)) is not None:
            minutes = int(duration.total_seconds() // 60)
        else:
            return refuse(f"{escape(arg.strip())} is not a time. {escape(AUTODELETE_USAGE)}")
        try:
            auto_delete_set(minutes=minutes)
        except ValidationError as exc:
            return refuse(escape(exc.messages[0]))
        if not minutes:
            return Reply("🗑 Auto-delete is off: files delivered from now on stay in users' chats.")
        return Reply(f"🗑 Files delivered from now on are deleted {human_span(delta=timedelta(minutes=minutes))} after delivery.")

    # --- broadcasts ---------------------------------------------------------------------------

    def broadcast(self, msg: IncomingMessage, *, pin: bool) -> Reply:
        command = "pbroadcast" if pin else "broadcast"
        if msg.reply_to is None:
            return refuse(NOT_A_REPLY.format(command=command))
        ids = [msg.reply_to.message_id]
        if msg.reply_to.media_group_id is not None:
            try:
                ids = self.gateway.album_ids(msg.chat_id, msg.reply_to.message_id)
            except MessageNotFound:
                return refuse("That message is gone; send it again and reply to it.")
        audience = broadcast_audience()
        if not audience:
            return refuse("There are no active users to send it to.")
        draft = broadcast_copy_draft(chat_id=msg.chat_id, message_ids=ids, pin=pin, created_by=msg.user.id)
        what = f"this album ({len(ids)} items)" if len(ids) > 1 else "this message"
        pinned = ", pinned in each chat" if pin else ""
        return Reply(
            f"Send {what} to <b>{audience}</b> active users{pinned}?",
            buttons=[
                [
                    Button("✅ Send", callback_data=f"bcast:send:{draft.pk}"),
                    Button("❌ Cancel", callback_data=f"bcast:cancel:{draft.pk}"),
                ]
            ],
        )

    @as_admin
    def cb_broadcast(self, cq: CallbackQuery, arg: str) -> None:
        """Send / Cancel under a /broadcast confirmation, Cancel under its progress message."""
        action, _, pk = arg.partition(":")
        if cq.user.id not in self.router.admin_ids:
            self.gateway.answer_callback(cq.id, "This button is for admins.")
            return
        broadcast = Broadcast.objects.filter(pk=int(pk) if pk.isdigit() else 0).first()
        if broadcast is None or action not in ("send", "cancel", "stop"):
            self.gateway.answer_callback(cq.id, "This broadcast no longer exists.", alert=True)
            return
        try:
            if action == "send":
                broadcast_report_attach(broadcast=broadcast, chat_id=cq.chat_id, message_id=cq.message_id)
                broadcast_start(broadcast=broadcast)
                answer = "Sending."
            elif action == "cancel":
                if broadcast.status != Broadcast.Status.DRAFT:
                    raise ValidationError("It was sent already: use the progress message's Cancel.")
                Broadcast.objects.filter(pk=broadcast.pk, status=Broadcast.Status.DRAFT).update(
                    status=Broadcast.Status.CANCELLED, finished_at=clock.now()
                )
                self.gateway.edit_text(cq.chat_id, cq.message_id, "Broadcast cancelled: nothing was sent.")
                answer = "Cancelled."
            else:
                broadcast_cancel(broadcast=broadcast)
                answer = "Stopped."
        except ValidationError as exc:
            admin_command_record(
                admin_id=cq.user.id, command=f"broadcast:{action}", arguments=pk, ok=False, result=exc.messages[0]
            )
            self.gateway.answer_callback(cq.id, exc.messages[0], alert=True)
            return
        admin_command_record(admin_id=cq.user.id, command=f"broadcast:{action}", arguments=pk, ok=True, result=answer)
        if action != "cancel":
            broadcast.refresh_from_db()
            text, buttons = broadcast_report_text(broadcast=broadcast)
            self.gateway.edit_text(cq.chat_id, cq.message_id, text, buttons=buttons or None)
        self.gateway.answer_callback(cq.id, answer)
