"""python manage.py import_campaign: seed 002's drip bot moved in with one command, from its .env and
its database as the document gives them, then run by Courier's own sequence sender on the in-memory
Telegram to the second."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from botapp import clock
from botapp.models import BotSettings, ButtonClick, Sequence, SequenceMessage, SequenceStep, TelegramUser
from scheduler.jobs.registry import job_run
from tests.botapp.seed_drip import CHANNEL, ENV, FAREWELL, OTHER, USER, two_users_db

pytestmark = pytest.mark.django_db

POSTS = {36: "Welcome video", 50: "Final reminder", 56: "First text", 57: "Second message"}


def run(*args):
    out = StringIO()
    call_command("import_campaign", *map(str, args), stdout=out)
    return out.getvalue()


def seed(tmp_path, now):
    """The .env as the document gives it, and a database by its DDL: two users who started the
    bot two minutes ago (their 40 s post sent), one of whom clicked "✅ I Joined" (join_channel)
    and then verify."""
    env = tmp_path / "old.env"
    env.write_text(ENV)
    joined = now - timedelta(minutes=2)
    path = two_users_db(tmp_path / "drip.db", joined)
    return env, path, joined


@pytest.fixture
def channel(telegram):
    """The drip bot's source channel on the in-memory Telegram, its posts at the .env's ids."""
    telegram.create_channel(CHANNEL, title="Source")
    for n in range(1, max(POSTS) + 1):
        assert telegram.post(CHANNEL, POSTS.get(n, f"post {n}")) == n


@pytest.mark.django_db(transaction=True)  # the sequence sender's pool threads read the imported rows
def test_the_env_builds_the_campaign_and_a_user_who_clicked_join_channel_is_spared_the_2h_step(
    tmp_path, telegram, gateway, channel
):
    now = clock.now().replace(microsecond=0)
    clock.clock_advance(now - clock.now())
    env, path, joined = seed(tmp_path, now)

    out = run(env, path)

    assert out.splitlines() == [
        f"campaign: Bot settings: posts channel {CHANNEL}",
        "campaign: Bot settings: welcome post 36",
        "campaign: Bot settings: channel link (/about and /faq's button) https://t.me/yourbot",
        "campaign: sequence 'Drip bot (imported)': for every new user",
        "campaign: step msg_30s: after 40 s, post 56, buttons: ⚡ Join Now / ✅ I Joined",
        "campaign: step msg_3min: after 3 min, post 57, buttons: ⚡ Join Now / ✅ I Joined",
        f"campaign: step msg_cleanup: after 18 min, the text {FAREWELL!r}",
        "campaign: step msg_2h: after 2 h, post 50, buttons: ⚡ Join Now / ✅ I Joined, only if join_channel was not clicked",
        f"campaign: TARGET_CHANNEL_ID {CHANNEL}: Verify counts for its members only (the bot must be an admin there)",
        "import_campaign: 2 read: 2 created, 0 updated, 0 skipped, 0 invalid",
        "button_clicks: 2 read: 2 clicks recorded, 0 already known, 0 invalid",
        "tasks: 8 read: 6 scheduled, 0 already scheduled, 2 done (not imported), 0 repeated, 0 invalid",
    ]
    conf = BotSettings.load()
    assert (conf.posts_channel_id, conf.welcome_post_id, conf.channel_url) == (CHANNEL, 36, "https://t.me/yourbot")
    assert sorted(ButtonClick.objects.values_list("user__telegram_id", "button", "count")) == [
        (USER, "join_channel", 1),
        (USER, "verify", 1),
    ]
    # Both started the old bot (the same bot account) and so have a private chat with it; Courier
    # never saw their updates, so it holds no access hash for them and addresses them by id alone.
    telegram.users_meet([USER, OTHER])
    assert list(TelegramUser.objects.filter(telegram_id__in=[USER, OTHER]).values_list("access_hash", flat=True)) == [None, None]

    for delay in (180, 1080, 7200):
        clock.clock_advance(joined + timedelta(seconds=delay) - clock.now())
        job_run("send_sequence_messages", trigger="test", gateway=gateway)

    assert [m.text for m in telegram.bot_messages(USER)] == ["Second message", FAREWELL]
    assert [m.text for m in telegram.bot_messages(OTHER)] == ["Second message", FAREWELL, "Final reminder"]
    second = telegram.bot_messages(USER)[0]
    assert [[(b.text, b.url) for b in row] for row in second.buttons] == [
        [("⚡ Join Now", "https://t.me/yourbot")],
        [("✅ I Joined", None)],
    ]
    rows = SequenceMessage.objects.select_related("user", "step").order_by("user__telegram_id", "step__delay_seconds")
    assert [(r.user.telegram_id, r.step.delay_seconds, r.status, r.error) for r in rows] == [
        (USER, 180, "sent", ""), (USER, 1080, "sent", ""), (USER, 7200, "skipped", "clicked join_channel"),
        (OTHER, 180, "sent", ""), (OTHER, 1080, "sent", ""), (OTHER, 7200, "sent", ""),
    ]  # fmt: skip
    for r in rows:
        assert r.due_at == joined + timedelta(seconds=r.step.delay_seconds)
        if r.status == "sent":
            assert timedelta(0) <= r.sent_at - r.due_at < timedelta(seconds=1)


def test_a_dry_run_says_what_it_would_do_and_writes_nothing_and_a_second_run_changes_nothing(tmp_path):
    env, path, _ = seed(tmp_path, clock.now())

    dry = run(env, path, "--dry-run")

    assert not Sequence.objects.exists() and not TelegramUser.objects.exists() and not SequenceMessage.objects.exists()
    assert BotSettings.load().posts_channel_id is None
    assert dry.splitlines()[-3:] == [
        "import_campaign (dry run, nothing written): 2 read: 2 created, 0 updated, 0 skipped, 0 invalid",
        "button_clicks: 2 read: 2 clicks recorded, 0 already known, 0 invalid",
        "tasks: 8 read: 6 scheduled, 0 already scheduled, 2 done (not imported), 0 repeated, 0 invalid",
    ]
    assert run(env, path).splitlines() == [line.replace(" (dry run, nothing written)", "") for line in dry.splitlines()]
    again = run(env, path)
    assert again.splitlines() == [
        "campaign: already built (nothing to change)",
        "import_campaign: 2 read: 0 created, 0 updated, 2 skipped, 0 invalid",
        "button_clicks: 2 read: 0 clicks recorded, 2 already known, 0 invalid",
        "tasks: 8 read: 0 scheduled, 6 already scheduled, 2 done (not imported), 0 repeated, 0 invalid",
    ]
    assert SequenceStep.objects.count() == 4


def test_an_operators_own_posts_channel_is_kept_and_said(tmp_path):
    conf = BotSettings.load()
    conf.posts_channel_id = -1001000000009
    conf.save()
    env, path, _ = seed(tmp_path, clock.now())
    out = run(env, path)
    assert f"campaign: Bot settings: posts channel kept as -1001000000009 (the .env says {CHANNEL}: change it on the page)" in out
    assert set(SequenceStep.objects.exclude(post_id=None).values_list("post_chat_id", flat=True)) == {CHANNEL}


@pytest.mark.parametrize(
    "change,error",
    [
        (("MSG_30S_ID=56", "MSG_30S_ID=fifty"), "old.env line 12: MSG_30S_ID: 'fifty' is not a message id of the channel"),
        (
            ("SOURCE_CHANNEL_ID=-1003232273065", "SOURCE_CHANNEL_ID=42"),
            "old.env line 7: SOURCE_CHANNEL_ID: '42' is not a channel id",
        ),
        (("MSG_2H_ID=50", "# MSG_2H_ID=50"), "old.env: MSG_2H_ID is not set (the drip bot's campaign needs it)"),
        (
            ("CHANNEL_URL=https://t.me/yourbot", "CHANNEL_URL=t.me/yourbot"),
            "old.env line 4: CHANNEL_URL: 't.me/yourbot' is not a link",
        ),
        (("# Core Config", "just words"), "old.env line 1: 'just words' is not NAME=value"),
    ],
)
def test_a_bad_env_is_one_line_naming_the_file_line_and_variable_and_nothing_is_written(tmp_path, change, error):
    env, path, _ = seed(tmp_path, clock.now())
    env.write_text(ENV.replace(*change))
    with pytest.raises(CommandError) as failure:
        run(env, path)
    assert error in str(failure.value) and "\n" not in str(failure.value)
    assert not Sequence.objects.exists() and not TelegramUser.objects.exists()
    assert BotSettings.load().posts_channel_id is None


@pytest.mark.django_db(transaction=True)  # the sequence sender's pool threads read the users runbot stored
def test_verify_counts_only_for_a_member_of_target_channel_id(tmp_path, telegram, gateway, channel, chat, alice):
    """The drip bot's Verify checked TARGET_CHANNEL_ID's membership: a tap by a user who has not
    joined is answered so and records nothing; once they join, it records verify and says so."""
    env, path, _ = seed(tmp_path, clock.now())
    run(env, path)
    chat(alice, "/start")
    clock.clock_advance(timedelta(seconds=41))
    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    assert telegram.bot_messages(alice.id)[-1].text == "First text"
    chat.tap(alice, "✅ I Joined")

    refused = chat.tap(alice, "🔎 Verify")

    assert [(e.action, e.text, e.alert) for e in refused] == [
        ("answer", "You have not joined the channel yet: join it, then tap again.", True)
    ]
    mine = ButtonClick.objects.filter(user__telegram_id=alice.id)
    assert list(mine.values_list("button", flat=True)) == ["join_channel"]
    telegram.join(CHANNEL, alice.id)
    verified = chat.tap(alice, "🔎 Verify")
    assert [(e.action, e.text) for e in verified] == [("send", "✅ Verified!")]
    assert sorted(mine.values_list("button", flat=True)) == ["join_channel", "verify"]
