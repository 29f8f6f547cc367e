"""The offline sandbox: the bot's real router and services on the in-memory Telegram.

Reads a conversation (one line each) and prints every bot action:

    1001: /start            a message from user 1001
    1001 tap Close          user 1001 taps a button (by its text or callback data) on their latest message that has it
    wait 31m                move the clock forward (s, m, h, d; e.g. 1h30m): due work wakes its job at its due
                            time, to the second; then the jobs whose beat schedule fired run
    1001 blocks             user 1001 blocks the bot
    1000 sends document report.pdf[2.5MB] Price list
                            a user sends media (photo, video, document, animation, audio), with an optional
                            size in brackets (B, KB, MB, GB; 1 KB without) and an optional caption
    1000 sends album photo:a.jpg video:b.mp4 Caption
                            a user sends an album (two or more media), caption on the first
    post Chapter 1          something is posted in the storage channel (its message id is printed; runbot hears of it);
                            `post /chat Hello` there is broadcast to every active user (the sandbox's
                            storage channel is also the broadcast source)
    delete post #3          storage-channel message 3 is deleted
    storage channel lost    the bot is removed from the storage channel (also: backup channel lost)
    set file_caption {filename}
                            a Bot settings field changes, checked as the settings form checks it (\n: a new line)
    link demo expires_at 2h one link's own settings: protect_content yes/no/default, auto_delete_minutes
                            N/default, skip_verification yes/no, expires_at <span from now>/never
    1000 forwards #3        a user forwards storage-channel message 3 to the bot (admins: store it, /batch)
    1000 replies #7: /broadcast
                            a user replies to message 7 of their chat with the bot (without #7:
                            to their own latest message; an album: its first)
    forcesub News 30m requests
                            a force-subscribe channel "News" (the bot an admin there); with a span, the bot
                            makes invite links expiring after it; with "requests", links that ask to join

Output: `-> 1001 #5 send "Welcome…" [Get files again | Close]`, `-> 1001 delete #5 #6`, or JSON lines
with `--json`. Lines starting with `..` are the sandbox's own notes (clock, jobs), not bot actions.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta
from typing import TextIO
from urllib.parse import parse_qs, urlparse

from django.forms import modelform_factory

from botapp import clock
from botapp.admin.files import LINK_SETTINGS
from botapp.admin.settings_form import BotSettingsForm
from botapp.models import BotSettings, ForceSubChannel, Sequence, StoredFile
from botapp.services.files import file_store
from botapp.services.outgoing import ClickLinkExpired, click_record, click_token_of
from botapp.signals import broadcast_queued
from botapp.telegram.console import console_gateway_use
from botapp.telegram.gateway import Gateway, Media, TgUser
from botapp.telegram.limits import ALBUM_SIZE, DATE_MAX, USER_FILE_SIZE, USER_ID_MAX
from inmemory_telegram.server import TelegramServer
from inmemory_telegram.state import Button, Event
from offline.telegram.clients import OfflineBot
from scheduler.jobs.registry import JOBS, Outcome, job_fires_between, job_run, jobs_due_between

RUNS_MAX = 10  # runs of one job per `wait`, at most
WAKES_MAX = 500  # wake-ups per `wait`, at most (a due row no run can settle must not spin)


def jobs_run_between(before: datetime, after: datetime, *, gateway: Gateway) -> list[tuple[str, Outcome]]:
    """Run every job whose schedule fell due between `before` and `after`, as beat would have: a
    job that fired several times in the span runs again while it still finds work (up to that many
    times, at most RUNS_MAX), so work a run leaves for the next one (a user's next onboarding step)
    is done within the same wait."""
    results = []
    for job in jobs_due_between(before, after):
        fires = job_fires_between(job, before, after, limit=RUNS_MAX)
        for _ in range(max(1, fires)):
            outcome = sandbox_job_run(job.name, gateway=gateway)
            results.append((job.name, outcome))
            if not outcome.processed or outcome.detail.startswith(RUN_FAILED):
                break
    return results


RUN_FAILED = "the run failed: "


def sandbox_job_run(name: str, *, gateway: Gateway) -> Outcome:
    """job_run, as a worker runs it; a run that fails (recorded failed, as in production) is said
    in the conversation instead of ending the sandbox."""
    try:
        return job_run(name, trigger="sandbox", gateway=gateway)
    except Exception as exc:  # noqa: BLE001 - the job run holds the traceback; the sandbox goes on
        return Outcome(0, 1, detail=f"{RUN_FAILED}{type(exc).__name__}: {exc}")


MESSAGE_RE = re.compile(r"^(?P<user>\d+)\s*:\s?(?P<text>.*)$")
TAP_RE = re.compile(r"^(?P<user>\d+)\s+tap\s+(?P<label>.+)$")
BLOCK_RE = re.compile(r"^(?P<user>\d+)\s+blocks$")
SEND_RE = re.compile(
    r"^(?P<user>\d+)\s+sends\s+(?P<kind>photo|video|document|animation|audio)\s+(?P<file>[^\s\[]+)"
    r"(?:\[(?P<size>\d+(?:\.\d+)?)\s*(?P<unit>[KMG]?B)\])?(?:\s+(?P<caption>.*))?$",
    re.IGNORECASE,
)
SIZE_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
POST_RE = re.compile(r"^post\s+(?P<text>.+)$")
FORWARD_RE = re.compile(r"^(?P<user>\d+)\s+forwards\s+#?(?P<message>\d+)$")
FORCESUB_RE = re.compile(r"^forcesub\s+(?P<title>[^\s]+)(?:\s+(?P<span>(\d+\s*[smhd]\s*)+))?(?:\s+(?P<requests>requests))?$")
FORCESUB_FIRST = -1002000000001  # sandbox force-subscribe channels count down from here
SET_RE = re.compile(r"^set\s+(?P<field>\w+)(?:\s+(?P<value>.*))?$", re.DOTALL)
LINK_RE = re.compile(r"^link\s+(?P<share_id>[\w-]+)\s+(?P<field>\w+)(?:\s+(?P<value>.*))?$")
UNPOST_RE = re.compile(r"^delete\s+post\s+#?(?P<message>\d+)$")
LOST_RE = re.compile(r"^(?P<which>storage|backup)\s+channel\s+lost$")
REPLY_RE = re.compile(r"^(?P<user>\d+)\s+replies(?:\s+#?(?P<message>\d+))?\s*:\s?(?P<text>.*)$")
ALBUM_RE = re.compile(
    r"^(?P<user>\d+)\s+sends\s+album\s+(?P<items>(?:(?:photo|video|document|animation|audio):\S+\s*){2,})(?P<caption>.*)$"
)
WAIT_RE = re.compile(r"^wait\s+(?P<span>(\d+\s*[smhd]\s*)+)$")
SPAN_PART_RE = re.compile(r"(\d+)\s*([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
PREVIEW = 60
# The sandbox's clock stays a year short of the last date Telegram can carry (2038): every date
# Courier sends Telegram from "now" (an invite link expiring in up to a year) still fits.
CLOCK_MAX = DATE_MAX - timedelta(days=366)
INVITE_OUTCOMES = {
    "joined": "joined the channel",
    "requested": "asked to join (the bot hears of it)",
    "expired": "Telegram says this invite link has expired",
}


def duration_parse(span: str) -> timedelta:
    total = timedelta(0)
    for number, unit in SPAN_PART_RE.findall(span):
        total += timedelta(**{UNITS[unit]: int(number)})
    return total


class Sandbox:
    """`telegram` is the in-memory Telegram; `bot` is runbot on it (its client, pump and router);
    `worker` is a worker's gateway (its own session), which the background jobs use: `wait` runs on it
    the wake-ups that fall due (`wake_until`), then the jobs beat would have fired (`jobs_run_between`)."""

    def __init__(
        self, *, telegram: TelegramServer, bot: OfflineBot, worker: Gateway, out: TextIO, as_json: bool = False, links=None
    ):
        self.telegram = telegram
        self.bot = bot
        self.worker = worker
        self.storage_channel_id = bot.router.storage_channel_id
        self.out = out
        self.as_json = as_json
        self.links = links  # follows a shortlink to where it leads (or returns None)
        self.users: dict[int, TgUser] = {}
        self.queued: list[int] = []  # broadcasts queued by the last line: a worker would be woken
        self.lost: set[int] = set()  # channels the bot was removed from (`storage channel lost`)
        telegram.listeners.append(self.print_event)
        broadcast_queued.connect(self._broadcast_queued)  # weakly: gone with the sandbox
        console_gateway_use(worker)  # what the console reads (a post's preview) it reads here

    # --- output -------------------------------------------------------------------------------

    def print_event(self, event: Event) -> None:
        if self.as_json:
            row = {
                "chat": event.chat_id,
                "action": event.action,
                "message_ids": event.message_ids,
                "text": event.text,
            }
            if event.media:
                row["media"] = {"kind": event.media.kind, "file": event.media.file}
            if event.buttons:
                row["buttons"] = [[_button_json(b) for b in row_] for row_ in event.buttons]
            if event.reply_to:
                row["reply_to"] = event.reply_to
            self._write(json.dumps(row, ensure_ascii=False))
            return
        ids = " ".join(f"#{i}" for i in event.message_ids)
        if event.action == "delete":
            self._write(f"-> {event.chat_id} delete {ids}")
            return
        if event.action == "answer":
            self._write(f"-> {event.chat_id} answer {_quote(event.text)}")
            return
        parts = [f"-> {event.chat_id} {ids} {event.action}"]
        if event.reply_to:
            parts.append(f"(reply to #{event.reply_to})")
        if event.media:
            parts.append(f"{event.media.kind}")
        if event.text:
            parts.append(_quote(event.text))
        if event.buttons:
            parts.append(" ".join("[" + " | ".join(b.text for b in row) + "]" for row in event.buttons))
        self._write(" ".join(parts))

    def note(self, text: str, **data) -> None:
        if self.as_json:
            self._write(json.dumps({"note": text, **data}, ensure_ascii=False, default=str))
        else:
            self._write(f".. {text}")

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    # --- input --------------------------------------------------------------------------------

    def user(self, user_id: int) -> TgUser:
        if user_id not in self.users:
            self.users[user_id] = TgUser(id=user_id, first_name=f"User{user_id}", username=f"user{user_id}", language_code="en")
        return self.users[user_id]

    def feed(self, line: str) -> bool:
        """Act on one input line. Returns False (after saying why) when the line is not understood."""
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        try:
            understood = self._feed(line)
        except OverflowError:
            if WAIT_RE.match(line) or FORCESUB_RE.match(line) or LINK_RE.match(line):
                self.note(f"that is too far: {line!r} (wait at most a few years)")
            else:
                self.note(f"a number in {line!r} is too large for Telegram")
            return False
        self.send_queued()
        return understood

    def _broadcast_queued(self, sender, *, broadcast_id: int, **kwargs) -> None:
        self.queued.append(broadcast_id)

    def send_queued(self) -> None:
        """Broadcasts queued by the last line are sent now, as the woken sender would send them."""
        while self.queued:
            ids, self.queued = self.queued, []
            self.note(f"broadcast {', '.join(f'#{i}' for i in ids)} queued: the sender runs", broadcasts=ids)
            outcome = sandbox_job_run("send_broadcasts", gateway=self.worker)
            self.note(f"job send_broadcasts: {outcome}")

    def _feed(self, line: str) -> bool:
        user = re.match(r"^(\d+)", line)
        if user and int(user[1]) == 0:
            self.note("Telegram user ids start at 1")
            return False
        if user and int(user[1]) > USER_ID_MAX:
            self.note(f"Telegram user ids have at most 52 bits (up to {USER_ID_MAX:,})")
            return False
        if m := WAIT_RE.match(line):
            return self.wait(duration_parse(m["span"]))
        elif m := TAP_RE.match(line):
            return self.tap(int(m["user"]), m["label"].strip())
        elif m := BLOCK_RE.match(line):
            self.telegram.block(int(m["user"]))
            self.bot.pump.process()  # runbot hears of it (UpdateBotStopped)
            self.note(f"user {m['user']} blocked the bot")
        elif m := ALBUM_RE.match(line):
            media = [Media(*item.split(":", 1)) for item in m["items"].split()]
            if len(media) > ALBUM_SIZE:
                self.note(f"an album holds at most {ALBUM_SIZE} media (Telegram's limit); this one has {len(media)}")
                return False
            ids = self.telegram.user_sends_album(self.user(int(m["user"])), media, m["caption"].strip())
            self.note(f"album {' '.join(f'#{i}' for i in ids)} from {m['user']}", message_ids=ids)
            self.bot.pump.process(expect=len(media))
        elif m := REPLY_RE.match(line):
            if not m["text"].strip():
                self.note("Telegram does not deliver empty messages: write something after the colon")
                return False
            user_id = int(m["user"])
            if m["message"] is None:  # their own latest message (an album: its first)
                own = [msg for msg in self.telegram.messages(user_id) if not msg.out]
                target = next((msg.id for msg in own if own[-1].grouped_id and msg.grouped_id == own[-1].grouped_id), None)
                target = target or (own[-1].id if own else None)
            else:
                target = int(m["message"]) if self.telegram.message(user_id, int(m["message"])) else None
            if target is None:
                self.note(
                    f"user {user_id}'s chat has no message {'#' + m['message'] if m['message'] else 'of theirs'} to reply to"
                )
                return False
            self.telegram.user_sends(self.user(user_id), m["text"], reply_to=target)
            self.bot.pump.process()
        elif m := SEND_RE.match(line):
            media = Media(m["kind"].lower(), m["file"])
            size = round(float(m["size"]) * SIZE_UNITS[m["unit"].upper()]) if m["size"] else None
            if size is not None and size > USER_FILE_SIZE:
                self.note(f"Telegram takes files of at most {USER_FILE_SIZE // 1024**2:,} MB (a Premium user's limit)")
                return False
            self.telegram.user_sends(self.user(int(m["user"])), m["caption"] or "", media=media, file_size=size)
            self.bot.pump.process()
        elif m := POST_RE.match(line):
            message_id = self.telegram.post(self.storage_channel_id, m["text"])
            self.note(f"storage channel #{message_id}: {m['text']}", message_id=message_id)
            if self.storage_channel_id in self.lost:
                self.note("runbot does not hear of it: the bot is no longer in the storage channel")
                return True
            self.bot.pump.process(posts=True)  # runbot hears of the post (share links)
            self.post_link_note(message_id)
        elif m := FORCESUB_RE.match(line):
            self.forcesub(m["title"], duration_parse(m["span"] or ""), requests=bool(m["requests"]))
        elif m := SET_RE.match(line):
            problem = setting_edit(field=m["field"], value=(m["value"] or "").replace("\\n", "\n"))
            channels = {"backup_channel_id": "Backup", "verification_log_channel_id": "Verification log"}
            if not problem and m["field"] in channels and m["value"]:
                # The operator made the channel and added the bot as an admin: here, it exists at once.
                self.telegram.create_channel(int(m["value"]), title=channels[m["field"]])
            return self.note_edit(problem, f"Bot settings: {m['field']}")
        elif m := LINK_RE.match(line):
            problem = link_edit(share_id=m["share_id"], field=m["field"], value=m["value"] or "")
            return self.note_edit(problem, f"link {m['share_id']}: {m['field']}")
        elif m := UNPOST_RE.match(line):
            if self.telegram.message(self.storage_channel_id, int(m["message"])) is None:
                self.note(f"the storage channel has no message #{m['message']}")
                return False
            self.telegram.delete_post(self.storage_channel_id, int(m["message"]))
            self.note(f"storage channel #{m['message']} deleted")
        elif m := LOST_RE.match(line):
            return self.channel_lost(m["which"])
        elif m := FORWARD_RE.match(line):
            source = self.telegram.message(self.storage_channel_id, int(m["message"]))
            if source is None:
                self.note(f"the storage channel has no message #{m['message']} (post one first)")
                return False
            self.telegram.user_sends(self.user(int(m["user"])), source.text, forward_from=(self.storage_channel_id, source.id))
            self.bot.pump.process()
        elif m := MESSAGE_RE.match(line):
            if not m["text"].strip():
                self.note("Telegram does not deliver empty messages: write something after the colon")
                return False
            self.say(int(m["user"]), m["text"])
        else:
            self.note(f"not understood: {line!r} (try '1001: /start', '1001 tap Close', 'wait 31m', '1001 blocks', 'post Hello')")
            return False
        return True

    def note_edit(self, problem: str, what: str) -> bool:
        """An edit's outcome: a note saying what changed, or why nothing did."""
        self.note(f"{what}: {problem}" if problem else f"{what} saved")
        return not problem

    def channel_lost(self, which: str) -> bool:
        chat_id = self.storage_channel_id if which == "storage" else BotSettings.load().backup_channel_id
        if not chat_id:
            self.note("no backup channel is set: 'set backup_channel_id -100…' first")
            return False
        self.telegram.remove_bot(chat_id)
        self.lost.add(chat_id)
        self.note(f"the bot was removed from the {which} channel {chat_id}")
        return True

    def say(self, user_id: int, text: str) -> None:
        self.telegram.user_sends(self.user(user_id), text)
        self.bot.pump.process()

    def tap(self, user_id: int, label: str) -> bool:
        """Tap the button; False (after a note) when the user has no message with it."""
        found = self.telegram.find_button(user_id, label)
        if found is None:
            self.note(f"user {user_id} has no message with a button {label!r}")
            return False
        msg, button = found
        if button.callback_data is not None:
            self.telegram.tap(self.user(user_id), msg.id, button.callback_data)
            self.bot.pump.process()
            return True
        opened = self.telegram.open_invite(button.url, self.user(user_id))
        if opened != "unknown":  # an invite link the bot made
            self.note(f"user {user_id} opens {button.url}: {INVITE_OUTCOMES[opened]}")
            if opened == "requested":
                self.bot.pump.process()  # runbot hears of the join request
            return True
        try:
            target = self.follow(button.url)
        except ClickLinkExpired:
            self.note(f"user {user_id} opens an expired button link (CLICK_LINK_DAYS): a page says so, no click counted")
            return True
        payload = self.deep_link_payload(target)
        if payload is None:
            self.note(f"user {user_id} opens {target} (outside the bot)")
            return True
        # Telegram turns an opened t.me/<bot>?start=X link into "/start X" from the user.
        self.say(user_id, f"/start {payload}".strip())
        return True

    def post_link_note(self, message_id: int) -> None:
        stored = StoredFile.objects.filter(source_chat_id=self.storage_channel_id, message_ids=[message_id]).first()
        if stored is not None:
            self.note(f"its share link opens the bot with '/start {stored.share_id}'", share_id=stored.share_id)

    def forcesub(self, title: str, ttl, *, requests: bool) -> None:
        """A force-subscribe channel (a new one in the in-memory Telegram, with the bot an admin)."""
        chat_id = FORCESUB_FIRST - ForceSubChannel.objects.count()
        self.telegram.create_channel(chat_id, title=title)
        minutes = int(ttl.total_seconds() // 60)
        if not minutes:  # the operator's own link, made in Telegram: it joins (or asks to) as any invite does
            self.telegram.invite_add(chat_id, f"https://t.me/+{title.lower()}", request_needed=requests)
        ForceSubChannel.objects.create(
            chat_id=chat_id,
            title=title,
            invite_link="" if minutes else f"https://t.me/+{title.lower()}",
            invite_ttl_minutes=minutes,
            join_request=requests,
        )
        how = f"invite links expiring after {minutes} min" if minutes else "a fixed invite link"
        self.note(f"force-subscribe channel {title} ({chat_id}): {how}{', join requests' if requests else ''}", chat=chat_id)

    def follow(self, url: str) -> str:
        """Where a link button really leads, as a browser would find out."""
        token = click_token_of(url=url)
        if token is not None:  # a tracked button: Courier's redirect records the click, then forwards
            url = click_record(token=token) or url
        if self.links is not None:  # a shortlink
            url = self.links(url) or url
        return url

    def deep_link_payload(self, url: str) -> str | None:
        parsed = urlparse(url)
        if (
            parsed.netloc.lower() not in ("t.me", "telegram.me")
            or parsed.path.strip("/").lower() != self.telegram.bot.username.lower()
        ):
            return None
        return parse_qs(parsed.query).get("start", [""])[0]

    def wait(self, delta: timedelta) -> bool:
        """Move the clock and run the jobs that fell due; False (and nothing moves) when that would
        take the clock past CLOCK_MAX."""
        before = clock.now()
        if delta > CLOCK_MAX - before:
            self.note(
                f"that is too far: the sandbox's clock stays before {_fmt(CLOCK_MAX)} (Telegram's dates end in 2038); "
                f"it is {_fmt(before)}"
            )
            return False
        target = before + delta
        self.note(f"clock {_fmt(before)} -> {_fmt(target)}")
        self.wake_until(target)
        after = clock.clock_advance(max(timedelta(0), target - clock.now()))
        ran, busy = [], []
        # The jobs that fell due run, as beat and a worker would, on the worker's gateway.
        for name, outcome in jobs_run_between(before, after, gateway=self.worker):
            ran.append(name)
            if outcome.processed or outcome.failed:
                busy.append(f"{name}: {outcome}")
        ran = list(dict.fromkeys(ran))  # a job that ran again (it fired again in the span and had work) once
        if ran:
            self.note(f"jobs run: {', '.join(ran)}", jobs=ran, results=busy)
        for line in busy:
            self.note(f"job {line}")
        return True

    def wake_until(self, until: datetime) -> None:
        """The wake-ups (scheduler/wakeup.py) of the span, as a worker runs them: the clock moves to
        the earliest due time a waking job reports (`due_next`) and that job runs then, to the
        second, until nothing more falls due by `until`. A run that finds nothing to do for what
        was due is not woken again in this span (a wake-up that got nothing does not re-arm):
        beat's run at the end of the wait retries it."""
        waking = [job for job in JOBS.values() if job.due_next is not None]
        resting: set[str] = set()
        for _ in range(WAKES_MAX):
            dues = [(due, job) for job in waking if job.name not in resting and (due := job.due_next()) is not None]
            dues = [(due, job) for due, job in dues if due <= until]
            if not dues:
                return
            due, job = min(dues, key=lambda pair: pair[0])
            if due > clock.now():
                clock.clock_advance(due - clock.now())
            self.note(f"{_fmt(clock.now())}: {job.name} wakes (work due at {due:%H:%M:%S})", job=job.name)
            outcome = sandbox_job_run(job.name, gateway=self.worker)
            if outcome.processed or outcome.failed:
                self.note(f"job {job.name}: {outcome}")
            if not outcome.processed or outcome.detail.startswith(RUN_FAILED):
                resting.add(job.name)
        self.note(f"more than {WAKES_MAX} wake-ups in one wait: the rest go at the jobs' scheduled runs")

    def run(self, stream: TextIO, *, interactive: bool = False) -> int:
        failures = 0
        while True:
            if interactive:
                self.out.write("sandbox> ")
                self.out.flush()
            line = stream.readline()
            if not line:
                break
            if line.strip() in ("quit", "exit"):
                break
            if not self.feed(line):
                failures += 1
        return failures


def _button_json(b: Button) -> dict:
    return {"text": b.text, "url": b.url} if b.url else {"text": b.text, "callback_data": b.callback_data}


def _quote(text: str) -> str:
    flat = " / ".join(line for line in text.splitlines() if line.strip())
    if len(flat) > PREVIEW:
        flat = flat[: PREVIEW - 1] + "…"
    return json.dumps(flat, ensure_ascii=False)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def demo_setup(telegram: TelegramServer, *, storage_channel_id: int):
    """Demo data: verification on (through the in-memory shortener), 30-minute auto-delete, an
    onboarding sequence (after 10 min a tracked channel button; after 60 min a reminder only for
    users who did not tap it), and a two-message batch in the sandbox's storage channel (a document
    and a note). Returns the file."""
    sequence = Sequence.objects.create(name="Demo onboarding")
    sequence.steps.create(
        delay_seconds=600,
        text="Welcome aboard! Our channel has news every day.",
        buttons="📣 Open the channel | https://t.me/courier_news | channel",
    )
    sequence.steps.create(
        delay_seconds=3600,
        text="Still not in our channel? You are missing the daily news.",
        condition="not_clicked",
        condition_button="channel",
    )
    conf = BotSettings.load()
    conf.verification_enabled = True
    conf.how_to_verify_url = "https://example.com/how-to-verify"
    conf.auto_delete_minutes = 30
    conf.save()

    ids = [
        telegram.post(storage_channel_id, "Courier handbook", media=Media("document", "demo-handbook.pdf")),
        telegram.post(storage_channel_id, "Thanks for trying Courier!"),
    ]
    stored = file_store(source_chat_id=storage_channel_id, message_ids=ids, title="Demo: Courier handbook")
    stored.share_id = "demo"  # a fixed id, so that scripted conversations can name it
    stored.save(update_fields=["share_id"])
    return stored


# --- editing settings from the sandbox, checked as the admin's forms check them ----------------------

YES, NO = ("yes", "on", "true", "1"), ("no", "off", "false", "0")


def setting_edit(*, field: str, value: str) -> str:
    """Set one Bot settings field through the settings page's own form; returns the problem, or ""."""
    conf = BotSettings.load()
    names = {f.name for f in BotSettings._meta.concrete_fields} - {"id", "bot_username"}
    if field not in names:
        return f"Bot settings have no {field!r}: " + ", ".join(sorted(names))
    form_class = modelform_factory(BotSettings, form=BotSettingsForm, fields=[field])
    try:
        data = {field: _form_value(BotSettings, field, value)}
    except ValueError as exc:
        return str(exc)
    return _form_save(form_class(data=data, instance=conf))


def link_edit(*, share_id: str, field: str, value: str) -> str:
    """Set one of a stored file's own settings (as the admin's file form does); returns the problem, or ""."""
    stored = StoredFile.objects.filter(share_id=share_id).first()
    if stored is None:
        return f"no stored file {share_id!r}"
    if field not in LINK_SETTINGS:
        return f"a link's own settings are {', '.join(LINK_SETTINGS)}"
    if field == "expires_at" and value.strip() not in ("", "never", "default"):
        if not WAIT_RE.match(f"wait {value.strip()}"):
            return "expires_at takes a span from now (2h, 30m, 1d) or never"
        value = (clock.now() + duration_parse(value)).isoformat()
    form_class = modelform_factory(StoredFile, fields=[field])
    try:
        data = {field: _form_value(StoredFile, field, value)}
    except ValueError as exc:
        return str(exc)
    return _form_save(form_class(data=data, instance=stored))


def _form_value(model, field: str, value: str) -> str:
    """What the admin's widget would post for a sandbox value (yes/no/default)."""
    kind = model._meta.get_field(field)
    word = value.strip().lower()
    if kind.get_internal_type() == "BooleanField":
        if word not in (*YES, *NO, *(("default", "") if kind.null else ())):
            raise ValueError(f"{field} is yes or no" + (" (or default)" if kind.null else "") + f", not {value.strip()!r}")
        if kind.null:
            return {"default": "unknown", "": "unknown", **dict.fromkeys(YES, "true"), **dict.fromkeys(NO, "false")}[word]
        return "on" if word in YES else ""
    return "" if word in ("default", "never") else value.strip()


def _form_save(form) -> str:
    if not form.is_valid():
        return " ".join(message for errors in form.errors.values() for message in errors)  # one field: its messages
    form.save()
    return ""
