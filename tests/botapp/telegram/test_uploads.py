"""Uploading files once and sending albums: kurigram's real upload (upload.saveFilePart /
saveBigFilePart, messages.uploadMedia) and sendMultiMedia against the in-memory Telegram."""

import hashlib
import io

import pytest

from botapp.telegram.gateway import BadRequest, Media
from botapp.telegram.limits import UPLOAD_BIG_FILE
from tests.factories import met_user

pytestmark = pytest.mark.django_db

ALICE = 1001


def test_an_uploaded_file_is_sent_by_the_file_id_telegram_returned(telegram, gateway):
    met_user(telegram, telegram_id=ALICE)
    data = b"%PDF-1.4 price list" * 100
    file_id = gateway.upload("document", io.BytesIO(data), file_name="prices.pdf", mime_type="application/pdf")

    assert telegram.count("upload.SaveFilePart") == 1 and telegram.count("messages.UploadMedia") == 1
    assert telegram.bot_messages(ALICE) == []  # uploading sends nothing
    before = len(telegram.calls)
    gateway.send_media(ALICE, Media("document", file_id), caption="Prices")
    assert telegram.methods_called(before) == ["messages.SendMedia"]  # no upload again
    (msg,) = telegram.bot_messages(ALICE)
    assert msg.file.name == "prices.pdf" and msg.file.mime_type == "application/pdf"
    assert msg.file.sha256 == hashlib.sha256(data).hexdigest() and msg.text == "Prices"


def test_a_big_file_goes_in_big_parts_and_a_photo_comes_back_as_a_photo(telegram, gateway):
    met_user(telegram, telegram_id=ALICE)
    big = bytes(range(256)) * (UPLOAD_BIG_FILE // 256 + 1000)  # just over 10 MiB
    video = gateway.upload("video", io.BytesIO(big), file_name="clip.mp4", mime_type="video/mp4")
    assert telegram.count("upload.SaveBigFilePart") == 21 and telegram.count("upload.SaveFilePart") == 0
    photo = gateway.upload("photo", io.BytesIO(b"\xff\xd8 jpeg"), file_name="a.jpg")

    gateway.send_album(ALICE, [Media("photo", photo), Media("video", video)], caption="<b>Both</b>")
    first, second = telegram.bot_messages(ALICE)
    assert (first.file.kind, second.file.kind) == ("photo", "video")
    assert first.grouped_id == second.grouped_id is not None
    assert (first.text, second.text) == ("Both", "") and first.entities
    assert second.file.size == len(big) and second.file.sha256 == hashlib.sha256(big).hexdigest()
    assert telegram.count("messages.SendMultiMedia") == 1


def test_telegram_refuses_albums_it_does_not_allow(telegram, gateway):
    met_user(telegram, telegram_id=ALICE)
    photo, document = telegram.file_id("photo", "a.jpg"), telegram.file_id("document", "b.pdf")
    with pytest.raises(BadRequest):
        gateway.send_album(ALICE, [Media("photo", photo), Media("document", document)])
    with pytest.raises(BadRequest):
        gateway.send_album(ALICE, [Media("photo", telegram.file_id("photo")) for _ in range(11)])
    assert telegram.bot_messages(ALICE) == []


def test_a_photo_over_telegrams_limit_is_refused(telegram, gateway):
    with pytest.raises(BadRequest, match="PHOTO_SAVE_FILE_INVALID"):
        gateway.upload("photo", io.BytesIO(b"x" * (10 * 1024 * 1024 + 1)), file_name="huge.jpg")
