"""The README's drip campaign (`make sandbox DEMO=campaign`, offline/campaign_demo.py), line by
line: each line the README types gets exactly the actions the README shows under it, /stats ends
with the block the README shows, and what the README says of the campaign holds: each step sent
at its second, the 2 h step only to the user who did not tap, /stop's steps cancelled for good."""

from datetime import timedelta

import pytest

from botapp.models import ButtonClick, SequenceMessage, TelegramUser
from inmemory_telegram.state import Media
from offline.campaign_demo import JOIN_URL, campaign_demo_setup
from tests.test_docs import FENCE, PROMPT, README, shell_commands
from tests.transcripts import printed, sandbox

COMMAND = "make sandbox DEMO=campaign"
TAPPED, SILENT, STOPPED = 1001, 1002, 1003
ADMIN = 1000


def readme_session() -> list[tuple[str, list[str]]]:
    """The README's session: (a typed line, the actions shown under it)."""
    [shown] = [shown for command, shown in shell_commands(README.read_text()) if command == COMMAND]
    session: list[tuple[str, list[str]]] = []
    for line in shown:
        if line.startswith(PROMPT):
            session.append((line[len(PROMPT) :], []))
        elif line.startswith("-> "):
            session[-1][1].append(line)
    return session


def readme_stats() -> str:
    [block] = [body for lang, body in FENCE.findall(README.read_text()) if lang == "text" and body.startswith("Campaign X")]
    return block.rstrip("\n")


@pytest.fixture
def box(telegram, bot, gateway, conf, settings):
    settings.PUBLIC_URL = "https://courier.example"  # as the sandbox sets it: Join Now is a tracked link
    # As `manage.py sandbox` sets it: one send in flight, so steps due together go out in their
    # claim's order (with the pool's threads, in whichever order they reached Telegram).
    settings.SENDS_IN_FLIGHT = 1
    box = sandbox(telegram, bot, gateway, as_json=False)
    assert campaign_demo_setup(telegram) == "campaign_x"
    return box


@pytest.mark.django_db(transaction=True)  # the sequence sender's pool threads read the users runbot stored
def test_the_readme_campaign_runs_line_by_line_as_the_readme_shows_it(box, telegram):
    session = readme_session()
    assert [line for line, _ in session][:3] == [f"{u}: /start campaign_x" for u in (TAPPED, SILENT, STOPPED)]

    for line, shown in session:
        actions = [out for out in printed(box, line).splitlines() if out.startswith("-> ")]
        assert (line, actions) == (line, shown)

    assert telegram.bot_messages(ADMIN)[-1].text.endswith("\n" + readme_stats())


@pytest.mark.django_db(transaction=True)
def test_the_campaign_does_what_the_readme_says_to_the_second(box, telegram):
    for line, _ in readme_session():
        printed(box, line)

    welcome, lesson = telegram.bot_messages(TAPPED)[:2]
    assert welcome.media == Media("video", "campaign-x-welcome.mp4")  # copied with its media and formatting
    assert [(type(e).__name__, e.offset, e.length) for e in welcome.entities] == [("MessageEntityBold", 0, 22)]
    (join,), (tapped,) = lesson.buttons  # a link and, edited by the tap, the callback button's next state
    assert join.url.startswith("https://courier.example/go/") and tapped.text == "🔎 Verify" and tapped.callback_data

    rows = SequenceMessage.objects.select_related("user", "step").order_by("user__telegram_id", "step__delay_seconds")
    outcome = {(r.user.telegram_id, r.step.delay_seconds): (r.status, r.error) for r in rows}
    sent = ("sent", "")
    assert outcome == {
        (TAPPED, 40): sent, (TAPPED, 180): sent, (TAPPED, 1080): sent, (TAPPED, 7200): ("skipped", "clicked joined"),
        (SILENT, 40): sent, (SILENT, 180): sent, (SILENT, 1080): sent, (SILENT, 7200): sent,
        (STOPPED, 40): sent, (STOPPED, 180): sent,
        (STOPPED, 1080): ("skipped", "cancelled by /stop"), (STOPPED, 7200): ("skipped", "cancelled by /stop"),
    }  # fmt: skip
    for r in rows:
        assert r.due_at == r.user.joined_at + timedelta(seconds=r.step.delay_seconds)
        if r.status == "sent":  # woken at its due time, not at beat's next minute
            assert timedelta(0) <= r.sent_at - r.due_at < timedelta(seconds=1), (r.user.telegram_id, r.step.delay_seconds)

    stopped = TelegramUser.objects.get(telegram_id=STOPPED)
    assert stopped.state == "active" and telegram.bot_messages(STOPPED)[-1].text == "Welcome back, User1003!"  # no replay
    clicks = {(TAPPED, "joined"), (TAPPED, "verified")}
    assert set(ButtonClick.objects.values_list("user__telegram_id", "button")) == clicks
    assert box.follow(join.url) == JOIN_URL  # Join Now opens the channel through Courier's redirect, counted
    assert set(ButtonClick.objects.values_list("user__telegram_id", "button")) == clicks | {(TAPPED, "join")}
