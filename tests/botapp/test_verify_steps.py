"""Verification in steps (issue 45, scope 3): a second and a third verification after their gaps,
each through its own shortener when set, each under the daily token limit and the bypass check,
and the verification log channel, fed by a durable outbox a few messages a minute."""

import io
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.management import call_command
from django.forms import modelform_factory

from botapp import clock
from botapp.admin.settings_form import BotSettingsForm
from botapp.bot.router import Router
from botapp.models import BotSettings, GrowthCount, Notice, VerificationProgress, VerificationToken
from botapp.services.notices import LOG_MESSAGES_PER_RUN, notice_log, notices_claim
from botapp.services.users import user_access_hash, user_access_hashes_fill
from offline.sandbox import Sandbox
from offline.telegram.clients import OfflineBot
from scheduler.jobs.registry import job_run
from tests.conftest import ADMIN, STORAGE
from tests.transcripts import said

pytestmark = pytest.mark.django_db

LOG = -1003000000077


@pytest.fixture
def box(telegram, bot, gateway, shortener):
    return Sandbox(telegram=telegram, bot=bot, worker=gateway, out=io.StringIO(), as_json=True, links=shortener.follow)


@pytest.fixture
def steps_on(conf):
    conf.verification_enabled = True
    conf.verification_hours = 48
    conf.verify_second_gap_hours = 6
    conf.verify_third_gap_hours = 24
    conf.save()
    return conf


def prompt(out):
    """The Verify prompt the user got (auto-delete's notices aside)."""
    (text,) = [t for t in out.texts(1001, "send") if t.startswith("Verification")]
    return text


def growth(kind):
    row = GrowthCount.objects.filter(kind=kind).first()
    return row.count if row else 0


def test_a_second_verification_after_its_gap_then_a_third_then_a_new_period(box, stored, steps_on):
    link = f"1001: /start {stored.share_id}"
    out = said(box, f"set verification_log_channel_id {LOG}", link)
    assert out.texts(1001) == ["Verification 1 of 3 (every 2 days): tap Verify, pass the page, and come back."]
    out = said(box, "wait 1m", "1001 tap ✅ Verify")
    assert "✅ You are verified for 6 h." in out and len(out.to(1001, "copy")) == 2

    out = said(box, "wait 5h", link)  # within the first step
    assert len(out.to(1001, "copy")) == 2 and "Verify" not in str(out.texts(1001))

    out = said(box, "wait 1h", link)  # the gap is over: the second step
    assert prompt(out).startswith("Verification 2 of 3 (") and out.to(1001, "copy") == []
    out = said(box, "wait 1m", "1001 tap ✅ Verify")
    assert "✅ You are verified for 1 day." in out and len(out.to(1001, "copy")) == 2

    out = said(box, "wait 1d", link)
    assert prompt(out).startswith("Verification 3 of 3 (")
    out = said(box, "wait 1m", "1001 tap ✅ Verify")  # until the period's end: 48 h after the first
    assert "✅ You are verified for 17 h 58 min." in out and len(out.to(1001, "copy")) == 2

    out = said(box, "wait 18h", link)  # the period is over: step 1 of a new one
    assert prompt(out).startswith("Verification 1 of 3 (")

    assert [growth(f"verify{n}") for n in (1, 2, 3)] == [1, 1, 1]
    assert list(VerificationToken.objects.filter(status="pending").values_list("step", flat=True)) == [1]
    logged = "\n".join(r["text"] for r in _all(box) if r.get("chat") == LOG)
    assert logged.count("✅ first verification: 1001 (@user1001)") == 1
    assert "✅ second verification: 1001 (@user1001)" in logged and "✅ third verification: 1001 (@user1001)" in logged


def _all(box):
    return [json.loads(line) for line in box.out.getvalue().splitlines()]


def test_steps_and_the_log_survive_a_restart(box, stored, steps_on, telegram, bot, gateway, shortener):
    said(box, f"set verification_log_channel_id {LOG}", f"1001: /start {stored.share_id}", "wait 1m", "1001 tap ✅ Verify")
    bot.stop()  # runbot stops; the next one reads where the user is from the database
    progress = VerificationProgress.objects.get()
    assert progress.step == 1 and Notice.objects.filter(status="pending").count() == 1
    clock.clock_advance(timedelta(hours=6, minutes=1))
    again = OfflineBot(
        telegram,
        lambda gw: Router(gw, admin_ids=frozenset({ADMIN}), storage_channel_id=STORAGE, shortener=shortener),
        peers=user_access_hash,
        peers_learnt=user_access_hashes_fill,
    )
    try:
        box2 = Sandbox(telegram=telegram, bot=again, worker=gateway, out=io.StringIO(), as_json=True, links=shortener.follow)
        out = said(box2, f"1001: /start {stored.share_id}")
        assert prompt(out).startswith("Verification 2 of 3 (")
        out = said(box2, "wait 1m")
        assert [r for r in out if r.get("chat") == LOG]  # the line written before the restart went out
    finally:
        again.stop()


class SecondShortener(BaseHTTPRequestHandler):
    """A shortener's HTTP API (GET ?api=key&url=…), answering https://second.example/<n>."""

    links: dict[str, str] = {}
    keys: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        query = parse_qs(urlparse(self.path).query)
        short = f"https://second.example/{len(self.links) + 1}"
        type(self).links[short] = query["url"][0]
        type(self).keys.append(query["api"][0])
        body = json.dumps({"status": "success", "shortenedUrl": short}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def second_shortener():
    SecondShortener.links, SecondShortener.keys = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SecondShortener)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api"
    server.shutdown()
    thread.join()


def test_each_step_goes_through_its_own_shortener_when_one_is_set(
    telegram, bot, gateway, shortener, stored, steps_on, second_shortener
):
    steps_on.verify_second_shortener_url = second_shortener
    steps_on.verify_second_shortener_key = "k2"
    steps_on.save()
    box = Sandbox(
        telegram=telegram, bot=bot, worker=gateway, out=io.StringIO(), as_json=True,
        links=lambda url: shortener.follow(url) or SecondShortener.links.get(url),
    )  # fmt: skip
    out = said(box, f"1001: /start {stored.share_id}")
    assert out.to(1001)[0]["buttons"][0][0]["url"] == "https://short.example/1"  # the first step: the usual shortener
    said(box, "wait 1m", "1001 tap ✅ Verify", "wait 6h1m")
    out = said(box, f"1001: /start {stored.share_id}")
    assert out.to(1001)[0]["buttons"][0][0]["url"] == "https://second.example/1" and SecondShortener.keys == ["k2"]
    out = said(box, "wait 1m", "1001 tap ✅ Verify")
    assert "✅ You are verified for 1 day." in out and len(out.to(1001, "copy")) == 2


def test_the_daily_token_limit_and_the_bypass_check_apply_to_every_step(box, stored, steps_on):
    steps_on.daily_token_limit = 2
    steps_on.verification_log_channel_id = LOG
    steps_on.save()
    box.telegram.create_channel(LOG, title="Verification log")
    link = f"1001: /start {stored.share_id}"
    said(box, link, "wait 1m", "1001 tap ✅ Verify", "wait 6h1m")
    out = said(box, link, "1001 tap ✅ Verify")  # the second step's token, redeemed at once: a bypass
    assert "You came back faster than the verification page allows" in out and out.to(1001, "copy") == []
    out = said(box, link)  # a third token today: past the limit of 2, even for the second step
    assert "You have used all 2 verification links for today" in out.texts(1001)[0]
    assert growth("verify2") == 0 and growth("bypass") == 1
    out = said(box, "wait 1m")
    assert any("⚠️ bypass: 1001 (@user1001)" in r["text"] for r in out if r.get("chat") == LOG)


def test_log_lines_are_joined_into_few_messages_a_run_and_the_rest_wait(telegram, gateway, conf):
    conf.verification_log_channel_id = LOG
    conf.save()
    telegram.create_channel(LOG, title="Verification log")
    for n in range(2000):
        notice_log(text=f"✅ first verification: {10_000 + n} (@someone_with_a_long_name_{n})")
    outcome = job_run("send_notices", trigger="test", gateway=gateway)
    posts = [e for e in telegram.events if e.chat_id == LOG]
    assert outcome.processed == len(posts) == LOG_MESSAGES_PER_RUN  # a channel's pace, not 2000 messages
    assert all(len(p.text) <= 4096 for p in posts)
    lines = [line for p in posts for line in p.text.split("\n")]
    assert lines == [n.text for n in Notice.objects.filter(status="sent").order_by("id")]
    assert lines[0].startswith("✅ first verification: 10000 ") and len(lines) < 2000
    assert Notice.objects.filter(status="pending").count() == 2000 - len(lines)


def test_a_log_message_tried_again_keeps_its_lines_and_random_id(conf):
    conf.verification_log_channel_id = LOG
    conf.save()
    for n in range(5):
        notice_log(text=f"line {n}")
    (first,) = notices_claim(users=10, log_messages=1)  # a worker claims, then dies before sending
    notice_log(text="line 5")  # written meanwhile
    assert first.text == "line 0\nline 1\nline 2\nline 3\nline 4"
    (other,) = notices_claim(users=10, log_messages=1)  # leased lines are no one else's: only the new one
    assert other.text == "line 5"
    clock.clock_advance(timedelta(minutes=6))
    (again, newest) = notices_claim(users=10, log_messages=2)
    assert again == first  # the same lines, the same random_id: Telegram drops a repeat
    assert newest == other


def test_without_a_log_channel_nothing_is_written_and_the_command_says_what_waits(conf):
    assert notice_log(text="✅ first verification: 1") is None and Notice.objects.count() == 0
    out = io.StringIO()
    call_command("send_notices", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "send_notices: dry run: 0 processed, 0 failed (notices waiting)"


def test_gaps_that_never_come_within_the_period_are_refused(conf):
    fields = ["verification_hours", "verify_second_gap_hours", "verify_third_gap_hours"]
    form = modelform_factory(BotSettings, form=BotSettingsForm, fields=fields)(
        data={"verification_hours": 24, "verify_second_gap_hours": 6, "verify_third_gap_hours": 24}, instance=conf
    )
    assert not form.is_valid() and "the later steps would never come" in str(form.errors)
    form = modelform_factory(BotSettings, form=BotSettingsForm, fields=fields)(
        data={"verification_hours": 24, "verify_second_gap_hours": "", "verify_third_gap_hours": 6}, instance=conf
    )
    assert not form.is_valid() and "needs a second one" in str(form.errors)


def test_an_admins_ban_is_posted_to_the_log_and_counted(box, conf):
    conf.verification_log_channel_id = LOG
    conf.save()
    box.telegram.create_channel(LOG, title="Verification log")
    out = said(box, "1001: /start", "1000: /ban 1001 2h spam <script>", "wait 1m")
    (line,) = [r["text"] for r in out if r.get("chat") == LOG]
    assert line.startswith("🚫 ban: 1001 (@user1001) until ") and line.endswith("; reason: spam <script>")
    assert growth("ban") == 1
