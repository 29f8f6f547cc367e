"""Scheduled messages to chosen recipients: text, buttons and uploaded files, sent at their time by
the broadcast sender, each recipient's result recorded."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment, TelegramUser
from botapp.services.broadcasts import broadcast_cancel
from botapp.services.messages import AttachmentSpec, message_results, message_schedule, message_update
from botapp.services.outgoing import albums_of
from botapp.telegram.gateway import Media
from scheduler.jobs.registry import job_run
from tests.factories import TelegramUserFactory, met_user

HOUR = timedelta(hours=1)


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def cover():
    return AttachmentSpec("photo", upload=ContentFile(b"\xff\xd8 a jpeg" * 50, name="cover.jpg"))


def clip():
    return AttachmentSpec("video", upload=ContentFile(b"\x00\x00 an mp4" * 80, name="clip.mp4"))


def results(message):
    return {r["telegram_id"]: (r["status"], r["error"]) for r in message_results(message=message)}


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_two_uploaded_files_reach_three_listed_users_and_each_result_is_recorded(telegram, gateway, media_root):
    ann, bob, cat = (met_user(telegram) for _ in range(3))
    outsider = met_user(telegram)
    telegram.block(bob.telegram_id)  # blocked the bot: we learn it when sending
    message = message_schedule(
        send_at=clock.now() + HOUR,
        text="<b>New</b> this week",
        buttons="Shop | https://shop.example",
        user_ids=[ann.telegram_id, bob.telegram_id, cat.telegram_id],
        attachments=[cover(), clip()],
    )
    stored = [a.upload.name for a in message.attachments.all()]
    assert all(default_storage.exists(name) for name in stored)  # kept in Django's storage
    assert message.title == "New this week"  # the text's first line as users read it, for the console

    assert job_run("send_broadcasts", trigger="test", gateway=gateway).processed == 0  # not yet
    assert telegram.count("upload.SaveFilePart") == 0
    clock.clock_advance(HOUR)
    outcome = job_run("send_broadcasts", trigger="test", gateway=gateway)

    assert (outcome.processed, outcome.failed) == (3, 0)
    # Uploaded once, whatever the number of recipients; then sent by file id as one album.
    assert telegram.count("upload.SaveFilePart") == 2 and telegram.count("messages.UploadMedia") == 2
    assert telegram.count("messages.SendMultiMedia") == 3
    for user in (ann, cat):
        photo, video, text = telegram.bot_messages(user.telegram_id)
        assert (photo.file.kind, video.file.kind) == ("photo", "video") and photo.grouped_id == video.grouped_id
        assert (photo.file.name, video.file.name) == ("cover.jpg", "clip.mp4")
        # An album carries no buttons: the text and its button follow the files.
        assert text.text == "New this week" and [[b.text for b in row] for row in text.buttons] == [["Shop"]]
    assert telegram.bot_messages(bob.telegram_id) == [] and telegram.bot_messages(outsider.telegram_id) == []

    assert results(message) == {
        ann.telegram_id: ("sent", ""),
        bob.telegram_id: ("blocked", "blocked the bot"),
        cat.telegram_id: ("sent", ""),
    }
    message.refresh_from_db()
    assert (message.status, message.total, message.sent, message.blocked) == ("done", 3, 2, 1)
    assert TelegramUser.objects.get(pk=bob.pk).state == "blocked"
    assert all(a.file_id and a.uploaded_at for a in BroadcastAttachment.objects.filter(broadcast=message))


@pytest.mark.django_db(transaction=True)
def test_recipients_who_are_not_users_of_the_bot_are_recorded_without_a_send(telegram, gateway):
    ann = met_user(telegram)
    imported = TelegramUserFactory()  # known to us, no access hash, never started the bot: Telegram refuses
    gone = met_user(telegram)
    stopped = met_user(telegram, state="stopped")
    message = message_schedule(
        send_at=clock.now() + HOUR,
        text="Hello",
        user_ids=[ann.telegram_id, imported.telegram_id, gone.telegram_id, stopped.telegram_id],
    )
    gone.delete()  # the user's row went before the message started
    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    message.refresh_from_db()

    assert [r["telegram_id"] for r in message_results(message=message)] == message.recipient_ids  # in list order
    found = results(message)
    assert found[ann.telegram_id] == ("sent", "")
    assert found[imported.telegram_id][0] == "not_user" and "PEER_ID_INVALID" in found[imported.telegram_id][1]
    assert found[gone.telegram_id] == ("not_user", "not a user of the bot")
    assert found[stopped.telegram_id] == ("skipped", "user is stopped")
    assert (message.total, message.sent, message.not_users, message.skipped, message.status) == (4, 1, 2, 1, "done")


@pytest.mark.django_db(transaction=True)
def test_a_payload_audience_gets_it_and_nobody_else(telegram, gateway):
    spring = [met_user(telegram, start_payload="spring") for _ in range(2)]
    met_user(telegram, start_payload="spring", state="stopped")
    met_user(telegram, start_payload="autumn")
    message = message_schedule(
        send_at=clock.now() + HOUR, text="For spring", audience="payload", payload="spring", attachments=[cover()]
    )
    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert sorted(results(message)) == sorted(u.telegram_id for u in spring)
    for user in spring:
        (msg,) = telegram.bot_messages(user.telegram_id)  # one file: the text is its caption
        assert (msg.file.kind, msg.text) == ("photo", "For spring")


@pytest.mark.django_db(transaction=True)
def test_it_can_be_edited_or_cancelled_until_it_starts(telegram, gateway, media_root):
    ann, bob = met_user(telegram), met_user(telegram)
    message = message_schedule(send_at=clock.now() + HOUR, text="Draft", user_ids=[ann.telegram_id], attachments=[cover()])
    assert len([p for p in media_root.rglob("*") if p.is_file()]) == 1
    message_update(
        message=message,
        changes={
            "text": "Final",
            "user_ids": [ann.telegram_id, bob.telegram_id],
            "attachments": [],
            "send_at": clock.now() + 2 * HOUR,
        },
    )
    assert [p for p in media_root.rglob("*") if p.is_file()] == []  # the replaced file left the storage
    clock.clock_advance(HOUR)
    assert job_run("send_broadcasts", trigger="test", gateway=gateway).processed == 0  # moved to 2 h
    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert [m.text for m in telegram.bot_messages(ann.telegram_id)] == ["Final"]
    assert [m.text for m in telegram.bot_messages(bob.telegram_id)] == ["Final"]
    with pytest.raises(ValidationError, match="has not started"):
        message_update(message=message, changes={"text": "Too late"})

    cancelled = message_schedule(send_at=clock.now() + HOUR, text="Never", user_ids=[ann.telegram_id])
    broadcast_cancel(broadcast=cancelled)
    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)
    assert [m.text for m in telegram.bot_messages(ann.telegram_id)] == ["Final"]
    assert Broadcast.objects.get(pk=cancelled.pk).status == "cancelled"


@pytest.mark.django_db
def test_bad_input_is_refused_with_every_reason_by_field(media_root):
    known = TelegramUserFactory()
    huge = AttachmentSpec("photo", upload=ContentFile(b"x" * (10 * 1024 * 1024 + 1), name="huge.jpg"))
    with pytest.raises(ValidationError) as refused:
        message_schedule(
            send_at=clock.now() - HOUR,
            text="Hi",
            user_ids=[known.telegram_id, 424242, 434343],
            attachments=[huge, *[AttachmentSpec("document", file_id="abc")] * 50],
        )
    errors = refused.value.message_dict
    assert errors["send_at"] == ["This time is in the past."]
    assert errors["user_ids"] == ["Not users of the bot (they never wrote to it): 424242, 434343."]
    assert any("over Telegram's limit" in e and "huge.jpg" in e for e in errors["attachments"])
    assert any("At most 50 attachments" in e for e in errors["attachments"])
    assert not Broadcast.objects.exists() and not default_storage.exists("attachments")


def test_albums_group_what_telegram_lets_share_an_album():
    def kinds(*names):
        return [[m.kind for m in album] for album in albums_of(media=[Media(n, "id") for n in names])]

    assert kinds("photo", "video", "photo") == [["photo", "video", "photo"]]
    assert kinds("photo", "document", "document", "audio", "audio", "photo") == [
        ["photo"],
        ["document", "document"],
        ["audio", "audio"],
        ["photo"],
    ]
    assert [len(a) for a in albums_of(media=[Media("photo", "id")] * 23)] == [10, 10, 3]
