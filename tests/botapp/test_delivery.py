"""File delivery by deep link, as the Telegram user experiences it."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botapp import clock
from botapp.bot.router import SORRY
from botapp.models import BotSettings, ClaimStatus, DailyStat, PendingDeletion, StoredFile, TelegramUser
from botapp.services.autodelete import DELIVERY_GRACE
from botapp.services.files import file_store
from botapp.services.stats import counters_flush
from botapp.telegram.gateway import TgUser
from inmemory_telegram.state import Media
from scheduler.jobs.deletions import DeletionSweep
from scheduler.jobs.registry import job_run
from scheduler.jobs.sweep import Sweep
from tests.conftest import STORAGE
from tests.factories import PendingDeletionFactory

pytestmark = pytest.mark.django_db


def copies(events):
    return [e for e in events if e.action == "copy"]


@pytest.fixture
def asks(telegram, bot):
    """asks(user, text): the user sends it, and the test waits until runbot's client has parsed
    the update (and stored the user's access hash), not handled it: the test drives the router by
    hand. Without the wait the router sometimes met the user before its client did (PeerUnknown)."""

    def ask(user, text: str) -> int:
        asked = telegram.user_sends(user, text)
        bot.pump.pending.get(timeout=5)
        return asked

    return ask


def test_single_file_is_copied_with_a_deletion_warning_and_a_durable_deletion(chat, alice, conf, telegram):
    doc = telegram.post(STORAGE, "Only this", media=Media("video", "clip.mp4"))
    single = file_store(source_chat_id=STORAGE, message_ids=[doc])

    events = chat(alice, f"/start {single.share_id}")

    assert [(e.action, e.media, e.text) for e in events] == [
        ("copy", Media("video", "clip.mp4"), "Only this"),
        ("send", None, "⏳ These files will be deleted in 30 min. Save them somewhere else if you want to keep them."),
    ]
    row = PendingDeletion.objects.get()
    assert row.chat_id == alice.id
    assert row.message_ids == [events[0].message_ids[0], events[1].message_ids[0]]
    assert row.share_id == single.share_id
    assert abs((row.delete_at - clock.now()) - timedelta(minutes=30)) < timedelta(seconds=5)
    counters_flush()  # the counts wait as counter entries until the next flush
    single.refresh_from_db()
    assert single.delivery_count == 1 and single.last_delivered_at is not None
    assert DailyStat.objects.get().deliveries == 1


def test_batch_is_delivered_in_order(chat, alice, conf, stored):
    events = copies(chat(alice, f"/start {stored.share_id}"))
    assert [e.text for e in events] == ["Report", "Read me"]
    assert events[0].media == Media("document", "report.pdf")


def test_caption_and_protection_come_from_settings(chat, alice, conf, stored, telegram):
    conf.file_caption = "From Courier"
    conf.protect_content = True
    conf.auto_delete_minutes = 0
    conf.save()

    events = chat(alice, f"/start {stored.share_id}")

    assert [e.text for e in events] == ["From Courier", "Read me"]  # a text message has no caption to replace
    assert all(telegram.message(alice.id, e.message_ids[0]).protect for e in events)
    assert not PendingDeletion.objects.exists()


@pytest.mark.parametrize(
    "payload,reply",
    [
        ("lgNoSuchFile1234", "This link does not exist or its files were removed."),  # shaped like a legacy share id
        ("bad$chars!", "This link is not valid. Please check that you copied all of it."),
        ("x" * 65, "This link is not valid. Please check that you copied all of it."),
        ("a b c", "This link is not valid. Please check that you copied all of it."),
    ],
)
def test_bad_links_get_a_friendly_reply(chat, alice, conf, payload, reply):
    events = chat(alice, f"/start {payload}")
    assert [e.text for e in events] == [reply]


def test_a_file_whose_storage_message_is_gone(chat, alice, conf):
    gone = file_store(source_chat_id=STORAGE, message_ids=[999])
    assert [e.text for e in chat(alice, f"/start {gone.share_id}")] == ["Sorry, these files are no longer available."]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.text(max_size=120))
def test_fuzzed_start_payloads_always_get_a_reply_and_never_fail(chat, conf, payload):
    user = TgUser(id=4242, first_name="Fuzz")
    events = chat(user, f"/start {payload}")
    assert events, "no reply"
    assert all(e.text != SORRY for e in events), "the handler raised"


def test_get_files_again_after_auto_delete(chat, alice, conf, stored, telegram, gateway):
    chat(alice, f"/start {stored.share_id}")
    clock.clock_advance(timedelta(minutes=31))
    from scheduler.jobs.registry import job_run

    job_run("delete_due_messages", trigger="test", gateway=gateway)
    notice = telegram.bot_messages(alice.id)[-1]
    assert notice.text == "Previous message was deleted."
    assert [[b.text for b in row] for row in notice.buttons] == [["♻️ Get files again", "❌ Close"]]

    events = chat.tap(alice, "♻️ Get files again")
    assert [e.text for e in copies(events)] == ["Report", "Read me"]
    counters_flush()
    assert StoredFile.objects.get(pk=stored.pk).delivery_count == 2

    chat.tap(alice, "❌ Close")
    assert telegram.message(alice.id, notice.id).deleted


def test_the_get_again_buttons_label_is_a_bot_setting(chat, alice, conf, stored, telegram, gateway, admin_client, plain_http):
    """Seed 000's notice says "♻️ Click Here": an operator moving in keeps their label."""
    url = reverse("admin:botapp_botsettings_change", args=[conf.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    too_long = admin_client.post(url, data | {"again_button_text": "🔁" * 40}).context["adminform"].form.errors
    assert too_long["again_button_text"][0].startswith("Button text is at most 64 characters")
    assert admin_client.post(url, data | {"again_button_text": "♻️ Click Here"}).status_code == 302
    chat(alice, f"/start {stored.share_id}")
    clock.clock_advance(timedelta(minutes=31))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    notice = telegram.bot_messages(alice.id)[-1]
    assert [[b.text for b in row] for row in notice.buttons] == [["♻️ Click Here", "❌ Close"]]
    assert [e.text for e in copies(chat.tap(alice, "♻️ Click Here"))] == ["Report", "Read me"]


def test_verified_user_start_runs_a_constant_number_of_queries(chat, conf, telegram):
    conf.verification_enabled = True
    conf.save()
    user = TgUser(id=3030, first_name="Vera")
    chat(user, "/start")
    TelegramUser.objects.filter(telegram_id=user.id).update(verified_until=clock.now() + timedelta(hours=5))
    one = file_store(source_chat_id=STORAGE, message_ids=[telegram.post(STORAGE, "1")])
    many = file_store(source_chat_id=STORAGE, message_ids=[telegram.post(STORAGE, str(i)) for i in range(20)])

    chat(user, f"/start {one.share_id}")  # the day's first delivery also creates the day's stats row

    counts = []
    for stored in (one, many, one):
        with CaptureQueriesContext(connection) as ctx:
            events = chat(user, f"/start {stored.share_id}")
        assert copies(events)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] == counts[2], counts
    assert counts[0] <= 8, "\n".join(q["sql"] for q in ctx.captured_queries)


def test_auto_delete_survives_a_restart(alice, conf, stored, telegram, chat, bot, gateway):
    """Deliver through runbot, stop it, delete from a worker: only the database row carries over."""
    chat(alice, f"/start {stored.share_id}")
    delivered = [m.id for m in telegram.bot_messages(alice.id)]
    bot.stop()

    clock.clock_advance(timedelta(minutes=29))
    job = DeletionSweep(gateway)
    assert Sweep(job).run() == (0, 0, 0)  # not due yet

    clock.clock_advance(timedelta(minutes=2))
    job = DeletionSweep(gateway)  # "after the restart": new objects, same database, same Telegram
    assert Sweep(job).run() == (1, 0, 1)
    assert all(telegram.message(alice.id, i).deleted for i in delivered)
    assert not PendingDeletion.objects.exists()


# --- intent before effect ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # a trigger refuses the write, as a database going away would
def test_a_delivery_whose_ids_cannot_be_written_is_deleted_at_once_and_the_user_asked_to_try_again(
    chat, alice, conf, stored, telegram
):
    """No copy stays in a chat without a row that deletes it: the pending deletion is written
    before the copy; when its ids cannot be written after it, the copies go at once."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION courier_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'database gone'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER courier_test_refuse BEFORE UPDATE OF message_ids ON botapp_pendingdeletion "
            "FOR EACH ROW EXECUTE FUNCTION courier_test_refuse()"
        )
    try:
        events = chat(alice, f"/start {stored.share_id}")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER courier_test_refuse ON botapp_pendingdeletion")
            cursor.execute("DROP FUNCTION courier_test_refuse()")
    copied = [i for e in events if e.action in ("copy", "send") and e.text != SORRY for i in e.message_ids]
    assert len(copied) == 3  # the two files and the "deleted in 30 min" warning went out...
    assert telegram.live(copied) == []  # ...and were deleted at once
    assert [e.text for e in events if e.action == "send"][-1] == SORRY  # the user is asked to try again


def test_the_pending_deletion_exists_before_the_copy(chat, alice, conf, stored, telegram, monkeypatch):
    from botapp.telegram import pyrogram_gateway

    rows_at_copy = []
    copy = pyrogram_gateway.PyrogramGateway.copy_messages

    def copy_messages(self, *args, **kwargs):
        rows_at_copy.append(list(PendingDeletion.objects.values_list("chat_id", "message_ids")))
        return copy(self, *args, **kwargs)

    monkeypatch.setattr(pyrogram_gateway.PyrogramGateway, "copy_messages", copy_messages)
    chat(alice, f"/start {stored.share_id}")
    assert rows_at_copy == [[(alice.id, [])]]  # written, its ids not known yet
    assert len(PendingDeletion.objects.get().message_ids) == 3


def test_a_copy_telegram_refused_leaves_no_pending_deletion(chat, alice, conf, stored, telegram):
    for message_id in stored.message_ids:
        telegram.delete_post(STORAGE, message_id)
    chat(alice, f"/start {stored.share_id}")
    assert PendingDeletion.objects.count() == 0


class Killed(BaseException):
    """runbot killed -9 at this point: nothing of ours runs on (not an Exception: no handler catches it)."""


def delivered_then_killed(router, monkeypatch, user, stored, *, asked: int, key: str):
    """runbot answers `/start <file>` (the user's message `asked`) and is killed after Telegram
    took the copies, before their ids were written."""
    from botapp.services import delivery, users

    def killed(**kwargs):
        raise Killed

    monkeypatch.setattr(delivery, "deletion_delivered", killed)
    member, _ = users.user_seen(tg=user)
    with pytest.raises(Killed):
        router.delivery(member, user.id, BotSettings.load(), update_key=key, after_id=asked).request(stored.share_id)
    monkeypatch.undo()
    return member


def test_runbot_killed_before_writing_the_ids_finds_the_copies_when_the_update_comes_again(
    asks, router, alice, conf, stored, telegram, gateway, monkeypatch
):
    """Killed between Telegram's answer and writing the copies' ids: after the restart the update
    is handled again (its claim unfinished). The same row is found, the copies are refused as
    repeats of their random_ids (never a second copy), the messages the first attempt sent are
    found by reading the bot's messages back, and they are deleted on time."""
    asked = asks(alice, f"/start {stored.share_id}")
    key = f"m{alice.id}.{asked}"
    member = delivered_then_killed(router, monkeypatch, alice, stored, asked=asked, key=key)
    first = [m.id for m in telegram.bot_messages(alice.id)]
    assert len(first) == 3  # two files and the "deleted in 30 min" warning, their ids never written
    assert PendingDeletion.objects.get().status == ClaimStatus.DELIVERING

    router.delivery(member, alice.id, BotSettings.load(), update_key=key, after_id=asked).request(stored.share_id)

    assert [m.id for m in telegram.bot_messages(alice.id)] == first  # nothing sent twice
    row = PendingDeletion.objects.get()  # the same row, not a second one
    assert (row.status, sorted(row.message_ids)) == (ClaimStatus.PENDING, first)
    clock.clock_advance(timedelta(minutes=31))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert telegram.live(first) == []


def test_an_update_handled_again_whose_earlier_copies_are_gone_keeps_no_empty_deletion(
    asks, router, alice, conf, stored, telegram, gateway, monkeypatch
):
    """The earlier attempt's copies were deleted meanwhile (by the user): nothing is found, and no
    row is kept that would tell the user files were deleted when none are left to delete."""
    asked = asks(alice, f"/start {stored.share_id}")
    key = f"m{alice.id}.{asked}"
    member = delivered_then_killed(router, monkeypatch, alice, stored, asked=asked, key=key)
    router.gateway.delete_messages(alice.id, [m.id for m in telegram.bot_messages(alice.id)])

    router.delivery(member, alice.id, BotSettings.load(), update_key=key, after_id=asked).request(stored.share_id)

    assert telegram.bot_messages(alice.id) == []  # nothing sent again
    assert not PendingDeletion.objects.exists()


def test_an_update_handled_again_after_its_delivery_was_recorded_sends_nothing(asks, router, alice, conf, stored, telegram):
    from botapp.services import users

    asked = asks(alice, f"/start {stored.share_id}")
    member, _ = users.user_seen(tg=alice)
    for _ in range(2):  # killed after the delivery was recorded, before the update's claim was finished
        router.delivery(member, alice.id, conf, update_key=f"m{alice.id}.{asked}", after_id=asked).request(stored.share_id)
    assert len(telegram.bot_messages(alice.id)) == 3
    assert PendingDeletion.objects.get().status == ClaimStatus.PENDING


def test_a_cut_off_delivery_whose_update_never_came_back_is_found_by_the_sweep(
    asks, router, alice, conf, stored, telegram, gateway, monkeypatch
):
    """No replay (the update's answer lost for good): DELIVERY_GRACE after its row, the deletion
    sweep looks for the copies itself, and deletes them when due; the user's other messages from
    the bot in between (a later "Sorry") are left alone."""
    asked = asks(alice, f"/start {stored.share_id}")
    delivered_then_killed(router, monkeypatch, alice, stored, asked=asked, key=f"m{alice.id}.{asked}")
    copies_sent = [m.id for m in telegram.bot_messages(alice.id)]
    other = router.gateway.send_text(alice.id, SORRY).message_id
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert PendingDeletion.objects.get().status == ClaimStatus.DELIVERING  # within the grace: runbot may be on it

    clock.clock_advance(DELIVERY_GRACE + timedelta(seconds=1))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    row = PendingDeletion.objects.get()
    assert (row.status, sorted(row.message_ids)) == (ClaimStatus.PENDING, copies_sent)
    clock.clock_advance(timedelta(minutes=20))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert telegram.live(copies_sent + [other]) == [other]


def test_a_cut_off_delivery_whose_search_telegram_refuses_waits_for_the_next_run(
    asks, router, alice, conf, stored, telegram, gateway, monkeypatch
):
    asked = asks(alice, f"/start {stored.share_id}")
    delivered_then_killed(router, monkeypatch, alice, stored, asked=asked, key=f"m{alice.id}.{asked}")
    due = PendingDeletionFactory(chat_id=alice.id, delete_at=clock.now())  # another user's file, due now
    clock.clock_advance(DELIVERY_GRACE + timedelta(seconds=1))
    telegram.fail_next("FLOOD_WAIT_120", methods=["messages.GetMessages"])  # past TELEGRAM_MAX_FLOOD_WAIT: raised
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert not PendingDeletion.objects.filter(pk=due.pk).exists()  # the sweep went on
    assert PendingDeletion.objects.get().status == ClaimStatus.DELIVERING  # looked for again next run
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert PendingDeletion.objects.get().status == ClaimStatus.PENDING


def test_a_cut_off_delivery_that_sent_nothing_is_removed_by_the_sweep(asks, alice, conf, stored, telegram, gateway):
    asked = asks(alice, f"/start {stored.share_id}")
    PendingDeletion.objects.create(
        chat_id=alice.id, message_ids=[], delete_at=clock.now() + timedelta(minutes=30), share_id=stored.share_id,
        status=ClaimStatus.DELIVERING, delivery_key=f"m{alice.id}.{asked}.{stored.pk}", after_id=asked,
    )  # fmt: skip
    clock.clock_advance(DELIVERY_GRACE + timedelta(seconds=1))
    before = len(telegram.events)
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert not PendingDeletion.objects.exists()
    assert [e.action for e in telegram.events[before:]] == []  # nothing deleted, no "deleted" notice


def test_a_cut_off_delivery_with_nothing_to_search_from_is_expired_loudly(alice, telegram, gateway, conf, caplog):
    """A row written before rows had `after_id`: the sweep never takes it while it is
    `delivering` (no notice says anything was deleted), and expires it after the grace, loudly."""
    row = PendingDeletion.objects.create(
        chat_id=alice.id, message_ids=[], delete_at=clock.now(), share_id="x", status=ClaimStatus.DELIVERING
    )
    before = len(telegram.events)
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    assert telegram.events[before:] == []  # nothing deleted, no "deleted" notice
    clock.clock_advance(timedelta(minutes=11))
    job_run("delete_due_messages", trigger="test", gateway=gateway)
    row.refresh_from_db()
    assert row.status == ClaimStatus.EXPIRED
    assert "with nothing to search them from" in caplog.text
