"""/start is runbot's hot path: every variant runs a small, fixed number of SQL queries, whatever the
number of files behind the link (counted around the whole update: runbot's client receives it, the
router and the services answer it). Each update also costs its claim and its done mark
(services/updates.py: one INSERT before, one UPDATE after), checked in `counted` and left out of
the counts below, which are the handler's own."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext

from botapp import clock
from botapp.models import BotSettings, SequenceMessage, TelegramUser
from botapp.services.files import file_store
from botapp.services.invites import force_sub_channels
from botapp.services.sequences import sequence_steps_enabled
from botapp.services.users import LAST_SEEN_STEP
from botapp.telegram.gateway import TgUser
from tests.conftest import STORAGE
from tests.factories import SequenceFactory, SequenceStepFactory

pytestmark = pytest.mark.django_db

SIZES = (1, 50)  # files behind the link
# Tables the hot path must not touch: settings come from the cache, counters go to Redis.
NOT_TOUCHED = ("botapp_botsettings", "botapp_dailystat", 'UPDATE "botapp_storedfile"')
CLAIMS = "botapp_handledupdate"


@pytest.fixture
def links(telegram, db):
    """One link per size, each to that many messages in the storage channel."""
    return {
        n: file_store(source_chat_id=STORAGE, message_ids=[telegram.post(STORAGE, f"part {i}") for i in range(n)]) for n in SIZES
    }


@pytest.fixture
def settings_cached(conf):
    """runbot's steady state: the settings, the onboarding steps and the force-subscribe channels
    were read once since they last changed, and are cached."""
    BotSettings.load()
    sequence_steps_enabled()
    force_sub_channels()
    return conf


@pytest.fixture
def verification_on(settings_cached):
    settings_cached.verification_enabled = True
    settings_cached.save()
    BotSettings.load()
    return settings_cached


def counted(chat, user, text):
    """The bot's actions after `user` sends `text`, and the SQL the handler ran meanwhile (the
    update's claim before it and done mark after it checked, and left out)."""
    with CaptureQueriesContext(connection) as ctx:
        events = chat(user, text)
    queries = [q["sql"] for q in ctx.captured_queries]
    for sql in queries:
        assert not any(name in sql for name in NOT_TOUCHED), sql
    claims = [q for q in queries if CLAIMS in q]
    assert [q.split()[0] for q in claims] == ["INSERT", "UPDATE"], listing(claims)
    assert queries[0] == claims[0] and queries[-1] == claims[-1], listing(queries)  # before and after everything
    return events, [q for q in queries if CLAIMS not in q]


def actions(events):
    return [e.action for e in events]


def listing(queries):
    return "\n".join(queries)


def test_plain_start_by_a_new_user(chat, settings_cached):
    events, queries = counted(chat, TgUser(id=5001, first_name="New"), "/start")

    assert [e.text for e in events] == ["Hello New! I deliver files shared through my links."]
    # the user looked up, inserted (the onboarding steps come from the cache: none)
    assert len(queries) == 2, listing(queries)


def test_plain_start_by_a_new_user_with_an_onboarding_sequence(chat, settings_cached):
    sequence = SequenceFactory(name="Welcome")
    for delay in (10, 60, 600):
        SequenceStepFactory(sequence=sequence, delay_seconds=delay * 60, text="Hi")
    events, queries = counted(chat, TgUser(id=5001, first_name="New"), "/start")
    assert len(queries) == 4, listing(queries)  # saving the steps forgot them: read again, once

    events, queries = counted(chat, TgUser(id=5002, first_name="Newer"), "/start")

    assert actions(events) == ["send"]
    assert SequenceMessage.objects.count() == 6
    assert len(queries) == 3, listing(queries)  # the user looked up, inserted; the steps inserted in one statement


def test_campaign_starts_new_and_returning(chat, settings_cached):
    SequenceStepFactory(sequence=SequenceFactory(start_payload="campaign_x"), delay_seconds=60, text="Hi")
    chat(TgUser(id=5001, first_name="First"), "/start campaign_x")  # saving the step forgot the steps: read again

    events, queries = counted(chat, TgUser(id=5002, first_name="New"), "/start campaign_x")
    assert [e.text for e in events] == ["Hello New! I deliver files shared through my links."]
    # the user looked up, inserted; the steps inserted; no stored file by that name
    assert len(queries) == 4, listing(queries)

    clock.clock_advance(LAST_SEEN_STEP / 2)
    events, queries = counted(chat, TgUser(id=5002, first_name="New"), "/start")
    assert [e.text for e in events] == ["Welcome back, New!"]
    assert len(queries) == 1, listing(queries)  # the lookup only

    events, queries = counted(chat, TgUser(id=5002, first_name="New"), "/start spring")
    # the lookup; no stored file; the latest payload written (no sequence targets it: no INSERT)
    assert len(queries) == 3, listing(queries)

    events, queries = counted(chat, TgUser(id=5002, first_name="New"), "/start campaign_x")
    # the lookup; no stored file; the latest payload written; its steps inserted (had already: none new)
    assert len(queries) == 4, listing(queries)
    assert SequenceMessage.objects.filter(user__telegram_id=5002).count() == 1


@pytest.mark.parametrize("n", SIZES)
def test_new_user_from_a_file_link(chat, settings_cached, links, n):
    """(a) Verification off: the files and the deletion notice."""
    events, queries = counted(chat, TgUser(id=6000 + n, first_name="New"), f"/start {links[n].share_id}")

    assert actions(events) == ["copy"] * n + ["send"]
    # the user looked up, inserted; the file; the pending deletion (force-subscribe channels: cached)
    assert len(queries) == 4, listing(queries)


@pytest.mark.parametrize("n", SIZES)
def test_new_user_from_a_file_link_gets_the_verify_prompt(chat, verification_on, links, n):
    """(b) Verification on: the user's first token of the day."""
    events, queries = counted(chat, TgUser(id=7000 + n, first_name="New"), f"/start {links[n].share_id}")

    assert [e.text.split(":")[0] for e in events] == ["Verify once to get your files"]
    # the user looked up, inserted; the file; then in a transaction (2 statements) the user's row
    # locked, a pending token looked up (one racing this request's might have made it), the day's
    # token counter taken (one upsert), the token inserted with its shortlink
    assert len(queries) == 9, listing(queries)


@pytest.mark.parametrize("n", SIZES)
def test_verified_user_gets_the_files(chat, verification_on, links, n):
    """(c)"""
    user = TgUser(id=8000 + n, first_name="Vera")
    chat(user, "/start")
    TelegramUser.objects.filter(telegram_id=user.id).update(verified_until=clock.now() + timedelta(hours=5))

    events, queries = counted(chat, user, f"/start {links[n].share_id}")

    assert actions(events) == ["copy"] * n + ["send"]
    # the user; the file; the pending deletion
    assert len(queries) == 3, listing(queries)


@pytest.mark.parametrize("n", SIZES)
def test_returning_unverified_user_gets_the_verify_prompt(chat, verification_on, links, n):
    """(d) The first token of the day, then the same token again (reused, not counted)."""
    user = TgUser(id=9000 + n, first_name="Ret")
    chat(user, "/start")

    events, queries = counted(chat, user, f"/start {links[n].share_id}")
    assert [e.text.split(":")[0] for e in events] == ["Verify once to get your files"]
    # the user; the file; a pending token looked up; in a transaction: the user's row locked, the
    # token looked up again, the counter taken, the token inserted
    assert len(queries) == 9, listing(queries)

    again, queries = counted(chat, user, f"/start {links[n].share_id}")
    assert again[0].buttons == events[0].buttons
    assert len(queries) == 3, listing(queries)  # the pending token found: nothing written


@pytest.mark.django_db(transaction=True)
def test_outside_a_test_transaction_the_counts_are_the_same(chat, links):
    """As in production (autocommit), where BEGIN and COMMIT count as SAVEPOINT and RELEASE do in a
    test transaction: only a new token opens a transaction."""
    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.save()
    BotSettings.load()
    assert len(counted(chat, TgUser(id=5301, first_name="New"), "/start")[1]) == 3  # the steps read, then cached
    # the force-subscribe channels read, then cached
    assert len(counted(chat, TgUser(id=5302, first_name="New"), f"/start {links[50].share_id}")[1]) == 5
    assert len(counted(chat, TgUser(id=5304, first_name="New"), f"/start {links[50].share_id}")[1]) == 4
    conf.verification_enabled = True
    conf.save()
    BotSettings.load()
    assert len(counted(chat, TgUser(id=5303, first_name="New"), f"/start {links[50].share_id}")[1]) == 9


def test_last_seen_is_written_at_most_once_an_hour(chat, settings_cached):
    user = TgUser(id=5002, first_name="Seen")
    chat(user, "/start")
    first = TelegramUser.objects.get(telegram_id=user.id).last_seen_at

    clock.clock_advance(LAST_SEEN_STEP - timedelta(minutes=1))
    _, queries = counted(chat, user, "/start")
    assert len(queries) == 1, listing(queries)  # the lookup only
    assert TelegramUser.objects.get(telegram_id=user.id).last_seen_at == first

    clock.clock_advance(timedelta(minutes=1))
    _, queries = counted(chat, user, "/start")
    assert len(queries) == 2, listing(queries)
    seen = TelegramUser.objects.get(telegram_id=user.id).last_seen_at
    assert seen - first >= LAST_SEEN_STEP and clock.now() - seen < timedelta(seconds=5)


def test_a_changed_name_is_written_with_last_seen_in_one_update(chat, settings_cached):
    chat(TgUser(id=5003, first_name="Old"), "/start")

    _, queries = counted(chat, TgUser(id=5003, first_name="New"), "/start")

    assert [q.split()[0] for q in queries] == ["SELECT", "UPDATE"]
    user = TelegramUser.objects.get(telegram_id=5003)
    assert user.first_name == "New" and user.last_seen_at > user.joined_at


# --- Bot settings in the shared cache ---------------------------------------------------------------


def test_settings_are_read_from_the_shared_cache_and_a_save_invalidates_them(conf):
    with CaptureQueriesContext(connection) as ctx:
        BotSettings.load()
    assert len(ctx.captured_queries) == 1  # the save in `conf` left the cache empty

    with CaptureQueriesContext(connection) as ctx:
        loaded = BotSettings.load()
    assert len(ctx.captured_queries) == 0
    assert loaded.bot_username == "CourierBot" and loaded.pk == 1

    # Another process (a new connection to the same Redis) finds them there.
    other = caches.create_connection("default")
    assert other.get("botsettings")["bot_username"] == "CourierBot"

    loaded.welcome_text = "Changed"
    loaded.save()  # a cached instance saves like a loaded one: an UPDATE of row 1
    assert other.get("botsettings") is None
    assert BotSettings.load().welcome_text == "Changed"
    assert BotSettings.objects.count() == 1


def test_settings_edited_in_the_admin_reach_the_bot(chat, alice, settings_cached, client, django_user_model, plain_http):
    from django.urls import reverse

    client.force_login(django_user_model.objects.create_superuser("op", "op@example.com", "pw"))
    url = reverse("admin:botapp_botsettings_change", args=[1])
    form = client.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data["welcome_text"] = "Edited {first_name}"
    assert client.post(url, data).status_code == 302

    assert chat(alice, "/start")[0].text == "Edited Alice"


# --- the single statements hold under concurrency ------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_first_messages_of_a_new_user_handled_at_once_make_one_row():
    from botapp.services.users import user_seen
    from tests.concurrency import run_in_threads

    results = run_in_threads(lambda: user_seen(tg=TgUser(id=5100, first_name="Twice"), start_payload="ad"), n=6)

    assert TelegramUser.objects.filter(telegram_id=5100).count() == 1
    row = TelegramUser.objects.get(telegram_id=5100)
    assert {user.pk for user, _ in results} == {row.pk}
    assert sorted(created for _, created in results) == [False] * 5 + [True]  # one of them enrols the user
    assert (row.first_name, row.start_payload) == ("Twice", "ad")


@pytest.mark.django_db(transaction=True)
def test_the_daily_token_limit_holds_when_requests_race():
    from botapp.models import DailyTokenCount
    from botapp.services.verification import daily_token_take
    from tests.concurrency import run_in_threads

    user = TelegramUser.objects.create(telegram_id=5200)

    taken = run_in_threads(lambda: daily_token_take(user=user, limit=5), n=12)

    assert sorted(taken) == [False] * 7 + [True] * 5
    assert DailyTokenCount.objects.get(user=user, date=clock.today()).count == 5
