"""Every user of the old bot reachable on day one (issue 43, scope 1): users imported from another
bot never wrote to Courier, so it holds no access hash for them; it addresses them by id alone, as
Telegram's own Bot API server does, and Telegram's answer decides."""

from io import StringIO

import pytest
from django.core.management import call_command

from botapp.models import BroadcastDelivery, SequenceMessage, TelegramUser
from botapp.services.broadcasts import broadcast_start
from botapp.services.users import user_access_hash, user_access_hashes_fill
from botapp.telegram.gateway import Media
from offline.telegram.clients import offline_gateway
from scheduler.jobs.registry import job_run
from tests.factories import BroadcastDeliveryFactory, BroadcastFactory, SequenceMessageFactory, TelegramUserFactory

USERS = range(500_001, 501_001)  # 1,000 users of the old bot
NEVER_STARTED = set(range(500_001, 501_001, 100))  # 10 of them never started it


def import_csv(tmp_path, ids):
    path = tmp_path / "users.csv"
    path.write_text("user_id,first_name\n" + "".join(f"{i},User{i}\n" for i in ids))
    out = StringIO()
    call_command("import_users", str(path), stdout=out)
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the sender's pool threads read the imported users
def test_a_broadcast_reaches_1000_imported_users_and_the_10_who_never_started_are_marked_as_telegram_said(
    tmp_path, telegram, gateway
):
    # They started the bot before, under the old bot (the same bot account): a private chat with
    # it exists on Telegram. Courier never saw an update of theirs.
    telegram.users_meet(i for i in USERS if i not in NEVER_STARTED)
    assert "1000 created" in import_csv(tmp_path, USERS).replace(",", "")
    assert not TelegramUser.objects.filter(access_hash__isnull=False).exists()

    broadcast = BroadcastFactory(title="Moving in", text="We moved: same bot, new home")
    assert broadcast_start(broadcast=broadcast) == 1000
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    for user_id in USERS:
        texts = [m.text for m in telegram.bot_messages(user_id)]
        assert texts == ([] if user_id in NEVER_STARTED else ["We moved: same bot, new home"]), user_id
    broadcast.refresh_from_db()
    assert (broadcast.status, broadcast.total, broadcast.sent, broadcast.not_users, broadcast.failed) == (
        "done", 1000, 990, 10, 0,
    )  # fmt: skip
    refused = BroadcastDelivery.objects.filter(broadcast=broadcast).exclude(status="sent")
    assert {d.user.telegram_id for d in refused} == NEVER_STARTED
    assert {d.status for d in refused} == {"not_user"}
    assert all("PEER_ID_INVALID" in d.error for d in refused)  # as Telegram answered
    # Nothing else changes: every user stays as they were (a refusal of PEER_ID_INVALID says
    # nothing of their state), ready for the day they start the bot.
    assert set(TelegramUser.objects.values_list("state", flat=True)) == {"active"}


@pytest.mark.django_db(transaction=True)
def test_an_imported_user_who_blocked_the_bot_is_marked_blocked_and_the_others_get_it(tmp_path, telegram, gateway):
    telegram.users_meet([601, 602, 603])
    telegram.block(602)
    telegram.deactivate(603)
    import_csv(tmp_path, [601, 602, 603, 604])  # 604 never started the bot

    broadcast = BroadcastFactory(title="Hello", text="Hello again")
    broadcast_start(broadcast=broadcast)
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert [m.text for m in telegram.bot_messages(601)] == ["Hello again"]
    states = dict(TelegramUser.objects.values_list("telegram_id", "state"))
    assert states == {601: "active", 602: "blocked", 603: "deactivated", 604: "active"}
    statuses = dict(BroadcastDelivery.objects.values_list("user__telegram_id", "status"))
    assert statuses == {601: "sent", 602: "blocked", 603: "blocked", 604: "not_user"}


def never_written(user_id):
    return f"user {user_id} has never written to the bot: no access hash"


@pytest.mark.django_db(transaction=True)
def test_rows_an_earlier_courier_marked_never_written_are_sent_again_once(telegram, gateway):
    telegram.users_meet([701, 702])  # started the old bot; 703 never did
    ann, bob, cy = (TelegramUserFactory(telegram_id=i) for i in (701, 702, 703))
    step = SequenceMessageFactory(user=ann, status="failed", error=never_written(701))
    other_failure = SequenceMessageFactory(user=bob, status="failed", error="MESSAGE_TOO_LONG")
    done = BroadcastFactory(text="Old news", status="done", total=3, sent=0, not_users=3)
    rows = [
        BroadcastDeliveryFactory(broadcast=done, user=u, status="not_user", error=never_written(u.telegram_id))
        for u in (ann, bob, cy)
    ]
    cancelled = BroadcastFactory(status="cancelled", total=1, not_users=1)
    left = BroadcastDeliveryFactory(broadcast=cancelled, user=bob, status="not_user", error=never_written(702))

    out = StringIO()
    call_command("retry_never_written", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "1 sequence steps and 3 broadcast deliveries (of 1 broadcasts) would be sent again"
    assert SequenceMessage.objects.get(pk=step.pk).status == "failed"

    call_command("retry_never_written", stdout=out)
    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert [m.text for m in telegram.bot_messages(701)] == ["Hello", "Old news"]
    assert [m.text for m in telegram.bot_messages(702)] == ["Old news"]
    assert SequenceMessage.objects.get(pk=other_failure.pk).status == "failed"  # not that reason: left
    statuses = dict(BroadcastDelivery.objects.filter(pk__in=[r.pk for r in rows]).values_list("user_id", "status"))
    assert statuses == {ann.pk: "sent", bob.pk: "sent", cy.pk: "not_user"}  # cy: as Telegram answers now
    done.refresh_from_db()
    assert (done.status, done.sent, done.not_users) == ("done", 2, 1)
    assert BroadcastDelivery.objects.get(pk=left.pk).status == "not_user"  # a cancelled broadcast stays so

    out = StringIO()
    call_command("retry_never_written", stdout=out)  # once: nothing says "never written" any more
    assert out.getvalue().strip() == "0 sequence steps and 0 broadcast deliveries (of 0 broadcasts) pending again"


# --- the hash Telegram's answer names (scope 1: "store the hash when Telegram's answer names one") ---


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read and fill the users' rows
def test_an_imported_users_row_gets_the_hash_telegram_named_and_later_sends_carry_it(tmp_path, telegram, gateway):
    hashes = telegram.users_meet([801, 802])  # started the old bot; 803 never did
    import_csv(tmp_path, [801, 802, 803])

    first = BroadcastFactory(title="Moving in", text="We moved")
    broadcast_start(broadcast=first)
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    stored = dict(TelegramUser.objects.values_list("telegram_id", "access_hash"))
    assert stored == {801: hashes[801], 802: hashes[802], 803: None}  # 803: Telegram named no one
    assert telegram.hashes_named(801) == [0]  # the first send went by id alone

    calls = len(telegram.calls)
    second = BroadcastFactory(title="Again", text="Still here")
    broadcast_start(broadcast=second)
    job_run("send_broadcasts", trigger="test", gateway=gateway)  # the same worker: its session has it
    worker = offline_gateway(telegram, name="fresh-worker", peers=user_access_hash)  # a new one: the row has it
    try:
        third = BroadcastFactory(title="Once more", text="And again")
        broadcast_start(broadcast=third)
        job_run("send_broadcasts", trigger="test", gateway=worker)
    finally:
        worker.stop()

    for user_id in (801, 802):
        assert [m.text for m in telegram.bot_messages(user_id)] == ["We moved", "Still here", "And again"]
        assert telegram.hashes_named(user_id, since=calls) == [hashes[user_id]] * 2  # never 0 again
    assert telegram.hashes_named(803, since=calls) == [0, 0]  # still unknown: by id alone, as before


@pytest.mark.django_db(transaction=True)
def test_a_send_through_kurigrams_own_method_also_stores_the_hash_telegram_named(telegram, gateway):
    hashes = telegram.users_meet([811])
    TelegramUserFactory(telegram_id=811, access_hash=None)

    gateway.send_media(811, Media("photo", "https://example.com/cat.jpg"), caption="A cat")  # kurigram's send_photo

    assert TelegramUser.objects.get(telegram_id=811).access_hash == hashes[811]
    calls = len(telegram.calls)
    gateway.send_text(811, "Another")
    assert telegram.hashes_named(811, since=calls) == [hashes[811]]


@pytest.mark.django_db(transaction=True)
def test_a_text_sent_by_id_alone_stores_the_hash_and_the_same_workers_next_text_carries_it(telegram, gateway):
    hashes = telegram.users_meet([812])
    TelegramUserFactory(telegram_id=812, access_hash=None)

    gateway.send_text(812, "First")  # the answer read whole (not only its message id), for its users
    gateway.send_text(812, "Second")  # this worker's session keeps what it learnt

    assert telegram.hashes_named(812) == [0, hashes[812]]
    assert TelegramUser.objects.get(telegram_id=812).access_hash == hashes[812]
    assert [m.text for m in telegram.bot_messages(812)] == ["First", "Second"]


@pytest.mark.django_db
def test_a_learnt_hash_fills_only_rows_without_one_in_one_query(django_assert_num_queries):
    TelegramUserFactory(telegram_id=821, access_hash=None)
    TelegramUserFactory(telegram_id=822, access_hash=5)  # runbot stored it from the user's update

    with django_assert_num_queries(1):
        assert user_access_hashes_fill({821: 11, 822: 12, 823: 13}) == 1  # 823: no row
    with django_assert_num_queries(0):
        assert user_access_hashes_fill({}) == 0

    assert dict(TelegramUser.objects.values_list("telegram_id", "access_hash")) == {821: 11, 822: 5}
