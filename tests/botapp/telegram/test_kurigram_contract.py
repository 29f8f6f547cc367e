"""The fast path says the same as kurigram's public one, byte for byte.

Every kind of request the gateway sends through botapp/telegram/kurigram.py's `invoke_many` (its
own serialization, containers, InvokeWithoutUpdates for a worker) is sent again through kurigram's
public `Client.invoke`, and the in-memory Telegram's record of the two requests it received must be
the same bytes. The random_id is fixed per request, so only msg_id differs (it is outside the
body). A kurigram upgrade that changes how a request goes on the wire fails here."""

import io

import pytest
from pyrogram import errors, raw
from pyrogram.raw.core import TLObject

from botapp.services.users import user_access_hash
from botapp.telegram import kurigram
from botapp.telegram.kurigram import SMALL_PACKET, SentId, Written, invoke_many
from offline.telegram.clients import offline_gateway
from tests.conftest import STORAGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker(telegram, met):
    telegram.record_requests = True
    gw = offline_gateway(telegram, peers=user_access_hash)
    yield gw
    gw.stop()


def requests(worker, telegram, met):
    """One of each kind of request the gateway sends on the fast path, as it builds them."""
    user = raw.types.InputPeerUser(user_id=met.id, access_hash=user_access_hash(met.id))
    channel = worker._run(_resolve(worker, STORAGE))
    posted = telegram.post(STORAGE, "a post")
    photo = telegram.file_id("photo", "p.jpg")
    keyboard = worker._run(_keyboard(worker))
    from pyrogram import utils

    return [
        raw.functions.messages.SendMessage(peer=user, message="plain", random_id=101, no_webpage=True),
        raw.functions.messages.SendMessage(
            peer=user,
            message="bold and a button",
            entities=[raw.types.MessageEntityBold(offset=0, length=4)],
            random_id=102,
            no_webpage=True,
            noforwards=True,
            reply_markup=keyboard,
        ),
        raw.functions.messages.SendMedia(
            peer=user,
            media=utils.get_input_media_from_file_id(photo, utils.FileType.PHOTO),
            message="a caption",
            random_id=103,
        ),
        raw.functions.messages.ForwardMessages(from_peer=channel, id=[posted], random_id=[104], to_peer=user, drop_author=True),
        raw.functions.messages.DeleteMessages(id=[1, 2, 3], revoke=True),
        raw.functions.channels.GetMessages(channel=channel, id=[raw.types.InputMessageID(id=posted)]),
    ]


async def _keyboard(worker):
    from botapp.telegram.gateway import Button
    from botapp.telegram.messages import markup

    return await markup([[Button("Open", url="https://example.com")]]).write(worker.client)


async def _resolve(worker, chat_id):
    return await worker.client.resolve_peer(chat_id)


def received(telegram, start):
    return [body for body in telegram.requests[start:] if not body.startswith(raw.functions.Ping.ID.to_bytes(4, "little"))]


def test_each_request_goes_on_the_wire_as_kurigrams_invoke_sends_it(telegram, worker, met):
    for query in requests(worker, telegram, met):
        start = len(telegram.requests)
        worker._run(invoke_many(worker.client, [Written(worker._wire(query).write(), query)]))
        fast = received(telegram, start)
        start = len(telegram.requests)
        worker._run(_public(worker, query))
        public = received(telegram, start)
        assert fast and fast[:1] == public[:1], type(query).__name__


def test_a_container_carries_each_request_as_it_would_go_alone(telegram, worker, met):
    queries = requests(worker, telegram, met)[:3]
    start = len(telegram.requests)
    worker._run(invoke_many(worker.client, [Written(worker._wire(q).write(), q) for q in queries]))
    together = received(telegram, start)
    alone = []
    for query in queries:
        start = len(telegram.requests)
        worker._run(_public(worker, query))
        alone += received(telegram, start)[:1]
    assert telegram.containers >= 1
    assert together == alone


async def _public(worker, query):
    try:
        return await worker.client.invoke(query)
    except Exception as exc:  # noqa: BLE001 - the repeat of a send is RANDOM_ID_DUPLICATE: its bytes are what count
        return exc


# --- answers read only as far as the new message's id (kurigram.LeanRpcResult) -----------------------


def test_a_sends_answer_read_lean_gives_the_id_kurigrams_full_read_gives(telegram, worker, met):
    user = raw.types.InputPeerUser(user_id=met.id, access_hash=user_access_hash(met.id))

    def send(random_id, one_sent):
        query = raw.functions.messages.SendMessage(peer=user, message="hi", random_id=random_id, no_webpage=True)
        (answer,) = worker._run(invoke_many(worker.client, [Written(worker._wire(query).write(), query)], one_sent=one_sent))
        return answer

    whole = send(201, one_sent=False)
    lean = send(202, one_sent=True)
    assert isinstance(whole, raw.types.Updates) and isinstance(lean, SentId)
    (first_id,) = [u.id for u in whole.updates if isinstance(u, raw.types.UpdateMessageID)]
    assert (lean.id, lean.random_id) == (first_id + 1, 202)
    assert [m.id for m in telegram.bot_messages(met.id)][-2:] == [first_id, lean.id]
    assert not kurigram._one_sent  # nothing is left registered once answered


def test_a_lean_container_of_sends_and_an_error_each_get_their_own_answer(telegram, worker, met):
    user = raw.types.InputPeerUser(user_id=met.id, access_hash=user_access_hash(met.id))
    queries = [
        raw.functions.messages.SendMessage(peer=user, message=f"n{n}", random_id=300 + n, no_webpage=True) for n in range(3)
    ]
    queries.append(raw.functions.messages.SendMessage(peer=user, message="", random_id=310, no_webpage=True))  # MESSAGE_EMPTY
    answers = worker._run(invoke_many(worker.client, [Written(worker._wire(q).write(), q) for q in queries], one_sent=True))
    assert [type(a) for a in answers[:3]] == [SentId] * 3
    assert [a.random_id for a in answers[:3]] == [300, 301, 302]
    assert isinstance(answers[3], errors.RPCError) and answers[3].ID == "MESSAGE_EMPTY"


def _packet(req_msg_id, result) -> io.BytesIO:
    return io.BytesIO(raw.types.RpcResult(req_msg_id=req_msg_id, result=result).write())


def _updates(*updates):
    bot = raw.types.User(id=7, is_self=True, bot=True, access_hash=1, first_name="Bot", bot_info_version=1)
    return raw.types.Updates(updates=list(updates), users=[bot], chats=[], date=1, seq=0)


def _new_message(message_id):
    message = raw.types.Message(id=message_id, peer_id=raw.types.PeerUser(user_id=9), date=1, message="x")
    return raw.types.UpdateNewMessage(message=message, pts=1, pts_count=1)


@pytest.fixture
def reading():
    """This thread reads packets of session b"s1", which sent msg_id 44 with one_sent."""
    kurigram._reading.session_id = b"s1"
    kurigram._one_sent.add((b"s1", 44))
    yield
    kurigram._reading.session_id = None
    kurigram._one_sent.discard((b"s1", 44))


@pytest.mark.django_db(False)
def test_a_registered_answer_with_the_id_first_is_read_lean(reading):
    read = TLObject.read(_packet(44, _updates(raw.types.UpdateMessageID(id=5, random_id=-3), _new_message(5))))
    assert isinstance(read, raw.types.RpcResult)
    assert (read.req_msg_id, read.result) == (44, SentId(5, -3))


@pytest.mark.django_db(False)
@pytest.mark.parametrize(
    "req_msg_id, result, whole",
    [
        (44, _updates(_new_message(5), raw.types.UpdateMessageID(id=5, random_id=1)), raw.types.Updates),  # id not first
        (44, raw.types.RpcError(error_code=400, error_message="MESSAGE_EMPTY"), raw.types.RpcError),
        (44, _updates(), raw.types.Updates),  # no update at all
        (48, _updates(raw.types.UpdateMessageID(id=5, random_id=1)), raw.types.Updates),  # not sent with one_sent
    ],
)
def test_any_other_answer_is_read_whole_as_kurigram_reads_it(reading, req_msg_id, result, whole):
    data = _packet(req_msg_id, result)
    read = TLObject.read(data)
    assert (read.req_msg_id, type(read.result)) == (req_msg_id, whole)
    assert read.result.write() == result.write()
    assert data.read() == b""  # read to its end, as kurigram would


@pytest.mark.django_db(False)
def test_another_sessions_answer_with_the_same_msg_id_is_read_whole(reading):
    kurigram._reading.session_id = b"s2"
    read = TLObject.read(_packet(44, _updates(raw.types.UpdateMessageID(id=5, random_id=1))))
    assert isinstance(read.result, raw.types.Updates)


@pytest.mark.django_db(False)
def test_a_packet_read_off_the_loop_knows_its_session_too():
    crypto = kurigram.LoopCrypto()
    seen = []

    def unpack(b, session_id, auth_key, auth_key_id):  # stands for unpack_lean, on the crypto thread
        seen.append(kurigram._reading.session_id)

    try:
        original, kurigram.unpack_lean = kurigram.unpack_lean, unpack
        crypto.submit(kurigram.mtproto.unpack, io.BytesIO(b"x" * (SMALL_PACKET + 1)), b"s9", b"k", b"i").result()
    finally:
        kurigram.unpack_lean = original
        crypto.shutdown()
    assert seen == [b"s9"]
