"""Referrals and redeem codes in the bot: `/refer`, `/redeem <code>`, the admins' `/gencode`, and
what a `/start ref_<code>` adds to the welcome (the gates a referred user passes to count). Parse,
call a service, reply: the rules live in services/referrals.py and services/redeem.py.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils.html import escape

from botapp import clock
from botapp.bot.admin_commands import Conversation, as_admin
from botapp.models import BotSettings, TelegramUser
from botapp.services import users
from botapp.services.delivery import JOIN_FIRST, JOIN_FIRST_MANY, channels_missing
from botapp.services.files import deep_link
from botapp.services.invites import invite_link_current
from botapp.services.moderation import admin_command_record
from botapp.services.premium import DURATION_HELP, duration_parse, moment_text
from botapp.services.redeem import CODES_MAX, Redeem, RedeemError, code_redeem, codes_generate
from botapp.services.referrals import (
    REF_PREFIX,
    referral_code_for,
    referral_counts,
    referral_gates_passed,
    referral_payload,
    referral_record,
)
from botapp.services.texts import human_span
from botapp.services.verification import user_is_verified
from botapp.telegram.gateway import Button, CallbackQuery, IncomingMessage

GENCODE_USAGE = (
    "Usage: /gencode &lt;premium time&gt; [how many codes] [uses per code], e.g. /gencode 7d 10 "
    f"(10 codes of 7 days, each for one user), at most {CODES_MAX} codes."
)
REDEEM_USAGE = "Send the code after the command, like /redeem ABCD-EFGH-JKLM-NPQR."
REFERRAL_GATES = "To count for the friend who invited you, pass the check below once."
REDEEM_REPLIES = {
    Redeem.EXPIRED: "This code has expired.",
    Redeem.USED_UP: "This code has been used as many times as it may be.",
    Redeem.ALREADY: "You have redeemed this code already: each code gives premium once per user.",
}


class GrowthCommands:
    def __init__(self, router: Conversation):
        self.router = router
        self.gateway = router.gateway

    def install(self) -> None:
        self.router.commands.update({"refer": self.cmd_refer, "redeem": self.cmd_redeem, "gencode": self.cmd_gencode})
        self.router.callbacks["refgate"] = self.cb_gates

    # --- /start ref_<code> ----------------------------------------------------------------------

    @staticmethod
    def start_referred(*, user: TelegramUser, created: bool, payload: str, is_bot: bool) -> bool:
        """A /start that created `user`: whether it came through someone's referral link (and was
        recorded as their pending referral). No query unless the payload is shaped like one."""
        code = referral_payload(payload=payload) if created else None
        return code is not None and referral_record(referee=user, code=code, is_bot=is_bot) is not None

    def referral_gates(self, *, user: TelegramUser, chat_id: int, conf: BotSettings) -> None:
        """The referred user's gates: the join prompt, else the Verify prompt (a token for no file),
        else (every gate passed) the referral counted."""
        missing = channels_missing(gateway=self.gateway, user_id=user.telegram_id)
        if missing:
            rows = [
                [Button(f"Join {c.title}", url=link)]
                for c in missing
                if (link := invite_link_current(gateway=self.gateway, channel=c))
            ]
            rows.append([Button("🔄 Try again", callback_data="refgate:")])
            self.gateway.send_text(chat_id, JOIN_FIRST if len(missing) == 1 else JOIN_FIRST_MANY, buttons=rows)
            return
        if conf.verification_enabled and not user_is_verified(user=user):
            self.router.delivery(user, chat_id, conf).verify_prompt("", intro=REFERRAL_GATES)
            return
        referral_gates_passed(user=user, conf=conf)

    def cb_gates(self, cq: CallbackQuery, arg: str) -> None:
        """ "Try again" under a referred user's join prompt."""
        user, _ = users.user_seen(tg=cq.user)
        missing = channels_missing(gateway=self.gateway, user_id=user.telegram_id)
        if missing:
            self.gateway.answer_callback(cq.id, f"You have not joined {', '.join(c.title for c in missing)} yet.", alert=True)
            return
        self.gateway.answer_callback(cq.id)
        self.gateway.delete_messages(cq.chat_id, [cq.message_id])
        self.referral_gates(user=user, chat_id=cq.chat_id, conf=BotSettings.load())

    # --- anyone ---------------------------------------------------------------------------------

    def cmd_refer(self, msg: IncomingMessage, arg: str) -> None:
        """/refer: the user's link and how many it brought."""
        user, _ = users.user_seen(tg=msg.user)
        conf = BotSettings.load()
        link = deep_link(bot_username=self.gateway.bot_username, payload=f"{REF_PREFIX}{referral_code_for(user=user)}")
        counts = referral_counts(user=user)
        lines = [f"🔗 Your invite link:\n{link}", f"Friends counted: {counts.counted}"]
        if counts.pending or counts.held:
            lines[-1] += f" ({counts.pending} not through the checks yet, {counts.held} being reviewed)"
        if conf.referrals_needed:
            reward = human_span(delta=timedelta(hours=conf.referral_premium_hours))
            left = conf.referrals_needed - counts.counted % conf.referrals_needed
            lines.append(f"Every {conf.referrals_needed} friends who join give you {reward} of premium: {left} to go.")
        lines.append("A friend counts once they are new to this bot and have passed its checks.")
        self.gateway.send_text(msg.chat_id, "\n\n".join(lines))

    def cmd_redeem(self, msg: IncomingMessage, arg: str) -> None:
        user, _ = users.user_seen(tg=msg.user)
        if not arg.strip():
            self.gateway.send_text(msg.chat_id, REDEEM_USAGE)
            return
        outcome = code_redeem(user=user, text=arg)
        if outcome.result is Redeem.REDEEMED:
            text = (
                f"⭐ Code redeemed: {human_span(delta=outcome.code.premium)} of premium. You are premium until "
                f"{moment_text(moment=outcome.plan.ends_at)}: file links need no verification."
            )
        elif outcome.result is Redeem.COOLING:
            text = f"Too many wrong codes. Try again in {human_span(delta=outcome.until - clock.now())}."
        elif outcome.result is Redeem.WRONG:
            text = f"This code is not valid. Check it and try again ({outcome.tries_left} more wrong codes allowed)."
        else:
            text = REDEEM_REPLIES[outcome.result]
        self.gateway.send_text(msg.chat_id, text)

    # --- admins ---------------------------------------------------------------------------------

    def cmd_gencode(self, msg: IncomingMessage, arg: str) -> None:
        """/gencode <premium time> [count] [uses]: the codes, shown this once. The record of the
        command keeps their first characters only."""
        users.user_seen(tg=msg.user)
        if msg.user.id not in self.router.admin_ids:
            self.gateway.send_text(msg.chat_id, self.router.unknown_text)
            return
        ok, text, record = as_admin(self._gencode)(msg, arg)
        admin_command_record(admin_id=msg.user.id, command="gencode", arguments=arg, ok=ok, result=record)
        self.gateway.send_text(msg.chat_id, text)

    def _gencode(self, msg: IncomingMessage, arg: str) -> tuple[bool, str, str]:
        parts = arg.split()
        if not 1 <= len(parts) <= 3:
            return False, GENCODE_USAGE, "usage"
        premium = duration_parse(text=parts[0])
        if premium is None:
            refusal = f"{escape(parts[0])} is not a duration. {DURATION_HELP}"
            return False, refusal, refusal
        numbers = (parts[1:] + ["1", "1"])[:2]
        if not all(n.isdigit() for n in numbers):
            return False, GENCODE_USAGE, "usage"
        count, uses = (int(n) for n in numbers)
        try:
            made = codes_generate(premium=premium, count=count, uses=uses, by=f"telegram:{msg.user.id}")
        except RedeemError as exc:
            return False, escape(str(exc)), str(exc)
        expires = moment_text(moment=made[0].row.expires_at)
        head = (
            f"🎟 {len(made)} code(s), each {human_span(delta=premium)} of premium for {uses} user(s), valid until {expires}. "
            "Shown this once: only their hashes are kept."
        )
        text = head + "\n" + "\n".join(f"<code>{m.code}</code>" for m in made)
        return True, text, f"{len(made)} code(s): " + ", ".join(f"{m.row.hint}…" for m in made)
