"""PyrogramGateway runs real kurigram method code; only `invoke` (the network) is replaced by a
recorder that answers with raw TL objects, as Telegram would."""

import asyncio
import inspect
import threading

import pytest
from pyrogram import Client, errors, raw

from botapp.telegram.gateway import (
    Button,
    ChatNotFound,
    FloodWait,
    Media,
    MessageNotFound,
    Sent,
    TransientError,
    UserBlocked,
    UserDeactivated,
)
from botapp.telegram.pyrogram_gateway import PyrogramGateway

USER = 1001
CHANNEL = -1001000000001


class RecordingClient(Client):
    """A real pyrogram Client whose network is a script: `answers[TL function name]` -> result or exception."""

    def __init__(self):
        super().__init__("recorder", api_id=1, api_hash="0" * 32, bot_token="1:x", in_memory=True, no_updates=True)
        self.requests = []
        self.answers = {}
        self.is_connected = True
        self.me = raw.types.User(id=42, is_self=True, bot=True, first_name="Courier", username="CourierBot")

    async def invoke(self, query, *args, **kwargs):
        self.requests.append(query)
        name = type(query).__name__
        answer = self.answers.get(name)
        if isinstance(answer, BaseException):
            raise answer
        if inspect.isfunction(answer):
            return answer(query)
        if answer is not None:
            return answer
        return default_answer(query, len(self.requests))

    async def resolve_peer(self, peer_id):
        peer_id = int(peer_id)
        if peer_id < 0:
            return raw.types.InputPeerChannel(channel_id=int(str(peer_id)[4:]), access_hash=7)
        return raw.types.InputPeerUser(user_id=peer_id, access_hash=7)

    def names(self):
        return [type(q).__name__ for q in self.requests]


def raw_message(msg_id, *, peer, text="", media=None):
    return raw.types.Message(
        id=msg_id,
        peer_id=peer,
        date=0,
        message=text,
        media=media,
        out=True,
        from_id=raw.types.PeerUser(user_id=42),
        restriction_reason=[],
    )


def default_answer(query, n):
    if isinstance(query, raw.functions.messages.SendMessage):
        return raw.types.UpdateShortSentMessage(id=100 + n, pts=1, pts_count=1, date=0)
    if isinstance(query, raw.functions.messages.DeleteMessages):
        return raw.types.messages.AffectedMessages(pts=1, pts_count=len(query.id))
    if isinstance(query, raw.functions.channels.DeleteMessages):
        return raw.types.messages.AffectedMessages(pts=1, pts_count=len(query.id))
    if isinstance(query, raw.functions.messages.ForwardMessages):
        peer = raw.types.PeerUser(user_id=USER)
        return raw.types.Updates(
            updates=[
                raw.types.UpdateNewMessage(message=raw_message(500 + i, peer=peer, text=f"copy {mid}"), pts=1, pts_count=1)
                for i, mid in enumerate(query.id)
            ],
            users=[raw.types.User(id=USER, first_name="Alice"), raw.types.User(id=42, first_name="Courier", bot=True)],
            chats=[],
            date=0,
            seq=0,
        )
    if isinstance(query, raw.functions.channels.GetMessages):
        channel = raw.types.PeerChannel(channel_id=1000000001)
        return raw.types.messages.ChannelMessages(
            pts=1,
            count=len(query.id),
            messages=[raw_message(m.id, peer=channel, text=f"stored {m.id}") for m in query.id],
            chats=[
                raw.types.Channel(
                    id=1000000001,
                    title="Storage",
                    photo=raw.types.ChatPhotoEmpty(),
                    date=0,
                    access_hash=7,
                    restriction_reason=[],
                    usernames=[],
                )
            ],
            users=[],
            topics=[],
        )
    if isinstance(query, raw.functions.messages.SetBotCallbackAnswer):
        return True
    raise NotImplementedError(type(query).__name__)


@pytest.fixture
def gateway():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    client = RecordingClient()
    yield PyrogramGateway(client, loop, username="CourierBot")
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def test_send_text_with_buttons(gateway):
    sent = gateway.send_text(
        USER,
        "<b>hi</b>",
        buttons=[[Button("Open", url="https://t.me/CourierBot?start=x"), Button("Close", callback_data="close")]],
    )

    assert sent == Sent(USER, 101)
    (request,) = gateway.client.requests
    assert isinstance(request, raw.functions.messages.SendMessage)
    assert request.message == "hi"  # HTML parsed into entities
    assert [type(e).__name__ for e in request.entities] == ["MessageEntityBold"]
    row = request.reply_markup.rows[0].buttons
    assert (row[0].text, row[0].type.url) == ("Open", "https://t.me/CourierBot?start=x")
    assert (row[1].text, row[1].type.data) == ("Close", b"close")


def test_copy_without_caption_is_one_forward_call_without_sender(gateway):
    sent = gateway.copy_messages(USER, CHANNEL, [11, 12, 13], protect=True)

    assert sent == [Sent(USER, 500), Sent(USER, 501), Sent(USER, 502)]
    (request,) = gateway.client.requests
    assert isinstance(request, raw.functions.messages.ForwardMessages)
    assert request.id == [11, 12, 13]
    assert request.drop_author is True
    assert request.noforwards is True


def test_copy_with_a_caption_gets_then_sends_each_message(gateway):
    sent = gateway.copy_messages(USER, CHANNEL, [11], caption="new caption")

    assert gateway.client.names() == ["GetMessages", "SendMessage"]
    assert sent == [Sent(USER, 102)]
    assert gateway.client.requests[1].message == "stored 11"  # a text message keeps its text


def test_delete_250_ids_takes_three_calls_of_at_most_100(gateway):
    deleted = gateway.delete_messages(USER, range(1, 251))

    assert deleted == 250
    assert gateway.client.names() == ["DeleteMessages"] * 3
    assert [len(r.id) for r in gateway.client.requests] == [100, 100, 50]
    assert gateway.client.requests[2].id[-1] == 250


def test_delete_in_a_channel_uses_the_channel_call(gateway):
    assert gateway.delete_messages(CHANNEL, [5, 6]) == 2
    assert gateway.client.names() == ["DeleteMessages"]
    assert isinstance(gateway.client.requests[0], raw.functions.channels.DeleteMessages)


def test_delete_of_messages_telegram_refuses_is_skipped(gateway):
    gateway.client.answers["DeleteMessages"] = errors.MessageDeleteForbidden()
    assert gateway.delete_messages(USER, [1, 2]) == 0


@pytest.mark.parametrize(
    "error,domain",
    [
        (errors.FloodWait(value=7), FloodWait),
        (errors.UserIsBlocked(), UserBlocked),
        (errors.InputUserDeactivated(), UserDeactivated),
        (errors.PeerIdInvalid(), ChatNotFound),
        (errors.MessageIdInvalid(), MessageNotFound),
        (errors.InternalServerError(), TransientError),
    ],
)
def test_telegram_errors_become_domain_errors(gateway, error, domain):
    gateway.client.answers["SendMessage"] = error

    with pytest.raises(domain) as caught:
        gateway.send_text(USER, "hi")

    if domain is FloodWait:
        assert caught.value.seconds == 7


def test_send_media_uses_the_kind_specific_method(gateway):
    def answer(query):
        assert isinstance(query.media, raw.types.InputMediaDocumentExternal)
        assert query.media.url == "https://example.com/a.pdf"
        return raw.types.Updates(
            updates=[
                raw.types.UpdateNewMessage(message=raw_message(77, peer=raw.types.PeerUser(user_id=USER)), pts=1, pts_count=1)
            ],
            users=[raw.types.User(id=USER, first_name="Alice"), raw.types.User(id=42, first_name="Courier", bot=True)],
            chats=[],
            date=0,
            seq=0,
        )

    gateway.client.answers["SendMedia"] = answer
    assert gateway.send_media(USER, Media("document", "https://example.com/a.pdf"), caption="doc") == Sent(USER, 77)


def test_membership(gateway):
    participant = raw.types.channels.ChannelParticipant(
        participant=raw.types.ChannelParticipant(user_id=USER, date=0),
        chats=[],
        users=[raw.types.User(id=USER, first_name="Alice")],
    )
    gateway.client.answers["GetParticipant"] = participant
    assert gateway.is_member(CHANNEL, USER) is True

    left = raw.types.channels.ChannelParticipant(
        participant=raw.types.ChannelParticipantLeft(peer=raw.types.PeerUser(user_id=USER)),
        chats=[],
        users=[raw.types.User(id=USER, first_name="Alice")],
    )
    gateway.client.answers["GetParticipant"] = left
    assert gateway.is_member(CHANNEL, USER) is False

    gateway.client.answers["GetParticipant"] = errors.UserNotParticipant()
    assert gateway.is_member(CHANNEL, USER) is False

    gateway.client.answers["GetParticipant"] = errors.ChannelPrivate()
    with pytest.raises(ChatNotFound):
        gateway.is_member(CHANNEL, USER)


def test_calling_from_the_loop_itself_is_refused(gateway):
    async def inside():
        return gateway.send_text(USER, "hi")

    with pytest.raises(RuntimeError, match="synchronous"):
        asyncio.run_coroutine_threadsafe(inside(), gateway.loop).result(5)


@pytest.mark.parametrize(
    "error,message",
    [
        (errors.AccessTokenInvalid(), "BOT_TOKEN was refused by Telegram (ACCESS_TOKEN_INVALID)"),
        (errors.ApiIdInvalid(), "API_ID / API_HASH were refused by Telegram (API_ID_INVALID)"),
    ],
)
def test_credentials_telegram_refuses_name_the_variable(error, message):
    from botapp.config import ConfigError
    from botapp.telegram.pyrogram_gateway import client_start

    class Refusing(RecordingClient):
        async def start(self):
            raise error

    with pytest.raises(ConfigError) as caught:
        asyncio.run(client_start(Refusing()))
    assert caught.value.problems[0].startswith(message)
