"""Admins store files from Telegram; operators register them in the admin."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse

from botapp.models import StoredFile
from botapp.services.shortener import HttpShortener, ShortenerError, shortener_for, shortlink_create
from botapp.telegram.gateway import Media, TgUser
from tests.conftest import ADMIN, STORAGE

pytestmark = pytest.mark.django_db
OP = TgUser(id=ADMIN, first_name="Op")


def test_admin_sends_a_file_and_gets_its_link(telegram, chat, conf):
    chat(OP, "Price list", media=Media("document", "prices.pdf"))

    stored = StoredFile.objects.get()
    copy = telegram.message(STORAGE, stored.message_ids[0])
    assert (copy.media, copy.text) == (Media("document", "prices.pdf"), "Price list")  # kept in the storage channel
    reply = telegram.bot_messages(ADMIN)[-1]
    link = f"https://t.me/CourierBot?start={stored.share_id}"
    assert link in reply.text and reply.buttons[0][0].url == link
    assert stored.created_by == ADMIN and stored.title == "Price list"


def test_admin_forwards_a_storage_post(telegram, chat, conf):
    post = telegram.post(STORAGE, "Already here")
    chat(OP, "Already here", forward_from=(STORAGE, post))
    assert StoredFile.objects.get().message_ids == [post]


def test_batch_from_first_and_last_forwarded_message(telegram, chat, conf):
    posts = [telegram.post(STORAGE, f"part {i}") for i in range(5)]
    chat(OP, "/batch")
    assert "first" in telegram.bot_messages(ADMIN)[-1].text
    chat(OP, "", forward_from=(STORAGE, posts[3]))
    assert "last" in telegram.bot_messages(ADMIN)[-1].text
    chat(OP, "", forward_from=(STORAGE, posts[1]))

    stored = StoredFile.objects.get()
    assert stored.message_ids == posts[1:4]
    assert "Batch of 3 messages stored." in telegram.bot_messages(ADMIN)[-1].text


def test_batch_refuses_other_chats_and_can_be_cancelled(telegram, chat, conf):
    elsewhere = -1007770000001
    telegram.create_channel(elsewhere, title="Elsewhere")
    for i in range(5):
        telegram.post(elsewhere, f"post {i}")
    chat(OP, "/batch")
    chat(OP, "", forward_from=(elsewhere, 5))
    assert telegram.bot_messages(ADMIN)[-1].text.startswith("Forward messages from the storage channel")
    chat(OP, "/cancel")
    assert telegram.bot_messages(ADMIN)[-1].text == "Batch cancelled."
    assert not StoredFile.objects.exists()


def test_media_from_a_non_admin_is_not_stored(telegram, chat, alice):
    chat(alice, "", media=Media("photo", "cat.jpg"))
    assert not StoredFile.objects.exists()
    assert telegram.bot_messages(alice.id)[-1].text.startswith("I did not understand")


def test_operator_registers_a_batch_in_the_admin(admin_client, plain_http):
    response = admin_client.post(
        reverse("admin:botapp_storedfile_add"),
        {"title": "Season 1", "source_chat_id": STORAGE, "message_ids": "10-12, 15", "protect_content": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert StoredFile.objects.get().message_ids == [10, 11, 12, 15]


def test_admin_form_explains_bad_message_ids(admin_client, plain_http):
    response = admin_client.post(
        reverse("admin:botapp_storedfile_add"), {"title": "x", "source_chat_id": STORAGE, "message_ids": "ten"}
    )
    assert response.status_code == 200
    assert "message_ids" in response.context["adminform"].form.errors
    assert not StoredFile.objects.exists()


# --- the shortener, over real HTTP on 127.0.0.1 ---------------------------------------------------


class ShortenerStub(BaseHTTPRequestHandler):
    answer = b""
    seen = []

    def do_GET(self):
        ShortenerStub.seen.append(parse_qs(urlparse(self.path).query))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(ShortenerStub.answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    server = HTTPServer(("127.0.0.1", 0), ShortenerStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ShortenerStub.seen = []
    yield f"http://127.0.0.1:{server.server_port}/api"
    server.shutdown()


def test_http_shortener_speaks_the_common_api(stub_server):
    ShortenerStub.answer = json.dumps({"status": "success", "shortenedUrl": "https://sho.rt/abc"}).encode()
    assert HttpShortener(stub_server, "KEY").shorten("https://t.me/CourierBot?start=verify-x") == "https://sho.rt/abc"
    assert ShortenerStub.seen == [{"api": ["KEY"], "url": ["https://t.me/CourierBot?start=verify-x"]}]


def test_a_broken_shortener_falls_back_to_the_direct_link(stub_server):
    ShortenerStub.answer = b'{"status": "error", "message": "bad key"}'
    with pytest.raises(ShortenerError):
        HttpShortener(stub_server, "KEY").shorten("https://t.me/x")
    assert shortlink_create(shortener=HttpShortener(stub_server, "KEY"), url="https://t.me/x") == "https://t.me/x"
    assert shortlink_create(shortener=HttpShortener("http://127.0.0.1:9/nothing", "K"), url="https://t.me/y") == "https://t.me/y"


def test_none_means_direct_links():
    assert shortener_for(api_url="none", api_key="").shorten("https://t.me/x") == "https://t.me/x"
    assert shortener_for(api_url="", api_key="").shorten("https://t.me/x") == "https://t.me/x"


def test_with_the_storage_channel_lost_an_admins_upload_is_told_so_and_nothing_is_stored(telegram, bot, gateway, conf):
    from botapp.bot.router import SORRY
    from botapp.models import StoredFile
    from tests.transcripts import printed, sandbox

    box = sandbox(telegram, bot, gateway, as_json=False)
    out = printed(box, "storage channel lost", "1000 sends document report.pdf Price list")
    assert 'send "Not stored: the storage channel -1001000000001 is' in out
    assert SORRY not in out and not StoredFile.objects.exists()


def test_with_the_storage_channel_lost_a_post_there_is_not_heard_and_the_sandbox_goes_on(telegram, bot, gateway, conf):
    from tests.transcripts import printed, sandbox

    box = sandbox(telegram, bot, gateway, as_json=False)
    out = printed(box, "storage channel lost", "post Hello", "1001: /start")
    assert "runbot does not hear of it: the bot is no longer in the storage channel" in out
    assert 'send "Hello User1001!' in out
