"""PyrogramGateway on the wire: kurigram's real client against the in-memory Telegram, counted
call by call. Each of "Telegram on the wire"'s ten defects has a test here that failed before."""

import time
from datetime import timedelta

import pytest
from pyrogram.session import Session

import inmemory_telegram.state as on_telegram  # what the in-memory Telegram shows, in its own types
from botapp import clock
from botapp.models import PendingDeletion, TelegramUser
from botapp.services.delivery import FILE_RESTRICTED, file_deliver
from botapp.services.files import file_store
from botapp.services.users import user_access_hash
from botapp.telegram.gateway import (
    AlreadySent,
    BadRequest,
    BotUnauthorized,
    Button,
    ChatNotFound,
    CopyIncomplete,
    FloodWait,
    Media,
    MessageNotFound,
    PeerUnknown,
    TgUser,
    UserBlocked,
    UserDeactivated,
)
from botapp.telegram.retry import CALL_TIMEOUT
from inmemory_telegram.faults import LOSE_ANSWER
from offline.telegram.clients import offline_gateway
from tests.botapp.telegram.conftest import CountingLimiter
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db

BOB = TgUser(id=2002, first_name="Bob")


@pytest.fixture
def limited(telegram, met):
    limiter = CountingLimiter()
    gw = offline_gateway(telegram, peers=user_access_hash, limiter=limiter, sleep=lambda s: None)
    gw.counting = limiter
    yield gw
    gw.stop()


def ten_files(telegram):
    return [telegram.post(STORAGE, f"part {i}", media=Media("document", f"part{i}.pdf")) for i in range(10)]


def warm(gateway, telegram, user_id):
    """A process's first use of the storage channel resolves it once (channels.getChannels); every
    count below is of a warm process, as runbot and long-lived workers are."""
    gateway.copy_messages(user_id, STORAGE, [telegram.post(STORAGE, "warm-up")])


def files_in(telegram, chat_id):
    return [m for m in telegram.bot_messages(chat_id) if m.media is not None]


# --- call counts ----------------------------------------------------------------------------------


def test_a_ten_file_link_is_one_call_without_a_caption_and_eleven_with_one(telegram, gateway, met):
    ids = ten_files(telegram)
    warm(gateway, telegram, met.id)
    start = len(telegram.calls)
    sent = gateway.copy_messages(met.id, STORAGE, ids)
    assert len(sent) == 10
    assert telegram.methods_called(start) == ["messages.ForwardMessages"]

    start = len(telegram.calls)
    sent = gateway.copy_messages(met.id, STORAGE, ids, caption="From Courier")
    assert len(sent) == 10
    assert telegram.methods_called(start) == ["channels.GetMessages"] + ["messages.SendMedia"] * 10
    assert [telegram.message(met.id, s.message_id).text for s in sent] == ["From Courier"] * 10


def test_deleting_250_messages_is_three_calls(telegram, gateway, met):
    ids = [gateway.send_text(met.id, f"m{i}").message_id for i in range(250)]
    start = len(telegram.calls)
    assert gateway.delete_messages(met.id, ids) == 250
    assert telegram.methods_called(start) == ["messages.DeleteMessages"] * 3
    assert all(telegram.message(met.id, i).deleted for i in ids)


def test_a_worker_sends_to_a_user_runbot_has_seen_in_one_call_without_resolving_them(telegram, met):
    worker = offline_gateway(telegram, peers=user_access_hash)  # a fresh worker process: empty peer cache
    try:
        start = len(telegram.calls)
        worker.send_text(met.id, "News")
        assert telegram.methods_called(start) == ["messages.SendMessage"]
    finally:
        worker.stop()
    assert TelegramUser.objects.get(telegram_id=met.id).access_hash == telegram.users[met.id].access_hash


def test_a_fresh_workers_first_send_looks_in_its_client_then_the_database_in_one_slot(telegram, met):
    """The client's storage is asked on the loop in the send's own hop; when it does not have the
    user, the stored access hash goes with the same limiter slot (nothing reached Telegram)."""
    limiter = CountingLimiter()
    worker = offline_gateway(telegram, peers=user_access_hash, limiter=limiter, sleep=lambda s: None)
    try:
        start = len(telegram.calls)
        worker.send_text(met.id, "News")
        worker.send_text(met.id, "More")  # now kurigram has the user: no lookup at all
        assert telegram.methods_called(start) == ["messages.SendMessage"] * 2
        assert limiter.slots == [met.id, met.id]
    finally:
        worker.stop()


# --- 1. one limiter slot per call; a FloodWait partway never re-sends ------------------------------


def test_every_call_of_a_caption_copy_takes_its_own_limiter_slot(telegram, limited, met):
    ids = ten_files(telegram)
    warm(limited, telegram, met.id)
    limited.counting.slots.clear()
    start = len(telegram.calls)
    limited.copy_messages(met.id, STORAGE, ids, caption="c")
    assert len(limited.counting.slots) == len(telegram.calls) - start == 11
    assert limited.counting.slots.count(met.id) == 10  # the sends are paced per chat; the fetch is not a message


def test_a_flood_wait_partway_retries_that_call_only(telegram, limited, met):
    ids = ten_files(telegram)
    telegram.fail_next("FLOOD_WAIT_7", methods={"messages.SendMedia"}, after=5)
    sent = limited.copy_messages(met.id, STORAGE, ids, caption="c")

    assert len(sent) == 10
    assert telegram.count("messages.SendMedia") == 11  # ten copies and the one refused, not 16
    assert len(files_in(telegram, met.id)) == 10
    assert limited.counting.pauses == [7]  # every sender paused


def test_a_copy_that_stops_partway_reports_what_arrived_and_the_user_gets_it_deleted(telegram, gateway, met, conf):
    ids = ten_files(telegram)
    stored = file_store(source_chat_id=STORAGE, message_ids=ids)
    conf.file_caption = "c"
    conf.save()
    telegram.fail_next("FLOOD_WAIT_600", methods={"messages.SendMedia"}, after=4)

    with pytest.raises(CopyIncomplete) as stopped:
        gateway.copy_messages(met.id, STORAGE, ids, caption="c")
    assert len(stopped.value.sent) == 4

    telegram.fail_next("FLOOD_WAIT_600", methods={"messages.SendMedia"}, after=4)
    file_deliver(gateway=gateway, chat_id=met.id, stored=stored, conf=conf)
    row = PendingDeletion.objects.get()
    delivered = [m.id for m in telegram.bot_messages(met.id)][-5:]  # four files and the notice
    assert row.message_ids == delivered
    assert telegram.bot_messages(met.id)[-1].text.startswith("Only 4 of these files could be sent just now.")


# --- 2. deleted and service messages inside a range ----------------------------------------------------


@pytest.mark.parametrize("caption", [None, "From Courier"])
def test_a_range_with_a_deleted_and_a_service_message_delivers_the_rest(telegram, gateway, met, caption):
    ids = [telegram.post(STORAGE, "one"), telegram.post(STORAGE, "two"), telegram.post(STORAGE, service=True)]
    ids.append(telegram.post(STORAGE, "four", media=Media("photo", "four.jpg")))
    telegram.delete_post(STORAGE, ids[1])

    sent = gateway.copy_messages(met.id, STORAGE, ids, caption=caption)

    texts = [telegram.message(met.id, s.message_id).text for s in sent]
    assert texts == ["one", caption or "four"]


def test_a_range_with_nothing_left_is_message_not_found(telegram, gateway, met):
    gone = telegram.post(STORAGE, "gone")
    telegram.delete_post(STORAGE, gone)
    with pytest.raises(MessageNotFound):
        gateway.copy_messages(met.id, STORAGE, [gone])


# --- 3. paid broadcasts carry the flag --------------------------------------------------------------------


def test_paid_sends_carry_the_flag_and_go_past_thirty_per_second(telegram, chat, rate_clock):
    users = [TgUser(id=5000 + i, first_name="U") for i in range(40)]
    for user in users:
        chat(user, "/help")
    telegram.enforce_rates = True
    paid = offline_gateway(telegram, peers=user_access_hash, paid=True)
    free = offline_gateway(telegram, peers=user_access_hash)
    try:
        for user in users:
            paid.send_text(user.id, "paid")
        assert telegram.flood_waits == 0
        assert all(telegram.bot_messages(u.id)[-1].paid for u in users)

        rate_clock.advance(1.1)  # the free budget is not what the paid sends used
        with pytest.raises(FloodWait):
            for user in users:
                free.send_text(user.id, "free")
    finally:
        paid.stop()
        free.stop()


# --- 4. peers: never a hidden resolution call ------------------------------------------------------------


def imported(telegram, user_id, *, started=True):
    """A user imported from another bot: no access hash stored. `started`: they started the bot
    before, under the old bot (a private chat with it exists on Telegram)."""
    if started:
        telegram.users_meet([user_id])  # their hash stays Telegram's: Courier never saw an update
    TelegramUser.objects.create(telegram_id=user_id, first_name="Imported")


def test_a_user_with_no_stored_hash_is_addressed_by_id_alone_in_one_call(telegram, gateway, db):
    imported(telegram, 3003)
    start = len(telegram.calls)
    sent = gateway.send_text(3003, "hi", key="k1")
    assert telegram.methods_called(start) == ["messages.SendMessage"]  # no users.getUsers first
    assert telegram.message(3003, sent.message_id).text == "hi"


def test_every_call_that_names_a_user_reaches_one_with_no_stored_hash(telegram, gateway, db):
    imported(telegram, 3003)
    posts = [telegram.post(STORAGE, f"part {i}", media=Media("document", f"p{i}.pdf")) for i in range(2)]
    photo, video = telegram.file_id("photo"), telegram.file_id("video")

    forwarded = gateway.copy_messages(3003, STORAGE, posts, key="fw")
    copied = gateway.copy_messages(3003, STORAGE, posts[:1], caption="new", key="cp")
    media = gateway.send_media(3003, Media("photo", photo), caption="a photo", key="md")
    album = gateway.send_album(3003, [Media("photo", photo), Media("video", video)], key="al")
    text = gateway.send_text(3003, "to edit")
    gateway.edit_text(3003, text.message_id, "edited")

    assert len(forwarded) == 2 and len(copied) == 1 and len(album) == 2
    assert telegram.message(3003, copied[0].message_id).text == "new"
    assert telegram.message(3003, media.message_id).text == "a photo"
    assert telegram.message(3003, text.message_id).text == "edited"
    ids = [s.message_id for s in [*forwarded, *copied, media, *album, text]]
    assert gateway.delete_messages(3003, ids) == len(ids)
    assert [m for m in telegram.bot_messages(3003) if not m.deleted] == []


def test_telegram_refusing_a_user_addressed_by_id_is_said_as_telegram_said_it(telegram, gateway, db):
    imported(telegram, 3003, started=False)  # never started the bot
    imported(telegram, 3004)
    telegram.block(3004)
    imported(telegram, 3005)
    telegram.deactivate(3005)

    start = len(telegram.calls)
    with pytest.raises(PeerUnknown, match="PEER_ID_INVALID"):
        gateway.send_text(3003, "hi")
    assert telegram.methods_called(start) == ["messages.SendMessage"]  # asked once, not resolved
    with pytest.raises(UserBlocked):
        gateway.send_text(3004, "hi")
    with pytest.raises(UserDeactivated):
        gateway.send_text(3005, "hi")
    assert [telegram.bot_messages(u) for u in (3003, 3004, 3005)] == [[], [], []]


# --- 5. nothing kurigram raises escapes as a non-domain error ------------------------------------------


def test_malformed_and_mismatched_file_ids_are_bad_requests(telegram, gateway, met):
    with pytest.raises(BadRequest):
        gateway.send_media(met.id, Media("photo", "not-a-file-id"))
    with pytest.raises(BadRequest):
        gateway.send_media(met.id, Media("document", telegram.file_id("photo", "cat.jpg")))  # a photo's id as a document
    sent = gateway.send_media(met.id, Media("document", telegram.file_id("document", "a.pdf")))
    assert telegram.message(met.id, sent.message_id).media == on_telegram.Media("document", "a.pdf")


def test_a_local_path_is_never_uploaded_as_media(telegram, gateway, met, tmp_path):
    """kurigram's send_document uploads a string naming a local file: media that came from an API
    caller or an operator must not make the worker send its own files."""
    secret = tmp_path / "secret.env"
    secret.write_text("SECRET_KEY=do-not-send")
    start, before = len(telegram.calls), len(telegram.bot_messages(met.id))
    with pytest.raises(BadRequest, match="media refused before sending"):
        gateway.send_media(met.id, Media("document", str(secret)))
    assert telegram.methods_called(start) == []  # nothing uploaded, nothing sent
    assert len(telegram.bot_messages(met.id)) == before


def test_chat_id_zero_is_refused_as_telegram_would_before_any_call(telegram, gateway):
    calls = len(telegram.calls)
    with pytest.raises(ChatNotFound, match="PEER_ID_INVALID"):
        gateway.send_text(0, "hi")
    assert len(telegram.calls) == calls


# --- 6. a 401 is about the bot, not the user ------------------------------------------------------------


def test_a_revoked_token_is_bot_unauthorized_and_marks_no_user(telegram, gateway, met, chat):
    telegram.revoke_token()
    with pytest.raises(BotUnauthorized):
        gateway.send_text(met.id, "hi")
    chat(met, "/help")  # runbot cannot answer, and blames nobody
    assert TelegramUser.objects.get(telegram_id=met.id).state == TelegramUser.State.ACTIVE


def test_a_revoked_token_stops_a_sweep_and_shows_on_the_jobs_page(telegram, gateway, met):
    from scheduler.jobs.registry import job_run
    from scheduler.models import JobRun

    PendingDeletion.objects.create(chat_id=met.id, message_ids=[1], delete_at=clock.now() - timedelta(minutes=1))
    telegram.revoke_token()
    with pytest.raises(BotUnauthorized):
        job_run("delete_due_messages", trigger="test", gateway=gateway)
    run = JobRun.objects.get(job="delete_due_messages")
    assert run.status == JobRun.Status.FAILED and "BotUnauthorized" in run.error
    assert TelegramUser.objects.get(telegram_id=met.id).state == TelegramUser.State.ACTIVE


# --- 7. a FloodWait while fetching reaches the limiter ---------------------------------------------------


def test_a_flood_wait_on_the_fetch_is_seen_by_the_limiter_not_slept_inside_kurigram(telegram, limited, met):
    ids = ten_files(telegram)[:2]
    telegram.fail_next("FLOOD_WAIT_30", methods={"channels.GetMessages"})
    began = time.monotonic()
    sent = limited.copy_messages(met.id, STORAGE, ids, caption="c")
    assert len(sent) == 2
    assert limited.counting.pauses == [30]
    assert time.monotonic() - began < 5


# --- 8. an unknown outcome is never sent again ----------------------------------------------------------


def test_courier_outlasts_kurigrams_own_retries():
    assert CALL_TIMEOUT > Session.MAX_RETRIES * (Session.WAIT_TIMEOUT + Session.RETRY_DELAY)


@pytest.mark.slow
def test_a_send_whose_answer_is_lost_is_delivered_once_and_reported_already_sent(telegram, limited, met, monkeypatch):
    """kurigram asks again with the same random_id; Telegram refuses the repeat: it was delivered."""
    monkeypatch.setattr(Session, "WAIT_TIMEOUT", 0.3)
    monkeypatch.setattr(Session, "RETRY_DELAY", 0.05)
    telegram.fail_next(LOSE_ANSWER, methods={"messages.SendMessage"})
    before = len(telegram.bot_messages(met.id))
    with pytest.raises(AlreadySent):
        limited.send_text(met.id, "once")
    assert [m.text for m in telegram.bot_messages(met.id)[before:]] == ["once"]


# --- 9. runbot gets what users sent while it was down ----------------------------------------------------


def test_runbot_answers_messages_sent_while_it_was_down(telegram, db, tmp_path, shortener):
    from botapp.bot.router import Router
    from offline.telegram.clients import MemoryPositions, OfflineBot

    positions = MemoryPositions()  # runbot's stored position, from one run to the next

    def start():
        return OfflineBot(
            telegram,
            lambda gw: Router(gw, admin_ids=frozenset(), storage_channel_id=STORAGE, shortener=shortener),
            peers=user_access_hash,
            workdir=tmp_path,
            positions=positions,
        )

    first = start()
    telegram.user_sends(BOB, "/help")
    first.pump.process()
    first.stop()

    telegram.user_sends(BOB, "/about")  # nobody is listening
    again = start()
    try:
        again.pump.process()
    finally:
        again.stop()
    assert [m.text[:20] for m in telegram.bot_messages(BOB.id)][-1] == "Courier delivers fil"


# --- 10. empty messages and forward-restricted storage -----------------------------------------------------


def test_an_empty_message_is_a_bad_request_not_a_missing_file(gateway, met):
    with pytest.raises(BadRequest):
        gateway.send_text(met.id, " ")


def test_a_storage_channel_that_forbids_forwarding_gets_its_own_answer(telegram, gateway, met, conf):
    restricted = -1009000000001
    telegram.create_channel(restricted, noforwards=True)
    stored = file_store(source_chat_id=restricted, message_ids=[telegram.post(restricted, "secret")])
    file_deliver(gateway=gateway, chat_id=met.id, stored=stored, conf=conf)
    assert telegram.bot_messages(met.id)[-1].text == FILE_RESTRICTED


# --- the rest of the gateway ----------------------------------------------------------------------------


def test_blocked_and_deleted_users(telegram, gateway, met):
    telegram.block(met.id)
    with pytest.raises(UserBlocked):
        gateway.send_text(met.id, "hi")
    telegram.unblock(met.id)
    telegram.deactivate(met.id)
    with pytest.raises(UserDeactivated):
        gateway.send_text(met.id, "hi")


def test_buttons_protection_and_edits(telegram, gateway, met):
    sent = gateway.send_text(
        met.id,
        "<b>Pick</b>",
        buttons=[[Button("Site", url="https://example.com"), Button("Close", callback_data="close")]],
        protect=True,
    )
    msg = telegram.message(met.id, sent.message_id)
    assert msg.text == "Pick" and msg.protect
    seen = (on_telegram.Button("Site", url="https://example.com"), on_telegram.Button("Close", callback_data="close"))
    assert msg.buttons == (seen,)
    gateway.edit_text(met.id, sent.message_id, "Picked")
    gateway.edit_text(met.id, sent.message_id, "Picked")  # tapped twice: not an error
    assert telegram.message(met.id, sent.message_id).text == "Picked"


def test_bots_cannot_delete_after_48_hours(telegram, gateway, met):
    old = gateway.send_text(met.id, "old").message_id
    clock.clock_advance(timedelta(hours=49))
    new = gateway.send_text(met.id, "new").message_id
    assert gateway.delete_messages(met.id, [old, new]) == 1
    assert not telegram.message(met.id, old).deleted


def test_membership(telegram, gateway, met):
    channel = -1002000000002
    telegram.create_channel(channel, members=[met.id])
    assert gateway.is_member(channel, met.id)
    telegram.leave(channel, met.id)
    assert not gateway.is_member(channel, met.id)


def test_calling_from_the_loop_itself_is_refused(gateway, met):
    import asyncio

    async def inside():
        gateway.send_text(met.id, "hi")

    with pytest.raises(RuntimeError, match="synchronous"):
        asyncio.run_coroutine_threadsafe(inside(), gateway.loop).result(timeout=5)


def test_messages_existing_reads_up_to_100_ids_in_one_paced_call(telegram, limited):
    ids = [telegram.post(STORAGE, f"post {i}") for i in range(4)]
    telegram.delete_post(STORAGE, ids[1])
    limited.messages_existing(STORAGE, [ids[0]])  # warm: the storage channel resolved once
    start, slots = len(telegram.calls), len(limited.counting.slots)

    assert limited.messages_existing(STORAGE, [ids[3], ids[1], ids[0], ids[3] + 50]) == [ids[3], ids[0]]
    assert telegram.methods_called(start) == ["channels.GetMessages"]
    assert len(limited.counting.slots) == slots + 1  # through the limiter, as every call
    with pytest.raises(ValueError):
        limited.messages_existing(STORAGE, range(1, 102))
    telegram.remove_bot(STORAGE)
    with pytest.raises(ChatNotFound):
        limited.messages_existing(STORAGE, ids)
