"""The in-memory Telegram keeps Telegram's rules, seen through kurigram's real client."""

import pytest
from django.conf import settings
from pyrogram import raw

from botapp.telegram.gateway import BadRequest, BotUnauthorized, Button, ChatNotFound, FloodWait, TgUser, UserBlocked
from botapp.telegram.request import on_loop
from offline.telegram.clients import offline_gateway
from offline.telegram.remote import RemoteTelegram
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db

ANN, BEN = TgUser(id=1001, first_name="Ann"), TgUser(id=1002, first_name="Ben")


@pytest.fixture
def raw_gateway(telegram):
    """A client that resolves users like an unpatched bot would (users.getUsers with hash 0)."""
    for user in (ANN, BEN):
        telegram.user_sends(user, "/start")
    gw = offline_gateway(telegram, peers=lambda uid: telegram.users[uid].access_hash if uid in telegram.users else None)
    yield gw
    gw.stop()


def test_private_chat_message_ids_are_one_sequence_for_all_chats(telegram, raw_gateway):
    a = raw_gateway.send_text(ANN.id, "a").message_id
    b = raw_gateway.send_text(BEN.id, "b").message_id
    c = raw_gateway.send_text(ANN.id, "c").message_id
    assert a < b < c and len({a, b, c}) == 3


def test_channels_count_their_own_ids(telegram):
    channel = -1003000000003
    telegram.create_channel(channel)
    assert [telegram.post(channel, "x"), telegram.post(channel, "y")] == [1, 2]


def test_thirty_in_any_second_pass_and_the_thirty_first_is_a_flood_wait(telegram, rate_clock):
    """The overall limit counts any one-second span when requests arrive: thirty at the same
    instant pass, a thirty-first within the second is refused, and nothing goes until the wait
    told is over."""
    from inmemory_telegram.faults import RpcFault

    start = rate_clock.now
    telegram.enforce_rates = True
    for i in range(30):
        telegram.check_rate(7000 + i, paid=False)
    rate_clock.now = start + 0.99
    with pytest.raises(RpcFault, match="FLOOD_WAIT_1"):
        telegram.check_rate(8000, paid=False)
    rate_clock.now = start + 1.5  # the first thirty have left the window, but the wait runs
    with pytest.raises(RpcFault, match="FLOOD_WAIT_1"):
        telegram.check_rate(8001, paid=False)
    rate_clock.now = start + 1.99
    telegram.check_rate(8002, paid=False)
    assert telegram.flood_waits == 2


def test_evenly_paced_at_thirty_a_second_never_floods_and_bunching_does(telegram, rate_clock):
    from inmemory_telegram.faults import RpcFault

    start = rate_clock.now
    telegram.enforce_rates = True
    for i in range(90):  # three seconds, each send to another chat
        rate_clock.now = start + i / 30
        telegram.check_rate(7000 + i, paid=False)
    rate_clock.now = start + 89 / 30 + 0.01  # one early: 31 in the last second
    with pytest.raises(RpcFault):
        telegram.check_rate(8000, paid=False)


def test_requests_count_when_they_arrived_not_when_the_server_got_to_them(telegram):
    """A client's request arrives when it was written plus the network's delay, and the server's
    process may answer it later (its loop or carrier thread waited for the CPU): the rates count
    the arrival. Sends that arrived evenly at 29/s, all answered only now, pass; the same number
    answered as they arrive in one instant (no arrival known: a client in this process) do not."""
    import time

    from inmemory_telegram.faults import RpcFault

    telegram.enforce_rates = True
    start = time.monotonic() - 5.0
    for i in range(87):  # three seconds' worth, answered seconds late, at once
        with telegram.arriving(start + i / 29):
            telegram.check_rate(7000 + i, paid=False)
    assert telegram.flood_waits == 0
    for i in range(30):
        telegram.check_rate(8000 + i, paid=False)
    with pytest.raises(RpcFault, match="FLOOD_WAIT"):
        telegram.check_rate(8030, paid=False)


def test_a_request_answered_after_a_later_one_counts_no_earlier(telegram):
    """runbot's and a worker's requests can be answered out of their arrival order by a few
    milliseconds: each counts no earlier than the last one counted (the windows count in order)."""
    import time

    telegram.enforce_rates = True
    later = time.monotonic() - 1.0
    with telegram.arriving(later):
        telegram.check_rate(7001, paid=False)
    with telegram.arriving(later - 0.004):
        telegram.check_rate(7002, paid=False)
    counted = [at for at, _ in telegram.rates.overall.entries]
    assert counted == sorted(counted) and counted[-1] == counted[-2] == pytest.approx(later, abs=1e-3)


def test_an_album_counts_each_of_its_messages_and_paid_sends_share_the_overall_budget(telegram, rate_clock):
    from inmemory_telegram.faults import RpcFault

    telegram.enforce_rates = True
    for i in range(3):
        telegram.check_rate(7000 + i, paid=False, messages=10)  # three albums of ten: the free thirty
    with pytest.raises(RpcFault):
        telegram.check_rate(7100, paid=False)
    for i in range(970):  # the paid budget is what is left of 1000, not 1000 more
        telegram.check_rate(9000 + i, paid=True)
    with pytest.raises(RpcFault):
        telegram.check_rate(9999, paid=True)

    telegram.rates_set(count_per_message=False)  # the switch: one per request
    for i in range(3):
        telegram.check_rate(7200 + i, paid=False, messages=10)
    assert telegram.rates.free.total == 3


def test_reads_and_deletes_are_limited_in_the_free_budget(telegram, raw_gateway, rate_clock):
    telegram.enforce_rates = True
    for i in range(30):
        telegram.check_rate(7000 + i, paid=False)
    with pytest.raises(FloodWait):
        raw_gateway.delete_private([(ANN.id, [1])])


def test_flood_waits_grow_on_repeated_excess_and_when_a_client_does_not_wait(telegram, rate_clock):
    from inmemory_telegram.faults import RpcFault

    def seconds(refused):
        return int(refused.value.message.rsplit("_", 1)[1])

    telegram.enforce_rates = True
    waits = []
    for round_ in range(6):  # a full second of sends and one more, each time right after the wait
        for i in range(30):
            telegram.check_rate(7000 + 100 * round_ + i, paid=False)
        with pytest.raises(RpcFault) as refused:
            telegram.check_rate(8000 + round_, paid=False)
        waits.append(seconds(refused))
        rate_clock.advance(waits[-1] + 0.01)
    assert waits == [1, 2, 4, 8, 16, 32]
    assert waits[-1] > settings.TELEGRAM_MAX_FLOOD_WAIT / 2

    for i in range(30):
        telegram.check_rate(9000 + i, paid=False)
    with pytest.raises(RpcFault) as refused:
        telegram.check_rate(9100, paid=False)
    assert seconds(refused) == 64
    rate_clock.advance(0.5)  # on its way when the wait was told: what is left of it
    with pytest.raises(RpcFault) as refused:
        telegram.check_rate(9101, paid=False)
    assert seconds(refused) == 64
    rate_clock.advance(5)  # sent anyway, long after: twice as long
    with pytest.raises(RpcFault) as refused:
        telegram.check_rate(9102, paid=False)
    assert seconds(refused) == 128


def test_sending_as_fast_as_the_client_can_is_a_flood_wait(telegram, raw_gateway):
    users = [TgUser(id=6000 + i, first_name="U") for i in range(31)]  # one more than a second holds
    for user in users:
        telegram.user_sends(user, "/start")
    telegram.enforce_rates = True
    with pytest.raises(FloodWait):
        for user in users:
            raw_gateway.send_text(user.id, "hurried")
    assert telegram.flood_waits == 1


def test_one_private_chat_takes_a_short_burst_then_about_one_a_second(telegram, raw_gateway, rate_clock):
    telegram.enforce_rates = True
    for i in range(3):
        raw_gateway.send_text(ANN.id, f"burst {i}")
    with pytest.raises(FloodWait) as wait:
        raw_gateway.send_text(ANN.id, "one too many")
    assert wait.value.seconds == 1
    rate_clock.advance(0.9)
    with pytest.raises(FloodWait):
        raw_gateway.send_text(ANN.id, "not yet")
    rate_clock.advance(0.1)
    raw_gateway.send_text(ANN.id, "after a second")
    with pytest.raises(FloodWait):
        raw_gateway.send_text(ANN.id, "and not again at once")
    assert [m.text for m in telegram.bot_messages(ANN.id)][-4:] == ["burst 0", "burst 1", "burst 2", "after a second"]


def test_more_than_100_ids_in_one_call_is_refused(telegram, raw_gateway):
    query = raw.functions.messages.DeleteMessages(id=list(range(1, 102)), revoke=True)
    with pytest.raises(BadRequest):
        raw_gateway._run(on_loop(raw_gateway.client.invoke, query))


def test_a_callback_answer_records_toast_or_alert(telegram, gateway, chat):
    chat(ANN, "/start")
    sent = gateway.send_text(ANN.id, "pick", buttons=[[Button("Go", callback_data="go")]])
    query_id = telegram.tap(ANN, sent.message_id, "go")
    gateway.answer_callback(str(query_id), "Not yet", alert=True)
    answer = telegram.events[-1]
    assert (answer.action, answer.chat_id, answer.text, answer.alert) == ("answer", ANN.id, "Not yet", True)


def test_what_each_chat_received_and_which_messages_are_still_there(telegram):
    hashes = telegram.users_meet([2001, 2002, 2003])  # set-up: users who wrote to the bot before
    assert set(hashes) == {2001, 2002, 2003} and hashes[2001] == telegram.users[2001].access_hash
    first, second = telegram.bot_sent([2001, 2002], "Your file")  # delivered earlier: no call, nothing received now
    assert telegram.received() == {} and telegram.calls == []

    gw = offline_gateway(telegram, peers=lambda uid: hashes.get(uid))
    try:
        gw.send_text(2001, "once")
        gw.send_text(2001, "twice")
        gw.send_text(2003, "hi")
        assert gw.delete_messages(2001, [first]) == 1
        later = len(telegram.events)
        gw.send_text(2002, "hi")
    finally:
        gw.stop()
    assert telegram.received() == {2001: 2, 2003: 1, 2002: 1}  # a deletion is not a message received
    assert telegram.received(since=later) == {2002: 1}
    assert telegram.received(text="hi") == {2003: 1, 2002: 1}
    assert telegram.live([first, second, 999]) == [second]


def test_a_revoked_token_is_refused_until_the_new_one_is_in_place(telegram):
    telegram.users_meet([2001])
    gw = offline_gateway(telegram, peers=lambda uid: telegram.users[uid].access_hash)
    try:
        telegram.revoke_token()
        with pytest.raises(BotUnauthorized):
            gw.send_text(2001, "hi")
        telegram.restore_token()
        assert gw.send_text(2001, "hi").message_id
    finally:
        gw.stop()
    assert telegram.received() == {2001: 1}


@pytest.mark.slow
def test_controls_over_the_socket(tmp_path):
    """`manage.py telegram_server` answers RemoteTelegram's controls (the process tests steer)."""
    import tempfile
    from pathlib import Path

    from offline.telegram.remote import server_process

    with tempfile.TemporaryDirectory(prefix="tg") as directory:
        path = Path(directory) / "t.sock"
        with server_process(path, "--channel", str(STORAGE)) as proc:
            remote = RemoteTelegram(path)
            assert remote.post(STORAGE, "hello") == 1
            remote.user_sends(ANN, "/start")
            assert remote.methods_called() == []
            assert set(remote.users_meet([2001, 2002])) == {2001, 2002}
            assert remote.live(remote.bot_sent([2001], "file")) == [2]  # after ANN's message 1
            assert remote.received() == {}
            with pytest.raises(RuntimeError, match="unknown control"):
                remote.call("lock")
            remote.close()
    assert proc.returncode == 0  # stopped cleanly by SIGTERM


def test_pinning_adds_a_service_message_silently_or_not_and_unpinning_adds_none(telegram, raw_gateway):
    from botapp.telegram.gateway import MessageNotFound, UserBlocked

    first = raw_gateway.send_text(ANN.id, "Rules").message_id
    raw_gateway.pin_message(ANN.id, first, silent=True)
    second = raw_gateway.send_text(ANN.id, "News").message_id
    raw_gateway.pin_message(ANN.id, second, silent=False)
    services = [m for m in telegram.messages(ANN.id) if m.service]
    assert [(m.reply_to, m.silent, type(m.action).__name__) for m in services] == [
        (first, True, "MessageActionPinMessage"),
        (second, False, "MessageActionPinMessage"),
    ]
    assert telegram.message(ANN.id, first).pinned and telegram.message(ANN.id, second).pinned

    async def unpin():
        await raw_gateway.client.unpin_chat_message(ANN.id, first)

    raw_gateway._run(on_loop(unpin))
    assert not telegram.message(ANN.id, first).pinned and len([m for m in telegram.messages(ANN.id) if m.service]) == 2

    with pytest.raises(MessageNotFound):
        raw_gateway.pin_message(ANN.id, 9999)
    telegram.block(BEN.id)
    ben = raw_gateway.send_text(ANN.id, "x").message_id
    with pytest.raises(UserBlocked):
        raw_gateway.pin_message(BEN.id, ben)


def test_an_album_keeps_its_group_and_a_reply_names_its_message(telegram, raw_gateway):
    from botapp.telegram.gateway import Media

    ids = telegram.user_sends_album(ANN, [Media("photo", "a.jpg"), Media("video", "b.mp4")], "Two")
    single = telegram.user_sends(ANN, "single")
    reply = telegram.user_sends(ANN, "/broadcast", reply_to=ids[1])
    assert raw_gateway.album_ids(ANN.id, ids[1]) == ids
    assert raw_gateway.album_ids(ANN.id, single) == [single]
    assert telegram.message(ANN.id, reply).reply_to == ids[1]
    copies = raw_gateway.copy_messages(BEN.id, ANN.id, ids)
    groups = {telegram.message(BEN.id, c.message_id).grouped_id for c in copies}
    assert len(groups) == 1 and None not in groups and groups != {telegram.message(ANN.id, ids[0]).grouped_id}


def test_lengths_are_counted_as_telegram_counts_them_in_utf16_units(telegram, raw_gateway):
    """4096 code points of emoji are 8192 UTF-16 units: Telegram refuses them as too long."""
    raw_gateway.send_text(ANN.id, "é" * 4096)  # one unit each: the whole limit
    with pytest.raises(BadRequest, match="MESSAGE_TOO_LONG"):
        raw_gateway.send_text(ANN.id, "😀" * 2049)  # 4098 units
    raw_gateway.send_text(ANN.id, "😀" * 2048)  # 4096 units


# --- what a bot that was down gets back: updates.getDifference ---------------------------------------


def difference(gateway, *, pts, qts=0, date=0, pts_total_limit=None):
    query = raw.functions.updates.GetDifference(pts=pts, qts=qts, date=date, pts_total_limit=pts_total_limit)
    return gateway._run(on_loop(gateway.client.invoke, query))


def test_a_long_difference_comes_in_slices_each_asked_from_where_the_last_ended(telegram, raw_gateway):
    from inmemory_telegram.methods.updates import DIFFERENCE_SLICE

    start = telegram.update_state()
    ids = [telegram.user_sends(TgUser(id=3000 + i, first_name="U"), f"/start {i}") for i in range(2 * DIFFERENCE_SLICE + 50)]
    got, state, slices = [], start, 0
    while True:
        answer = difference(raw_gateway, pts=state["pts"], qts=state["qts"])
        slices += 1
        got += [m.id for m in answer.new_messages]
        if isinstance(answer, raw.types.updates.Difference):
            break
        assert isinstance(answer, raw.types.updates.DifferenceSlice)
        assert len(answer.new_messages) == DIFFERENCE_SLICE
        state = {"pts": answer.intermediate_state.pts, "qts": answer.intermediate_state.qts}
    assert (got, slices) == (ids, 3)  # each message once, in order
    assert answer.state.pts == telegram.update_state()["pts"]
    assert {u.id for u in answer.users} >= {3000 + i for i in range(2 * DIFFERENCE_SLICE, 2 * DIFFERENCE_SLICE + 50)}


def test_the_bots_own_messages_come_back_in_the_difference_as_outgoing(telegram, raw_gateway):
    start = telegram.update_state()
    asked = telegram.user_sends(ANN, "/help")
    reply = raw_gateway.send_text(ANN.id, "a reply").message_id
    gone = raw_gateway.send_text(ANN.id, "deleted since").message_id
    raw_gateway.delete_messages(ANN.id, [gone])

    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"])

    assert isinstance(answer, raw.types.updates.Difference)
    assert [(m.id, m.out, m.message) for m in answer.new_messages] == [(asked, False, "/help"), (reply, True, "a reply")]
    assert ANN.id in {u.id for u in answer.users}  # the chat of an outgoing message is named
    assert answer.state.pts == telegram.update_state()["pts"]
    assert isinstance(difference(raw_gateway, pts=answer.state.pts, qts=start["qts"]), raw.types.updates.DifferenceEmpty)


def test_bot_events_come_back_by_qts_alone(telegram, raw_gateway):
    start = telegram.update_state()
    telegram.block(ANN.id)
    telegram.unblock(ANN.id)
    far = 2**31 - 1  # a date after everything: it narrows nothing
    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"], date=far)
    assert [(u.user_id, u.stopped, u.qts) for u in answer.other_updates] == [
        (ANN.id, True, start["qts"] + 1),
        (ANN.id, False, start["qts"] + 2),
    ]
    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"] + 1)
    assert [u.stopped for u in answer.other_updates] == [False]


def test_a_forwarded_post_in_the_difference_names_its_channel(telegram, raw_gateway):
    start = telegram.update_state()
    post = telegram.post(STORAGE, "stored")
    telegram.user_sends(ANN, forward_from=(STORAGE, post))
    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"])
    assert [c.id for c in answer.chats] == [-1_000_000_000_000 - STORAGE]


def test_updates_are_forgotten_after_a_day_and_a_client_behind_them_told_too_long(telegram, raw_gateway):
    from datetime import timedelta

    from botapp import clock
    from inmemory_telegram.methods.updates import UPDATES_KEPT

    start = telegram.update_state()
    telegram.user_sends(ANN, "/help")
    clock.clock_advance(UPDATES_KEPT + timedelta(minutes=1))
    recent = telegram.update_state()
    telegram.user_sends(BEN, "/help")
    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"])
    assert answer == raw.types.updates.DifferenceTooLong(pts=telegram.update_state()["pts"])
    assert [m.message for m in difference(raw_gateway, pts=recent["pts"], qts=recent["qts"]).new_messages] == ["/help"]


def test_a_difference_larger_than_the_clients_limit_is_too_long(telegram, raw_gateway):
    start = telegram.update_state()
    for _ in range(6):
        telegram.user_sends(ANN, "hi")
    answer = difference(raw_gateway, pts=start["pts"], qts=start["qts"], pts_total_limit=5)
    assert isinstance(answer, raw.types.updates.DifferenceTooLong)
    assert len(difference(raw_gateway, pts=start["pts"], qts=start["qts"], pts_total_limit=6).new_messages) == 6


def test_a_zero_access_hash_reaches_only_users_with_a_private_chat_with_the_bot(telegram, raw_gateway):
    telegram.users_meet([3001])  # started the bot once (a private chat exists)
    telegram.user_record(3002)  # a Telegram user who never started it
    telegram.users_meet([3003])
    telegram.block(3003)

    def send(user_id):
        peer = raw.types.InputPeerUser(user_id=user_id, access_hash=0)
        query = raw.functions.messages.SendMessage(peer=peer, message="hi", random_id=user_id)
        return raw_gateway._run(on_loop(raw_gateway.client.invoke, query))

    send(3001)
    assert [m.text for m in telegram.bot_messages(3001)] == ["hi"]
    with pytest.raises(ChatNotFound, match="PEER_ID_INVALID"):
        send(3002)
    with pytest.raises(UserBlocked):
        send(3003)
    with pytest.raises(ChatNotFound, match="PEER_ID_INVALID"):  # a wrong hash that is not 0: as ever
        raw_gateway._run(
            on_loop(
                raw_gateway.client.invoke,
                raw.functions.messages.SendMessage(
                    peer=raw.types.InputPeerUser(user_id=3001, access_hash=12345), message="hi", random_id=1
                ),
            )
        )
