"""From a deep link to files in the user's chat: gates, then delivery (auto-delete: services/autodelete.py).

`file_request` is the whole journey of `/start <payload>`; every outcome sends the user a reply
(a friendly one when the link is bad), and nothing here raises for user input.
"""

from __future__ import annotations

import collections
import html
import logging
import re
from collections.abc import Sequence
from datetime import timedelta

from django.db import DatabaseError

from botapp import clock
from botapp.db import row_by
from botapp.models import (
    BotSettings,
    ChannelJoinRequest,
    ClaimStatus,
    ForceSubChannel,
    PendingDeletion,
    StoredFile,
    TelegramUser,
    VerificationToken,
)
from botapp.services.autodelete import DELIVERY_GRACE, deletion_delivered, deletion_intent, deletion_warning
from botapp.services.captions import caption_render
from botapp.services.fair_use import fair_use_delivery
from botapp.services.files import deep_link, file_removed
from botapp.services.invites import force_sub_channels, invite_link_current
from botapp.services.legacy import SHARE_PREFIX as LEGACY_SHARE_PREFIX
from botapp.services.legacy import legacy_file_resolve, legacy_payload_parse, legacy_payload_shaped
from botapp.services.moderation import ban_in_force, ban_notice
from botapp.services.outgoing import send_key
from botapp.services.premium import premium_offer, user_is_premium
from botapp.services.referrals import referral_gates_passed
from botapp.services.shortener import shortlink_create
from botapp.services.stats import delivery_count
from botapp.services.stream_links import stream_links_for, stream_links_offered
from botapp.services.texts import human_span
from botapp.services.verification import (
    TOKEN_PREFIX,
    LimitReached,
    Redeem,
    token_issue,
    token_redeem,
    user_ban_remaining,
    user_is_verified,
)
from botapp.services.verify_steps import step_next, step_shortener, steps_count
from botapp.telegram.gateway import (
    AlreadySent,
    Button,
    Caption,
    ChatNotFound,
    CopyIncomplete,
    CopySource,
    ForwardsRestricted,
    Gateway,
    MessageNotFound,
    OutcomeUnknown,
    Sent,
    TelegramError,
    TgUser,
    chunked,
)
from botapp.telegram.limits import IDS_PER_CALL, KEYBOARD_BUTTONS, START_PAYLOAD_LENGTH

log = logging.getLogger(__name__)

SHARE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
# What this bot's own file links look like: share_id_new's 12 URL-safe characters, or a legacy
# link's share id (legacy_share_id). A legacy-shaped payload that matches nothing is a removed file;
# a 12-character one only when a removed file had it (RemovedFile): else it is a campaign tag, as
# an ad's `fb_ad_123456` is (shared/seeds/002). Unless a sequence targets it; any other payload of
# Telegram's deep-link alphabet is a campaign tag.
FILE_LINK_RE = re.compile(rf"^(?:[A-Za-z0-9_-]{{12}}|{LEGACY_SHARE_PREFIX}[A-Za-z0-9_-]{{14}})$")
SHARE_ID_SHAPE_RE = re.compile(r"^[A-Za-z0-9_-]{12}$")  # share_id_new's: as many ads' payloads are
CAMPAIGN_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Telegram's deep links: up to 64 of A-Z, a-z, 0-9, _ and -

BAD_LINK = "This link is not valid. Please check that you copied all of it."
NO_FILE = "This link does not exist or its files were removed."
LINK_EXPIRED = "This link has expired. Ask whoever shared it for a new one."
FILE_GONE = "Sorry, these files are no longer available."
FILE_RESTRICTED = "Sorry, these files cannot be sent right now. The admins have been told; please try again later."
STREAM_BUTTONS = "▶️ Stream or ⬇️ download in a browser (links work for {hours}):"
STREAM_LABEL, DOWNLOAD_LABEL = "▶️ Stream", "⬇️ Download"
FILE_INCOMPLETE = "Only {sent} of these files could be sent just now. Open the link again in a minute to get all of them."
JOIN_FIRST = "Please join our channel first, then tap <b>Try again</b>."
JOIN_FIRST_MANY = "Please join our channels first, then tap <b>Try again</b>."
VERIFY = "Verify once to get your files: tap <b>Verify</b>, pass the page, and come back. Verification lasts {hours}."
VERIFIED = "✅ You are verified for {hours}."
VERIFY_STEP = "Verification {step} of {count} (every {{hours}}): tap <b>Verify</b>, pass the page, and come back."
BYPASSED = "⚠️ You came back faster than the verification page allows. Nothing was unlocked."
BYPASS_BANNED = "⚠️ You came back faster than the verification page allows. You are blocked for {ban}."
BANNED = "You are blocked for {remaining} for skipping verification."
LIMIT = "You have used all {limit} verification links for today. New ones from midnight, in {remaining}."
TOKEN_EMPTY = "This verification link is incomplete. Open the file link again to get a new one."
TOKEN_UNKNOWN = "This verification link is not valid. Open the file link again to get a new one."
TOKEN_NOT_YOURS = "This verification link belongs to someone else. Open the file link yourself to get your own."
TOKEN_USED = "This verification link was already used."
TOKEN_EXPIRED = "This verification link has expired. Here is a new one:"


class Delivery:
    """The file journey for one update; holds what every step needs."""

    def __init__(
        self,
        *,
        gateway: Gateway,
        user: TelegramUser,
        chat_id: int,
        conf: BotSettings,
        shortener,
        is_admin: bool,
        new_user: bool = False,
        update_key: str = "",
        after_id: int | None = None,
        again: bool = True,
    ):
        self.gateway = gateway
        # The update is handled again (runbot died handling it): its delivery may have a row already.
        self.again = again
        # The message being answered (the user's, or the one whose button was tapped): the ids of
        # what this answer sends are above it (where to look for a copy whose ids were lost).
        self.after_id = after_id
        # Names the update being answered ("m<chat>.<message id>", "c<callback id>"): a file it
        # delivers carries random_ids derived from it, so handling the update again after a crash
        # (its claim left unfinished) is refused by Telegram as a repeat, never a second copy.
        self.update_key = update_key
        self.user = user
        self.new_user = new_user  # created by this very update: it has no token yet
        self.chat_id = chat_id
        self.conf = conf
        self.shortener = shortener
        self.is_admin = is_admin

    def say(self, text: str, buttons=None) -> Sent:
        return self.gateway.send_text(self.chat_id, text, buttons=buttons)

    # --- entry -----------------------------------------------------------------------------------

    def request(self, payload: str, *, campaigns: frozenset[str] = frozenset()) -> bool:
        """`/start <payload>`: a file link, a verification link, or a campaign tag. Answers the
        first two (a friendly reply when the link is bad); returns False, having sent nothing, for
        a campaign tag: a payload that matches no stored file and is either one of `campaigns`,
        or not shaped like this bot's file links (FILE_LINK_RE) nor a legacy link, or shaped like
        a share id that no removed file had."""
        if len(payload) > START_PAYLOAD_LENGTH:
            self.say(BAD_LINK)
        elif payload.startswith(TOKEN_PREFIX):
            self.verify_return(payload[len(TOKEN_PREFIX) :])
        elif (numbers := legacy_payload_parse(payload=payload)) is not None:
            self.legacy(numbers)
        elif not SHARE_ID_RE.match(payload):
            if CAMPAIGN_RE.match(payload) and not legacy_payload_shaped(payload=payload):  # longer than any share id
                return False
            self.say(BAD_LINK)
        else:
            stored = row_by(StoredFile, "share_id", payload)
            if stored is None and (payload in campaigns or not self.file_link_shaped(payload)):
                return False
            if stored is None and SHARE_ID_SHAPE_RE.match(payload) and not file_removed(share_id=payload):
                return False  # no file ever had it: a campaign tag shaped like a share id
            self.file(payload, stored=stored)
        return True

    @staticmethod
    def file_link_shaped(payload: str) -> bool:
        """A link this bot makes (FILE_LINK_RE), or one of the legacy formats it reads."""
        return bool(FILE_LINK_RE.match(payload)) or legacy_payload_shaped(payload=payload)

    def legacy(self, numbers: tuple[int, ...]) -> None:
        """A link of the bot the operator moved from (services/legacy.py): the same gates and delivery."""
        stored = legacy_file_resolve(numbers=numbers, channel_id=self.conf.legacy_channel_id)
        if stored is None:
            self.say(BAD_LINK)
        else:
            self.file(stored.share_id)

    def file(self, share_id: str, *, stored: StoredFile | None = None) -> None:
        """Deliver the file behind `share_id` (`stored`, when the caller has looked it up)."""
        if stored is None:
            stored = row_by(StoredFile, "share_id", share_id)
        if stored is None:
            self.say(NO_FILE)
            return
        if stored.is_expired(clock.now()):
            self.say(LINK_EXPIRED)
            return
        verification = stored.verification_for(self.conf)  # a link may skip it
        if not self.is_admin:
            if (ban := ban_in_force(user=self.user)) is not None:  # an admin's /ban
                self.say(ban_notice(ban=ban))
                return
            # Premium users skip verification (and its bypass bans), and force-subscribe if so set.
            premium = user_is_premium(user=self.user)
            verifying = verification and not premium  # the link may skip verification too
            # Bans punish verification bypasses: with verification off, nobody is held back by one.
            remaining = user_ban_remaining(user=self.user) if verifying else None
            if remaining:
                self.say(BANNED.format(remaining=human_span(delta=remaining)))
                return
            if not (premium and self.conf.premium_skips_force_subscribe):
                missing = channels_missing(gateway=self.gateway, user_id=self.user.telegram_id)
                if missing:
                    self.join_prompt(missing, share_id)
                    return
            if verifying and not user_is_verified(user=self.user):
                self.verify_prompt(share_id)
                return
            if (refused := fair_use_delivery(user=self.user, conf=self.conf)) is not None:
                if refused.text:  # told once until they may have files again
                    self.say(refused.text)
                return
        referral_gates_passed(user=self.user, conf=self.conf)  # no query unless they came through a referral link
        file_deliver(
            gateway=self.gateway, chat_id=self.chat_id, stored=stored, conf=self.conf, user=self.user,
            key=f"{self.update_key}.{stored.pk}" if self.update_key else "", after_id=self.after_id, again=self.again,
        )  # fmt: skip

    # --- gates -----------------------------------------------------------------------------------

    def join_prompt(self, missing: list[ForceSubChannel], share_id: str) -> None:
        links = [(c, invite_link_current(gateway=self.gateway, channel=c)) for c in missing]
        rows = [[Button(f"Join {c.title}", url=link)] for c, link in links if link]
        rows.append([Button("🔄 Try again", callback_data=f"retry:{share_id}")])
        self.say(JOIN_FIRST if len(missing) == 1 else JOIN_FIRST_MANY, rows)

    def verify_link(self, token: str, *, step: int = 1) -> str:
        """The Verify button's shortlink (the step's own shortener, if set), leading back to the bot with the token."""
        link = deep_link(bot_username=self.gateway.bot_username, payload=f"{TOKEN_PREFIX}{token}")
        return shortlink_create(shortener=step_shortener(conf=self.conf, step=step, default=self.shortener), url=link)

    def verify_prompt(self, share_id: str, *, intro: str | None = None) -> None:
        step = step_next(user=self.user, conf=self.conf, now=clock.now())  # no query with steps off
        issued = token_issue(
            user=self.user, share_id=share_id, conf=self.conf, link=lambda t: self.verify_link(t, step=step),
            new_user=self.new_user, step=step,
        )  # fmt: skip
        if isinstance(issued, LimitReached):
            self.say(LIMIT.format(limit=self.conf.daily_token_limit, remaining=human_span(delta=issued.resets_at - clock.now())))
            return
        if not issued.short_url:  # a pending token whose shortlink was never stored
            issued.short_url = self.verify_link(issued.token, step=issued.step)
            VerificationToken.objects.filter(pk=issued.pk).update(short_url=issued.short_url)
        rows = [[Button("✅ Verify", url=issued.short_url)]]
        if self.conf.how_to_verify_url:
            rows.append([Button("ℹ️ How to verify", url=self.conf.how_to_verify_url)])
        offer, offer_rows = premium_offer(conf=self.conf)  # "Get premium" beside Verify
        rows += offer_rows
        count = steps_count(conf=self.conf)
        verify = VERIFY_STEP.format(step=issued.step, count=count) if count > 1 else VERIFY
        text = "\n\n".join(
            filter(None, [verify.format(hours=human_span(delta=timedelta(hours=self.conf.verification_hours))), offer])
        )
        self.say(f"{intro}\n\n{text}" if intro else text, rows)

    def verify_return(self, token: str) -> None:
        outcome = token_redeem(user=self.user, token=token, conf=self.conf)
        if outcome.result is Redeem.VERIFIED:  # until the period ends, or the next step is due
            self.say(VERIFIED.format(hours=human_span(delta=self.user.verified_until - clock.now())))
            if outcome.token.share_id:
                self.file(outcome.token.share_id)
            elif self.user.referral_pending and not channels_missing(gateway=self.gateway, user_id=self.user.telegram_id):
                referral_gates_passed(user=self.user, conf=self.conf)  # a referred user's Verify, for no file
        elif outcome.result is Redeem.BYPASSED:
            self.say(BYPASS_BANNED.format(ban=human_span(delta=outcome.ban)) if outcome.ban else BYPASSED)
        elif outcome.result is Redeem.EXPIRED:
            self.verify_prompt(outcome.token.share_id, intro=TOKEN_EXPIRED)
        elif outcome.result is Redeem.USED:
            extra = (
                f" You are verified for {human_span(delta=self.user.verified_until - clock.now())} more."
                if user_is_verified(user=self.user)
                else ""
            )
            self.say(TOKEN_USED + extra)
        else:
            self.say(
                {Redeem.EMPTY: TOKEN_EMPTY, Redeem.UNKNOWN: TOKEN_UNKNOWN, Redeem.NOT_YOURS: TOKEN_NOT_YOURS}[outcome.result]
            )


def channels_missing(*, gateway: Gateway, user_id: int) -> list[ForceSubChannel]:
    """Enabled force-subscribe channels the user has not joined (or, in join-request mode, asked to
    join), asking Telegram about each. A channel the bot cannot see is logged and left out, so a
    misconfiguration never locks every user out."""
    channels = force_sub_channels()
    missing = []
    for channel in channels:
        try:
            if gateway.is_member(channel.chat_id, user_id):
                continue
        except ChatNotFound:
            # The bot was removed from the channel: a misconfiguration must not lock every user out.
            log.error("force-subscribe channel %s unreachable: is the bot an admin there?", channel.chat_id)
            continue
        missing.append(channel)
    asked = [c.chat_id for c in missing if c.join_request]
    if asked:
        requested = set(
            ChannelJoinRequest.objects.filter(user_id=user_id, channel_id__in=asked).values_list("channel_id", flat=True)
        )
        missing = [c for c in missing if c.chat_id not in requested]
    return missing


def file_deliver(
    *,
    gateway: Gateway,
    chat_id: int,
    stored: StoredFile,
    conf: BotSettings,
    user: TelegramUser | None = None,
    key: str = "",
    after_id: int | None = None,
    again: bool = True,
) -> list[Sent]:
    """Copy the file's messages to the chat (with the caption template of Bot settings filled in
    for each message and for `user`); with auto-delete on, tell the user and record the deletion
    (a durable row: it survives restarts). The link's own protect-content and auto-delete minutes
    win over Bot settings. When the storage channel's messages are gone (deleted, or the channel
    lost), the backup channel's copy is delivered instead.

    `key`: the random_id key of the update being answered (`Delivery.update_key` and the file):
    the same update handled again sends the same random_ids, refused by Telegram as a repeat.
    Without one, the pending deletion's row is the key. `after_id`: the id of the message that
    asked for the file (the user's, or the one whose button was tapped): the copies' ids are above it.
    `again`: the update may have been handled before (its first handling's row is looked for by
    `key`); False saves that read on the hot path.

    Intent before effect: with auto-delete on, the pending deletion is written before the copy,
    so no copy is ever in a chat without a row that deletes it; its message ids are written once
    Telegram has answered. When that write fails
    (the database gone), the copies are deleted at once and the error is raised (the user is told
    to try again). When runbot is killed between the copy and writing its ids, the update is
    handled again after the restart (its claim unfinished): the same row is found by `key`, the
    copy is refused as a repeat, and the messages the first attempt sent are found by reading
    the bot's messages back from `after_id` (`delivery_find`); their ids are written, and they
    are deleted on time. A row the update never came back for is searched the same way by the
    deletion sweep once DELIVERY_GRACE has passed (docs/reliability.md).

    The database sees three statements with auto-delete on, each its own transaction: the pending
    deletion's INSERT, its ids, then the count (the file's deliveries, today's: an entry
    services/stats.py adds up later, so deliveries never wait for each other on a shared row);
    without auto-delete, the count alone."""
    now = clock.now()
    minutes = stored.auto_delete_minutes_for(conf)
    intent = None
    if minutes:
        intent, fresh = deletion_intent(
            chat_id=chat_id, share_id=stored.share_id, minutes=minutes, now=now, delivery_key=key, after_id=after_id,
            look=again,
        )  # fmt: skip
        if not fresh and intent.status != ClaimStatus.DELIVERING:
            log.info("delivery %s was made and recorded before the update came again: not made again", key)
            return []
    if not key and intent is not None:
        key = send_key(kind="d", row_id=intent.pk, made_at=intent.created_at)
    incomplete = repeated = None
    sources = file_sources(stored=stored)
    # Stream links, after the same gates as the files (this runs only once they are passed): under
    # a single message, or in a message of their own after a batch (a batch's copies carry no buttons).
    streams = stream_buttons(stored=stored, conf=conf, user=user)
    under = streams if streams and len(stored.message_ids) == 1 else None
    try:
        for n, (source_chat_id, message_ids) in enumerate(sources, start=1):
            try:
                sent = gateway.copy_messages(
                    chat_id,
                    source_chat_id,
                    message_ids,
                    caption=caption_for(template=conf.file_caption, user=user),
                    protect=stored.protect_for(conf),
                    buttons=under,
                    key=f"{key}.{n}" if key else "",
                )
                break
            except (MessageNotFound, ChatNotFound) as exc:
                if n < len(sources):  # deleted, the channel lost, or only empty messages left: the backup has it
                    log.error(
                        "stored file gone share=%s chat=%s, delivering the backup: %s", stored.share_id, source_chat_id, exc
                    )
                    continue
                log.error("stored file unavailable share=%s: %s", stored.share_id, exc)
                _intent_drop(intent)
                gateway.send_text(chat_id, FILE_GONE)
                return []
            except ForwardsRestricted as exc:
                log.error("storage channel forbids copying share=%s chat=%s: %s", stored.share_id, source_chat_id, exc)
                _intent_drop(intent)
                gateway.send_text(chat_id, FILE_RESTRICTED)
                return []
            except CopyIncomplete as exc:
                # Part of the file went out: those messages are the user's now, and are deleted like the rest.
                log.warning("delivery stopped partway share=%s chat=%s: %s", stored.share_id, chat_id, exc)
                sent, incomplete = exc.sent, exc
                break
            except AlreadySent as exc:
                # An earlier attempt of this delivery (runbot killed before its ids were written)
                # sent these: they are in the chat, to be found below.
                log.warning("delivery %s was sent before its ids were written: looking for them", key)
                sent, repeated = exc.sent, (source_chat_id, message_ids)
                break
    except OutcomeUnknown:
        raise  # it may be in the chat (ids unknown): the row stays, and says so when it comes due
    except TelegramError:
        _intent_drop(intent)  # Telegram refused it: nothing of it is in the chat
        raise
    notice = FILE_INCOMPLETE.format(sent=len(sent)) if incomplete is not None else ""
    if minutes:
        notice = " ".join(filter(None, [notice, deletion_warning(minutes=minutes)]))
    ids = [s.message_id for s in sent]
    if streams and under is None and sent:
        hours = human_span(delta=timedelta(hours=stored.stream_lifetime_hours_for(conf)))
        try:
            text = STREAM_BUTTONS.format(hours=hours)
            ids.append(gateway.send_text(chat_id, text, buttons=streams, key=f"{key}.stream" if key else "").message_id)
        except AlreadySent:  # the earlier attempt's links arrived: found with the notice, or left to the user
            pass
        except TelegramError as exc:  # the files arrived: the links are a convenience
            log.warning("stream links not sent share=%s chat=%s: %s", stored.share_id, chat_id, exc)
    notice_repeated = False
    if notice:
        try:
            ids.append(gateway.send_text(chat_id, notice, key=f"{key}.notice" if key else "").message_id)
        except AlreadySent:  # the earlier attempt's notice arrived
            notice_repeated = True
        except TelegramError as exc:  # the files arrived: they are recorded for deletion all the same
            log.warning("delivery notice not sent share=%s chat=%s: %s", stored.share_id, chat_id, exc)
    if intent is not None and intent.after_id is not None and (repeated is not None or notice_repeated):
        ids += delivery_find(
            gateway=gateway, row=intent, sources=[repeated] if repeated else [], notice=notice if notice_repeated else "",
            known=ids,
        )  # fmt: skip
    if intent is not None and not ids:  # an earlier attempt's copies, none of them found (gone since)
        log.warning("delivery %s: nothing of it found in chat=%s: no deletion kept", key, chat_id)
        _intent_drop(intent)
    elif intent is not None:
        try:
            deletion_delivered(row=intent, message_ids=ids)
        except DatabaseError:
            # The copies must not stay without a row that deletes them: gone at once, and the user
            # told to try again (the caller's apology).
            log.error(
                "delivery share=%s chat=%s not recorded: its %d message(s) deleted at once", stored.share_id, chat_id, len(ids)
            )
            gateway.delete_messages(chat_id, ids)
            raise
    delivery_count(stored_id=stored.pk, at=now)  # after the promise to delete: never at its expense
    return sent


def delivery_find(
    *,
    gateway: Gateway,
    row: PendingDeletion,
    sources: Sequence[tuple[int, Sequence[int]]],
    notice: str,
    known: Sequence[int] = (),
) -> list[int]:
    """The ids of the messages an earlier attempt of the delivery `row` sent and never recorded
    (runbot killed between Telegram's answer and writing them): the copies of the file (the
    first of `sources`, (chat, message ids), whose messages can be read) and the `notice` text,
    found among the bot's messages in the row's chat above its `after_id`, sent by the time the
    attempt must have ended (DELIVERY_GRACE after the row), each matched by what it shows
    (`known`: ids already had, left out). Empty when nothing matches."""
    wanted: collections.Counter[str] = collections.Counter()
    for chat, message_ids in sources:
        try:
            for chunk in chunked(list(message_ids), IDS_PER_CALL):
                wanted.update(gateway.message_contents(chat, chunk).values())
        except (MessageNotFound, ChatNotFound) as exc:
            log.warning("deletion=%s: the file's messages in %s cannot be read: %s", row.pk, chat, exc)
        if wanted:
            break
    notice_content = f"text:{html.unescape(re.sub(r'<[^>]+>', '', notice))}" if notice else ""
    if notice_content:
        wanted[notice_content] += 1
    if not wanted:
        return []
    found = gateway.own_messages(
        row.chat_id, after_id=row.after_id, until=min(clock.now(), row.created_at + DELIVERY_GRACE),
        contents=set(wanted), limit=wanted.total() + len(known),
    )  # fmt: skip
    ids = []
    for message in found:
        if message.message_id not in known and wanted[message.content] > 0:
            wanted[message.content] -= 1
            ids.append(message.message_id)
    log.info("deletion=%s chat=%s: %d message(s) of an earlier attempt found: %s", row.pk, row.chat_id, len(ids), ids)
    return ids


def deliveries_cut_off_settle(*, gateway: Gateway, limit: int = 50) -> tuple[int, int]:
    """Rows still `delivering` DELIVERY_GRACE after they were written, whose update never came
    back to finish them (runbot killed mid-delivery, and the update not handled again: an answer
    of unknown outcome, or Telegram forgot it): the messages the delivery sent are looked for
    (`delivery_find`) and, found, recorded to be deleted (at once when due); a row with nothing
    found is removed (nothing of it reached the chat). A row written before rows had `after_id`
    has nothing to search from: expired, with a WARNING. Returns (found, removed)."""
    rows = list(
        PendingDeletion.objects.filter(status=ClaimStatus.DELIVERING, created_at__lt=clock.now() - DELIVERY_GRACE).order_by(
            "created_at"
        )[:limit]
    )
    found = removed = 0
    for row in rows:
        if row.after_id is None:
            log.warning(
                "deletion=%s chat=%s share=%s: the delivery was cut off before its message ids were written, "
                "with nothing to search them from: expired", row.pk, row.chat_id, row.share_id,
            )  # fmt: skip
            PendingDeletion.objects.filter(pk=row.pk, status=ClaimStatus.DELIVERING).update(status=ClaimStatus.EXPIRED)
            continue
        stored = row_by(StoredFile, "share_id", row.share_id) if row.share_id else None
        minutes = round((row.delete_at - row.created_at).total_seconds() / 60)
        try:
            ids = delivery_find(
                gateway=gateway, row=row, sources=file_sources(stored=stored) if stored is not None else [],
                notice=deletion_warning(minutes=minutes),
            )  # fmt: skip
        except TelegramError as exc:  # Telegram refused the reads (a long FloodWait, an outage): next run
            log.warning("deletion=%s chat=%s: its copies could not be looked for, next run: %s", row.pk, row.chat_id, exc)
            continue
        if ids:
            deletion_delivered(row=row, message_ids=ids)
            found += 1
        else:
            log.info("deletion=%s chat=%s: nothing of its delivery reached the chat: removed", row.pk, row.chat_id)
            PendingDeletion.objects.filter(pk=row.pk, status=ClaimStatus.DELIVERING).delete()
            removed += 1
    return found, removed


def stream_buttons(*, stored: StoredFile, conf: BotSettings, user: TelegramUser | None) -> list[list[Button]]:
    """The ▶️ Stream / ⬇️ Download buttons a user who passed the file's gates gets with it (one row
    per message, numbered for a batch, up to KEYBOARD_BUTTONS buttons), signed for that user; none
    when stream links are off for the file or the user (services/stream_links.py)."""
    if user is None or not stream_links_offered(stored=stored, conf=conf, user=user):
        return []
    links = stream_links_for(stored=stored, conf=conf, user_id=user.telegram_id)[: KEYBOARD_BUTTONS // 2]
    if len(links) == 1:
        return [[Button(STREAM_LABEL, url=links[0].watch), Button(DOWNLOAD_LABEL, url=links[0].download)]]
    return [
        [Button(f"{STREAM_LABEL} {n}", url=u.watch), Button(f"{DOWNLOAD_LABEL} {n}", url=u.download)]
        for n, u in enumerate(links, start=1)
    ]


def _intent_drop(intent: PendingDeletion | None) -> None:
    """The pending deletion of a copy that never reached the chat: nothing to delete."""
    if intent is not None:
        PendingDeletion.objects.filter(pk=intent.pk).delete()


def file_sources(*, stored: StoredFile) -> list[tuple[int, list[int]]]:
    """Where a file's messages can be copied from, in the order to try: the storage channel, then
    the backup copy when there is one."""
    sources = [(stored.source_chat_id, stored.message_ids)]
    if stored.backup_chat_id and stored.backup_message_ids:
        sources.append((stored.backup_chat_id, stored.backup_message_ids))
    return sources


def caption_for(*, template: str, user: TelegramUser | None) -> Caption:
    """The caption argument of a delivery's copy: None without a template (the messages keep their
    own captions, and are forwarded in one call per 100), else each message's caption rendered for `user`."""
    if not template.strip():
        return None
    tg = None
    if user is not None:
        tg = TgUser(id=user.telegram_id, first_name=user.first_name, last_name=user.last_name, username=user.username)

    def render(source: CopySource) -> str | None:
        return caption_render(template=template, source=source, tg=tg)

    return render
