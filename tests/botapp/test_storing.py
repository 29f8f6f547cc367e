"""Admins store files from Telegram; operators register them in the admin."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse

from botapp.models import StoredFile
from botapp.services.shortener import HttpShortener, ShortenerError, shortener_for, shortlink_create
from botapp.telegram.gateway import TgUser
from inmemory_telegram.state import Media
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


# --- albums, deleted posts, the storage channel lost ---------------------------------------------


def links_sent(telegram):
    return [m for m in telegram.bot_messages(ADMIN) if "https://t.me/CourierBot?start=" in m.text]


def test_an_admins_album_of_ten_is_one_link_delivered_as_one_album(telegram, bot, chat, conf, alice):
    photos = [Media("photo", f"p{i}.jpg") for i in range(10)]
    telegram.user_sends_album(OP, photos, "Holiday")
    bot.pump.process(expect=10)

    stored = StoredFile.objects.get()
    assert len(stored.message_ids) == 10 and stored.title == "Holiday"
    copies = [telegram.message(STORAGE, i) for i in stored.message_ids]
    assert len({c.grouped_id for c in copies}) == 1 and copies[0].grouped_id is not None  # one album there too
    (reply,) = telegram.bot_messages(ADMIN)
    assert reply.text.startswith("Album of 10 stored.") and stored.share_id in reply.text

    chat(alice, f"/start {stored.share_id}")
    received = [m for m in telegram.bot_messages(alice.id) if m.media is not None]
    assert [m.media for m in received] == photos
    assert len({m.grouped_id for m in received}) == 1 and received[0].grouped_id is not None


@pytest.mark.django_db(transaction=True)
def test_an_album_handled_on_ten_threads_at_once_is_stored_once(telegram, bot, conf):
    from tests.concurrency import run_in_threads

    telegram.user_sends_album(OP, [Media("document", f"d{i}.pdf") for i in range(10)], "Docs")
    parsed = [bot.pump.pending.get(timeout=5) for _ in range(10)]  # as runbot's pool would take them

    def handle():
        handle_update, update, _ = parsed.pop()
        handle_update(update)

    run_in_threads(handle, n=10)
    assert len(StoredFile.objects.get().message_ids) == 10
    assert len(links_sent(telegram)) == 1 and len(telegram.messages(STORAGE)) == 10


def test_a_forwarded_storage_album_is_one_link_to_the_whole_album(telegram, bot, conf):
    telegram.user_sends_album(OP, [Media("photo", "a.jpg"), Media("photo", "b.jpg"), Media("photo", "c.jpg")])
    bot.pump.process(expect=3)
    album = StoredFile.objects.get().message_ids
    StoredFile.objects.all().delete()

    # The admin forwards the storage channel's album back to the bot: three updates, one media group.
    telegram.user_sends_album(OP, [Media("photo", "x.jpg")] * 3, forward_from=(STORAGE, album[1]))
    bot.pump.process(expect=3)
    assert StoredFile.objects.get().message_ids == album
    assert len(links_sent(telegram)) == 2  # the first album's link, and this one


def test_a_forwarded_post_deleted_meanwhile_is_not_stored(telegram, chat, conf):
    post = telegram.post(STORAGE, "Soon gone")
    telegram.delete_post(STORAGE, post)
    chat(OP, "Soon gone", forward_from=(STORAGE, post))
    assert not StoredFile.objects.exists()
    assert telegram.bot_messages(ADMIN)[-1].text.startswith("Not stored: that message is no longer there")


def test_a_batch_over_a_deleted_post_counts_and_stores_only_the_posts_there(telegram, chat, conf):
    posts = [telegram.post(STORAGE, f"part {i}") for i in range(5)]
    telegram.delete_post(STORAGE, posts[2])
    chat(OP, "/batch")
    chat(OP, "", forward_from=(STORAGE, posts[0]))
    chat(OP, "", forward_from=(STORAGE, posts[3]))

    assert StoredFile.objects.get().message_ids == [posts[0], posts[1], posts[3]]
    assert "Batch of 3 messages stored (1 of the range is deleted and left out)." in telegram.bot_messages(ADMIN)[-1].text


def test_a_batch_of_only_deleted_posts_stores_nothing(telegram, chat, conf):
    posts = [telegram.post(STORAGE, f"part {i}") for i in range(3)]
    for post in posts:
        telegram.delete_post(STORAGE, post)
    chat(OP, "/batch")
    chat(OP, "", forward_from=(STORAGE, posts[0]))
    chat(OP, "", forward_from=(STORAGE, posts[2]))
    assert not StoredFile.objects.exists()
    assert "nothing was stored" in telegram.bot_messages(ADMIN)[-1].text


def test_with_the_storage_channel_lost_a_forwarded_post_is_told_so_and_nothing_is_stored(telegram, bot, gateway, conf):
    from tests.transcripts import printed, sandbox

    box = sandbox(telegram, bot, gateway, as_json=False)
    out = printed(box, "post Chapter 1", "storage channel lost", "1000 forwards #1")
    assert 'send "Not stored: the storage channel -1001000000001 is' in out
    assert "Stored." not in out and not StoredFile.objects.exists()


def test_with_the_storage_channel_lost_a_batch_is_told_so_and_nothing_is_stored(telegram, bot, gateway, conf):
    from tests.transcripts import printed, sandbox

    box = sandbox(telegram, bot, gateway, as_json=False)
    out = printed(box, "post One", "post Two", "1000: /batch", "1000 forwards #1", "storage channel lost", "1000 forwards #2")
    assert 'send "Not stored: the storage channel -1001000000001 is' in out
    assert not StoredFile.objects.exists()


def test_with_the_storage_channel_lost_an_album_gets_one_answer_and_nothing_is_stored(telegram, bot, gateway, conf):
    from tests.transcripts import printed, sandbox

    box = sandbox(telegram, bot, gateway, as_json=False)
    out = printed(box, "storage channel lost", "1000 sends album photo:a.jpg photo:b.jpg photo:c.jpg")
    assert out.count('send "Not stored: the storage channel') == 1
    assert not StoredFile.objects.exists()
