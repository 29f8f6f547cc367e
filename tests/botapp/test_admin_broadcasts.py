"""The broadcast's own page: Telegram HTML checked on save, a preview that cannot style the page,
every bad button line at once, the test's result per admin, duplicate, cancel, and no delete while
its messages are still in users' chats."""

from datetime import timedelta

import pytest
from django.urls import reverse

from botapp import clock
from botapp.models import Broadcast, BroadcastDelivery
from botapp.services.broadcasts import broadcast_test_send
from botapp.services.telegram_html import telegram_html_check, telegram_html_preview
from tests.factories import BroadcastDeliveryFactory, BroadcastFactory, TelegramUserFactory, met_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(admin_client, plain_http):
    return admin_client


def compose(operator, **fields):
    data = {"title": "Sale", "text": "Hi", "media_kind": "", "media": "", "buttons": ""} | fields
    return operator.post(reverse("admin:botapp_broadcast_add"), data)


def test_html_that_telegram_would_refuse_is_a_form_error_naming_each_problem(operator):
    response = compose(operator, text="<b>Sale <i>today</b>\n<div>x</div> <a href='ftp://x'>y</a>\n<u>open")
    errors = response.context["adminform"].form.errors["text"]
    assert errors == [
        "Line 1: </b> does not close the last open tag (</i> first).",
        "Line 2: <div> is not a tag Telegram supports.",
        "Line 2: </div> is not a tag Telegram supports.",
        "Line 2: a link needs href with http://, https:// or tg:// (got 'ftp://x').",
        "<u> is never closed.",
    ]
    assert not Broadcast.objects.exists()


def test_both_quote_styles_mentions_and_spoilers_are_accepted():
    text = """<a href='https://a.example'>a</a> <a href="tg://user?id=5">you</a> <tg-spoiler>s</tg-spoiler> <span class="tg-spoiler">t</span> <blockquote expandable>q</blockquote> <pre><code class="language-python">x</code></pre>"""
    assert telegram_html_check(text=text) == []
    preview = telegram_html_preview(text=text)
    assert '<a href="https://a.example" target="_blank" rel="noopener">a</a>' in preview
    assert '<a title="tg://user?id=5" style="text-decoration: underline">you</a>' in preview


def test_the_preview_closes_what_the_text_left_open_and_escapes_the_rest():
    assert telegram_html_preview(text="<b>bold <i>and") == "<b>bold <i>and</i></b>"
    assert telegram_html_preview(text="<style>body{}</style><script>x</script>") == (
        "&lt;style&gt;body{}&lt;/style&gt;&lt;script&gt;x&lt;/script&gt;"
    )
    assert telegram_html_preview(text="<b onclick='x()'>y</b>") == "<b>y</b>"


def test_a_saved_text_with_an_unclosed_tag_cannot_bold_the_page(operator):
    broadcast = BroadcastFactory(text="<b>everything after me")  # saved before the check existed
    page = operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    assert "<b>everything after me</b>" in page


def test_every_bad_button_line_is_reported_at_once(operator):
    response = compose(
        operator,
        buttons="Ok | https://ok.example\nno link\nx | ftp://nope\nGood | https://g.example\ny | https://y.example | Bad Key",
    )
    assert response.context["adminform"].form.errors["buttons"] == [
        'Line 2: write a button as "Text | https://example.com" (optionally "| key" to track clicks), '
        'or "Text | tap:key" for a button that answers in the chat.',
        "Line 3: ftp://nope is not a link Telegram accepts on a button (https://… or http://… with a host, or tg://…).",
        "Line 5: a click key uses a-z, 0-9, _ and - only (got Bad Key).",
    ]


def test_a_test_records_each_admins_result_and_a_failure_does_not_stop_the_others(telegram, gateway, operator):
    met_user(telegram, telegram_id=1000), met_user(telegram, telegram_id=1002)  # 1001 never wrote to the bot
    broadcast = BroadcastFactory(text="<b>50% off</b> today", buttons="")
    results = broadcast_test_send(gateway=gateway, broadcast=broadcast, chat_ids=frozenset({1000, 1001, 1002}))
    assert [(r["chat_id"], r["ok"]) for r in results] == [(1000, True), (1001, False), (1002, True)]
    assert len(telegram.bot_messages(1000)) == 1 and len(telegram.bot_messages(1002)) == 1

    page = operator.get(reverse("admin:botapp_broadcast_change", args=[broadcast.pk])).content.decode()
    assert "admin 1000: " in page and "admin 1001: " in page and "failed: " in page


def test_duplicate_makes_a_new_draft_with_the_same_message(operator):
    done = BroadcastFactory(
        title="Sale", text="Hi", buttons="Go | https://go.example", delete_after_minutes=60, status="done", total=3, sent=3
    )
    url = reverse("admin:botapp_broadcast_duplicate", args=[done.pk])
    assert "Duplicate “Sale” as a new draft?" in operator.get(url).content.decode()
    response = operator.post(url)
    copy = Broadcast.objects.exclude(pk=done.pk).get()
    assert response.url == reverse("admin:botapp_broadcast_change", args=[copy.pk])
    assert (copy.title, copy.status, copy.text, copy.buttons, copy.delete_after_minutes, copy.total) == (
        "Sale (copy)",
        "draft",
        "Hi",
        "Go | https://go.example",
        60,
        0,
    )


def test_a_scheduled_messages_page_shows_its_recipients_and_files_and_its_duplicate_keeps_them(operator, settings, tmp_path):
    from django.core.files.base import ContentFile

    from botapp.models import BroadcastAttachment

    settings.MEDIA_ROOT = tmp_path
    message = BroadcastFactory(
        title="May catalogue",
        text="<b>May</b> catalogue",
        kind="message",
        audience="users",
        recipient_ids=[1001, 1004],
        status="done",
    )
    BroadcastAttachment.objects.create(
        broadcast=message, position=0, kind="photo", file_id="AgACAgQAAx0CfileId", file_name="cover.jpg", size=2048
    )
    pending = BroadcastAttachment(broadcast=message, position=1, kind="document", file_name="prices.pdf", size=5)
    pending.upload.save("prices.pdf", ContentFile(b"%PDF!"), save=True)

    page = operator.get(reverse("admin:botapp_broadcast_change", args=[message.pk])).content.decode()
    assert "2 listed user(s): 1001, 1004" in page
    assert "Photo cover.jpg (2.0\xa0KB)" in page  # filesizeformat: a no-break space
    assert "Document prices.pdf" in page

    operator.post(reverse("admin:botapp_broadcast_duplicate", args=[message.pk]))
    copy = Broadcast.objects.exclude(pk=message.pk).get()
    assert (copy.kind, copy.audience, copy.recipient_ids, copy.status) == ("message", "users", [1001, 1004], "draft")
    files = list(copy.attachments.order_by("position"))
    assert [(a.kind, a.file_name, a.file_id) for a in files] == [
        ("photo", "cover.jpg", "AgACAgQAAx0CfileId"),
        ("document", "prices.pdf", ""),
    ]
    assert files[1].upload.name != pending.upload.name  # its own file: replacing the original's cannot take it away
    with files[1].upload.open("rb") as copied:
        assert copied.read() == b"%PDF!"


def test_the_actions_offered_follow_the_status(operator):
    draft = BroadcastFactory()
    page = operator.get(reverse("admin:botapp_broadcast_change", args=[draft.pk])).content.decode()
    assert "Start sending…" in page and "Cancel…" not in page
    sending = BroadcastFactory(status="sending", total=2)
    page = operator.get(reverse("admin:botapp_broadcast_change", args=[sending.pk])).content.decode()
    assert "Start sending…" not in page and "Cancel…" in page
    assert 'hx-trigger="every 2s"' in page  # progress updates by itself while it is sent
    # A stale tab's Start: a page saying why, not a bare 403; nothing changes.
    refused = operator.post(reverse("admin:botapp_broadcast_start_sending", args=[sending.pk]))
    assert refused.status_code == 409 and "only a draft can be started" in refused.content.decode()
    assert Broadcast.objects.get(pk=sending.pk).status == "sending"


def test_cancel_asks_first_then_leaves_the_rest_unsent(operator):
    broadcast = BroadcastFactory(status="sending", total=3)
    for _ in range(3):
        BroadcastDeliveryFactory(broadcast=broadcast)
    url = reverse("admin:botapp_broadcast_cancel_sending", args=[broadcast.pk])
    assert "3 users have not got it yet and will not get it." in operator.get(url).content.decode()
    operator.post(url)
    assert Broadcast.objects.get(pk=broadcast.pk).status == "cancelled"


def test_progress_fragment_stops_polling_once_done(operator):
    broadcast = BroadcastFactory(status="done", total=2, sent=2)
    url = reverse("admin:botapp_broadcast_progress", args=[broadcast.pk])
    answer = operator.get(url)
    fragment = answer.content.decode()
    assert "2 / 2 (100%)" in fragment and "hx-trigger" not in fragment and "HX-Refresh" not in answer
    # polled by the page while it was sending: the page reloads once (htmx's HX-Refresh, no inline
    # script, which the Content-Security-Policy forbids), so its actions follow
    ended = operator.get(url, {"from": "sending", "page": "change"})
    assert ended["HX-Refresh"] == "true" and "<script" not in ended.content.decode()


def test_a_sent_broadcast_with_a_lifetime_cannot_be_deleted_before_its_messages(operator):
    broadcast = BroadcastFactory(status="done", delete_after_minutes=60, total=2, sent=2)
    user = TelegramUserFactory()
    BroadcastDeliveryFactory(broadcast=broadcast, user=user, status="sent", delete_at=clock.now() + timedelta(minutes=60))
    BroadcastDeliveryFactory(broadcast=broadcast, status="deleted")
    url = reverse("admin:botapp_broadcast_delete", args=[broadcast.pk])
    response = operator.post(url, {"post": "yes"}, follow=True)
    assert "cannot be deleted yet: 1 of its messages are still in users&#x27; chats" in response.content.decode()
    assert Broadcast.objects.filter(pk=broadcast.pk).exists()

    BroadcastDelivery.objects.filter(status="sent").update(status="deleted")  # the deleter did its work
    confirmation = operator.get(url).content.decode()
    assert "the broadcast and its 2 delivery records" in confirmation
    operator.post(url, {"post": "yes"})
    assert not Broadcast.objects.filter(pk=broadcast.pk).exists()


def test_an_action_url_that_names_no_broadcast_is_refused(operator):
    broadcast = BroadcastFactory()
    assert operator.get(f"/botapp/broadcast/{broadcast.pk}/change/start/").status_code in (403, 404)  # not a 500


def test_start_says_who_it_goes_to_as_start_will_queue_them(operator):
    TelegramUserFactory.create_batch(3)
    TelegramUserFactory(start_payload="spring")
    listed = BroadcastFactory(kind="message", audience="users", recipient_ids=[1001, 1004])
    spring = BroadcastFactory(audience="payload", audience_payload="spring")
    overdue = BroadcastFactory(scheduled_at=clock.now() - timedelta(minutes=5))  # saved, then the time passed

    def confirmation(broadcast):
        return operator.get(reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk])).content.decode()

    page = confirmation(listed)
    assert "It goes now to the 2 listed users." in page and "Send to 2 users" in page
    page = confirmation(spring)
    assert "It goes now to 1 active user who came through “spring”." in page and "Send to 1 user" in page
    page = confirmation(overdue)
    assert "It goes now to 4 active users." in page and "Send to 4 users" in page and "Schedule it" not in page
    Broadcast.objects.filter(pk__in=[listed.pk, overdue.pk]).update(scheduled_at=clock.now() + timedelta(days=1))
    page = confirmation(overdue)
    assert "it goes then to those active at that time (4 active users now)." in page and "Schedule it" in page
    assert "it goes then to the 2 listed users." in confirmation(listed)


@pytest.mark.parametrize(
    ("media", "error"),
    [
        ("not a url or id!", "That is neither an http(s):// address nor a Telegram file id."),
        ("/etc/passwd", "That is neither an http(s):// address nor a Telegram file id."),
        (
            "HTTPS://img.example/a.jpg",
            "Give an http(s):// address (lower-case, as https://files.example/cat.jpg) or a Telegram file id.",
        ),
        (
            "ftp://img.example/a.jpg",
            "Give an http(s):// address (lower-case, as https://files.example/cat.jpg) or a Telegram file id.",
        ),
        ("https://", "Give a whole address, like https://files.example/cat.jpg."),
    ],
)
def test_media_telegram_could_not_send_is_a_form_error(operator, media, error):
    data = {"title": "Sale", "text": "Hi", "media_kind": "photo", "media": media, "buttons": ""}
    response = operator.post(reverse("admin:botapp_broadcast_add"), data)
    assert response.context["adminform"].form.errors["media"] == [error]
    assert not Broadcast.objects.exists()


def test_media_by_https_address_or_a_real_file_id_is_accepted(operator, telegram):
    file_id = telegram.file_id("photo", "cat.jpg")  # what Telegram gives the bot for a photo
    for media in ("https://img.example/a.jpg", file_id, "http://img.example/b.jpg"):
        data = {"title": f"Sale {media[:8]}", "text": "Hi", "media_kind": "photo", "media": media, "buttons": ""}
        response = operator.post(reverse("admin:botapp_broadcast_add"), data)
        assert response.status_code == 302, response.context["adminform"].form.errors
    assert Broadcast.objects.count() == 3


def test_a_file_id_of_another_kind_is_a_form_error(operator, telegram):
    data = {"title": "Sale", "text": "Hi", "media_kind": "photo", "media": telegram.file_id("document", "a.pdf"), "buttons": ""}
    response = operator.post(reverse("admin:botapp_broadcast_add"), data)
    assert response.context["adminform"].form.errors["media"] == [
        "That file id is a document, not a photo: choose the kind it is, or give another file."
    ]


def test_a_personal_placeholder_in_a_broadcast_is_refused_not_sent_as_written(operator):
    data = {"title": "Sale", "text": "Hi {first_name}, sale today", "media_kind": "", "media": "", "buttons": ""}
    response = operator.post(reverse("admin:botapp_broadcast_add"), data)
    assert response.context["adminform"].form.errors["text"] == [
        "{first_name} would reach users as written: this message is the same for everyone "
        "(only the welcome, /help, /about and /faq texts of Bot settings are filled in)."
    ]
    assert not Broadcast.objects.exists()
    assert operator.post(reverse("admin:botapp_broadcast_add"), data | {"text": "Prices {from 5 €}"}).status_code == 302


def test_starting_a_large_audience_says_a_worker_prepares_the_rest(operator, monkeypatch):
    from botapp.services import broadcasts

    monkeypatch.setattr(broadcasts, "START_ROWS", 2)
    TelegramUserFactory.create_batch(5)
    broadcast = BroadcastFactory()
    response = operator.post(reverse("admin:botapp_broadcast_start_sending", args=[broadcast.pk]), follow=True)
    page = response.content.decode()
    assert "the first 2 users (a worker is preparing the rest)" in page
    assert "Recipients: preparing 2 users (a worker adds them while it sends)." in page

    broadcasts.broadcasts_prepare()
    live = operator.get(reverse("admin:botapp_broadcast_progress", args=[broadcast.pk])).content.decode()
    assert "preparing" not in live and "0 / 5 (0%)" in live
    listing = operator.get(reverse("admin:botapp_broadcast_changelist")).content.decode()
    assert "0/5 (0%)" in listing
