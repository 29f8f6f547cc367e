"""The controls of the in-memory Telegram that tests and the sandbox use: what users and channel
owners do (`Actions`: write to the bot, tap a button, block it, post in a channel), and the
conditions the bot meets (`Conditions`: injected faults, a revoked token, the hostile mode, the
rates). Mixins of server.TelegramServer, over core.ServerCore's state and records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import timedelta

from pyrogram import raw
from pyrogram.file_id import FileId, FileType, ThumbnailSource

from inmemory_telegram import limits, render
from inmemory_telegram.faults import Fault, Hostile
from inmemory_telegram.rates import Rates
from inmemory_telegram.state import Account, Channel, Invite, Media, Profile, channel_raw_id


class Actions:
    """What users and channel owners do: each changes the state as Telegram would and pushes the
    updates the bot's sessions get. A user is a `Profile` and media a `Media` (state.py), or any
    object with their fields."""

    def create_channel(
        self, chat_id: int, *, title: str = "", members: Iterable[int] = (), noforwards: bool = False, bot_is_admin: bool = True,
        username: str = "",
    ) -> None:  # fmt: skip
        """A channel; with `username`, a public one (t.me/<username>), whose history any account reads."""
        if chat_id > -1_000_000_000_000:
            raise ValueError("channel ids look like -100…")
        with self.lock:
            channel = self.channels.setdefault(
                channel_raw_id(chat_id), Channel(raw_id=channel_raw_id(chat_id), title=title or f"Channel {chat_id}")
            )
            channel.members.update(members)
            channel.noforwards = noforwards
            channel.bot_is_admin = bot_is_admin
            channel.username = username

    def account_add(self, phone: str, user_id: int, *, first_name: str = "", password: str = "") -> None:
        """A person's own Telegram account, which signs in with its phone number (a user session);
        `password`: its two-step verification password."""
        with self.lock:
            user = self.user_record(user_id)
            user.first_name = first_name or user.first_name or f"User{user_id}"
            number = "".join(ch for ch in phone if ch.isdigit())
            self.accounts[number] = Account(user_id=user_id, phone=number, password=password)

    def login_code(self, phone: str) -> str:
        """The login code Telegram last sent to the account's apps ("" when none is waiting)."""
        with self.lock:
            return self.accounts["".join(ch for ch in phone if ch.isdigit())].code

    def join(self, chat_id: int, user_id: int) -> None:
        with self.lock:
            self.channels[channel_raw_id(chat_id)].members.add(user_id)

    def leave(self, chat_id: int, user_id: int) -> None:
        with self.lock:
            self.channels[channel_raw_id(chat_id)].members.discard(user_id)

    def request_join(self, chat_id: int, user: Profile, *, link: str = "https://t.me/+offline") -> None:
        """A user asks to join a join-request channel: the bot (an admin) gets the request."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            record = self.user_record(user)
            record.known_to_bot = True
            channel.join_requests.add(user.id)
            self.qts += 1
            invite = raw.types.ChatInviteExported(link=link, admin_id=self.bot.id, date=0, request_needed=True)
            update = raw.types.UpdateBotChatInviteRequester(
                peer=render.peer_tl(chat_id),
                date=int(self.now().timestamp()),
                user_id=user.id,
                about="",
                invite=invite,
                qts=self.qts,
            )
            self.update_log.append(("qts", self.qts, update, self.now()))
            self.push(self.updates_tl([update], users=[record], channels=[channel]))

    def post(
        self,
        chat_id: int,
        text: str = "",
        *,
        media: Media | None = None,
        service: bool = False,
        file_size: int | None = None,
        entities: list | None = None,
        dc_id: int | None = None,
        content: bytes | None = None,
    ) -> int:
        """Something is posted in a channel (by an admin); returns the message id. A bot that is
        an admin there is told (UpdateNewChannelMessage, the Bot API's channel_post). `media.file`
        is the file's name (documents, videos, audio and animations carry it), `file_size` its size;
        `entities` its formatting (raw MessageEntity objects, offsets in UTF-16 units). A file's
        bytes are generated from its id (content.py) unless `content` gives them; `dc_id`: the data
        centre it is kept on (default the bot's)."""
        with self.lock:
            if channel_raw_id(chat_id) not in self.channels:
                raise KeyError(f"no channel {chat_id}")
            file = None
            if media:
                size = len(content) if content is not None else file_size
                file = self.new_file(media.kind, media.file, size, dc_id=dc_id or limits.HOME_DC)
                file.content = content
            msg = self.new_message(chat_id, out=False, text=text, file=file, service=service, entities=list(entities or []))
            channel = self.channels[channel_raw_id(chat_id)]
            if channel.bot_is_admin:
                channel.posts.append((channel.pts, msg))
                update = raw.types.UpdateNewChannelMessage(
                    message=render.message_tl(msg, bot_id=self.bot.id), pts=channel.pts, pts_count=1
                )
                self.push(self.updates_tl([update], channels=[channel]))
            return msg.id

    def invite_add(self, chat_id: int, link: str, *, request_needed: bool = False) -> None:
        """An invite link the channel's owner made (not the bot): it never expires."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            channel.invites[link] = Invite(link=link, date=self.now(), request_needed=request_needed)

    def open_invite(self, link: str, user: Profile) -> str:
        """A user opens an invite link the bot exported: they join the channel, or (a join-request
        link) ask to join, which the bot hears of. Returns what happened: "joined", "requested",
        "expired" (Telegram shows "this invite link has expired"), or "unknown" (not such a link)."""
        with self.lock:
            for channel in self.channels.values():
                invite = channel.invites.get(link)
                if invite is None:
                    continue
                if invite.revoked or (invite.expire_date is not None and invite.expire_date <= self.now()):
                    return "expired"
                if invite.request_needed:
                    self.request_join(channel.api_id, user, link=link)
                    return "requested"
                channel.members.add(user.id)
                return "joined"
            return "unknown"

    def delete_post(self, chat_id: int, message_id: int) -> None:
        with self.lock:
            msg = self.stored(chat_id, message_id)
            msg.deleted = True
            if msg.file is not None:
                msg.file.reference_renew(self.now())  # the reference it gave is void

    def bot_rights(self, chat_id: int, *, post: bool | None = None, edit: bool | None = None, invite: bool | None = None) -> None:
        """The channel's owner changes the bot's admin rights (None: that right unchanged)."""
        with self.lock:
            channel = self.channels[channel_raw_id(chat_id)]
            for name, value in (("post", post), ("edit", edit), ("invite", invite)):
                if value is not None:
                    setattr(channel, f"bot_can_{name}", value)

    def remove_bot(self, chat_id: int) -> None:
        """The bot is removed from a channel (or the channel is deleted): it can no longer read,
        forward from or post in it."""
        with self.lock:
            self.channels[channel_raw_id(chat_id)].bot_is_admin = False

    def user_sends(
        self,
        user: Profile,
        text: str = "",
        *,
        media: Media | None = None,
        forward_from: tuple[int, int] | None = None,
        file_size: int | None = None,
        reply_to: int | None = None,
    ) -> int:
        """A user writes to the bot in private (optionally replying to a message of that chat);
        runbot's session gets UpdateNewMessage. Returns its id."""
        return self.user_sends_album(
            user, [media] if media else [], text, forward_from=forward_from, reply_to=reply_to, file_size=file_size
        )[0]

    def user_sends_album(
        self,
        user: Profile,
        media: list[Media],
        caption: str = "",
        *,
        forward_from: tuple[int, int] | None = None,
        reply_to: int | None = None,
        file_size: int | None = None,
    ) -> list[int]:
        """A user sends several media as one album (one grouped_id; the caption on the first), or,
        with one or no media, a single message. runbot gets one UpdateNewMessage per message, in one
        Updates, as Telegram sends an album. Returns their ids."""
        with self.lock:
            record = self.user_record(user)
            record.known_to_bot = record.private_chat = True
            was_blocked, record.blocked_bot = record.blocked_bot, False  # writing to a bot unblocks it
            grouped_id = next(self._group_ids) if len(media) > 1 else None
            if reply_to is not None and self.stored(user.id, reply_to) is None:
                reply_to = None  # Telegram drops a reply to a message that is not in the chat
            updates = [self._bot_stopped(user.id, stopped=False)] if was_blocked else []
            ids = []
            for index, item in enumerate(media or [None]):
                file = None
                if forward_from is not None:
                    source = self.stored(*forward_from)
                    file = source.file if source is not None else None
                elif item is not None:
                    file = self.new_file(item.kind, item.file, file_size)
                msg = self.new_message(
                    user.id,
                    out=False,
                    text=caption if index == 0 else "",
                    file=file,
                    forward_from=forward_from,
                    sender_id=user.id,
                    grouped_id=grouped_id,
                    reply_to=reply_to,
                )
                ids.append(msg.id)
                updates.append(
                    raw.types.UpdateNewMessage(message=render.message_tl(msg, bot_id=self.bot.id), pts=self.pts, pts_count=1)
                )
            channels = [self.channels[channel_raw_id(forward_from[0])]] if forward_from else []
            self.push(self.updates_tl(updates, users=[record], channels=channels))
            return ids

    def tap(self, user: Profile, message_id: int, data: str) -> int:
        """A user taps a callback button under a bot message; runbot gets UpdateBotCallbackQuery."""
        with self.lock:
            record = self.user_record(user)
            query_id = next(self._query_ids)
            self.callbacks[query_id] = (user.id, time.monotonic())
            update = raw.types.UpdateBotCallbackQuery(
                query_id=query_id,
                user_id=user.id,
                peer=render.peer_tl(user.id),
                msg_id=message_id,
                chat_instance=user.id,
                data=data.encode(),
            )
            self.push(self.updates_tl([update], users=[record]))
            return query_id

    def _bot_stopped(self, user_id: int, *, stopped: bool):
        self.qts += 1
        update = raw.types.UpdateBotStopped(user_id=user_id, date=int(self.now().timestamp()), stopped=stopped, qts=self.qts)
        self.update_log.append(("qts", self.qts, update, self.now()))
        return update

    def block(self, user_id: int) -> None:
        with self.lock:
            record = self.user_record(user_id)
            record.blocked_bot = True
            self.push(self.updates_tl([self._bot_stopped(user_id, stopped=True)], users=[record]))

    def unblock(self, user_id: int) -> None:
        with self.lock:
            record = self.user_record(user_id)
            record.blocked_bot = False
            self.push(self.updates_tl([self._bot_stopped(user_id, stopped=False)], users=[record]))

    def deactivate(self, user_id: int) -> None:
        with self.lock:
            self.user_record(user_id).deactivated = True

    def file_id(self, kind: str, name: str = "file") -> str:
        """A new file on the server and the file_id string a bot would get for it."""
        with self.lock:
            file = self.new_file(kind, name)
        file_type = {
            "photo": FileType.PHOTO,
            "video": FileType.VIDEO,
            "document": FileType.DOCUMENT,
            "animation": FileType.ANIMATION,
            "audio": FileType.AUDIO,
        }[kind]
        photo = {}
        if kind == "photo":  # as kurigram's Photo._parse builds it
            photo = dict(
                thumbnail_source=ThumbnailSource.THUMBNAIL,
                thumbnail_file_type=FileType.PHOTO,
                thumbnail_size="x",
                volume_id=0,
                local_id=0,
            )
        return FileId(
            file_type=file_type,
            dc_id=render.DC_ID,
            media_id=file.id,
            access_hash=file.access_hash,
            file_reference=file.file_reference,
            **photo,
        ).encode()

    def users_meet(self, user_ids: Iterable[int]) -> dict[int, int]:
        """Set-up for thousands of users at once: each has written to the bot before (as after
        `user_sends(user, "/start")`, without the updates). Returns each one's access hash, which
        runbot would have stored from that update."""
        with self.lock:
            met = {}
            for user_id in user_ids:
                record = self.user_record(user_id)
                record.first_name = record.first_name or f"User{user_id}"
                record.known_to_bot = record.private_chat = True
                met[user_id] = record.access_hash
            return met

    def bot_sent(self, chat_ids: Iterable[int], text: str) -> list[int]:
        """Set-up: one message the bot sent earlier in each private chat (say, a delivered file
        waiting for its auto-delete), made directly, with no call counted. Returns their ids."""
        with self.lock:
            return [self.new_message(chat_id, out=True, text=text, sender_id=self.bot.id).id for chat_id in chat_ids]


class Conditions:
    """What the bot meets that no user does: Telegram's refusals on demand, a revoked token, the
    hostile mode, the rates."""

    def hostile_start(
        self, *, salt_every: int = 50, flood_every: int = 200, service_every: int = 0, split_every: int = 0,
        drop_every: int = 0, internal_every: int = 0,
    ) -> None:  # fmt: skip
        """Turn on the hostile mode (see Hostile); hostile_stop() turns it off."""
        with self.lock:
            self.hostile = Hostile(
                salt_every=salt_every, flood_every=flood_every, service_every=service_every, split_every=split_every,
                drop_every=drop_every, internal_every=internal_every,
            )  # fmt: skip

    def hostile_stop(self) -> dict:
        """Turn it off; what it did: {"rotations": n, "floods": n, "services": n, ...}."""
        with self.lock:
            done, self.hostile = self.hostile, None
        names = ("rotations", "floods", "services", "splits", "drops", "internals", "internals_delivered")
        return {name: getattr(done, name) if done else 0 for name in names}

    def rates_set(self, **settings) -> None:
        """Change `enforce_rates`, `global_rate`, `paid_rate`, `latency` or `count_per_message`;
        the limits start counting afresh."""
        with self.lock:
            per_message = settings.pop("count_per_message", self.rates.count_per_message)
            for key, value in settings.items():
                if key not in ("enforce_rates", "global_rate", "paid_rate", "latency", "file_read_rate"):
                    raise ValueError(f"not a rate setting: {key}")
                setattr(self, key, value)
            self.rates = Rates(global_rate=self.global_rate, paid_rate=self.paid_rate, count_per_message=per_message)
            self.file_reads = {}

    def dc_set(self, dc_id: int, *, latency: float = 0.0, bandwidth: float | None = None) -> None:
        """The link to data centre `dc_id`, as a benchmark models a far one: every answer on a
        connection to it takes `latency` more seconds, and each connection carries at most
        `bandwidth` bytes a second (None: no cap), its answers one after another."""
        if dc_id not in limits.DCS:
            raise ValueError(f"no data centre {dc_id}")
        with self.lock:
            self.dc_links[dc_id] = (latency, bandwidth)

    def connections_drop(self, *, dc_id: int | None = None) -> int:
        """Every connection (to `dc_id`, or to any DC) drops, its answers not yet sent lost; the
        clients connect again. Returns how many dropped."""
        with self.lock:
            dropped = [e for e in self.endpoints if dc_id is None or e.dc_id == dc_id]
        for endpoint in dropped:
            endpoint.hangup()
        return len(dropped)

    def file_references_expire(self) -> None:
        """Every file reference given so far is past its lifetime (limits.FILE_REFERENCE_LIFETIME):
        a download with one answers FILE_REFERENCE_EXPIRED until the message is read again."""
        with self.lock:
            for file in self.files.values():
                file.reference_at = self.now() - limits.FILE_REFERENCE_LIFETIME

    def revoke_token(self) -> None:
        """The operator revoked the bot token in @BotFather: every session of the bot gets 401."""
        with self.lock:
            self.bot.revoked = True

    def restore_token(self) -> None:
        """The operator put the bot's new token (from @BotFather) in place: its sessions work again.
        Offline sessions carry no token (ProvisionedStorage), so lifting the revocation is all a
        new token changes here."""
        with self.lock:
            self.bot.revoked = False

    def fail_next(
        self,
        error: str,
        *,
        methods: Iterable[str] | None = None,
        times: int = 1,
        chat_id: int | None = None,
        after: int = 0,
        code: int | None = None,
        seconds: float | None = None,
    ) -> None:
        """The next `times` calls (of `methods`, to `chat_id`) after `after` matching ones answer
        `error` ("FLOOD_WAIT_7", "USER_IS_BLOCKED", "INTERNAL", ...), as Telegram would; LOSE_ANSWER
        lets the call take effect and drops its answer. `code`: the error_code, for a name Telegram
        may send one day with a code we cannot guess (a new 420 "FROZEN_METHOD_INVALID").
        `seconds`: an outage instead of a count: every matching call answers `error` for that long
        on the clock messages are dated by (the server's `now`: tests move it), `times` aside."""
        until = self.now() + timedelta(seconds=seconds) if seconds is not None else None
        with self.lock:
            self.faults.append(Fault(error, frozenset(methods) if methods else None, chat_id, times, after, code, until))
