"""The fast path says the same as kurigram's public one, byte for byte.

Every kind of request the gateway sends through botapp/telegram/kurigram.py's `invoke_many` (its
own serialization, containers, InvokeWithoutUpdates for a worker) is sent again through kurigram's
public `Client.invoke`, and the in-memory Telegram's record of the two requests it received must be
the same bytes. The random_id is fixed per request, so only msg_id differs (it is outside the
body). A kurigram upgrade that changes how a request goes on the wire fails here."""

import pytest
from pyrogram import raw

from botapp.services.users import user_access_hash
from botapp.telegram.kurigram import Written, invoke_many
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
    from botapp.telegram.pyrogram_gateway import markup

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
