"""Uploaded files kept where every process can read them: an S3-compatible bucket (django-storages,
here against moto's S3 server on this machine) beside the local MEDIA_ROOT; a file the worker
cannot read fails its message with a clear error on the message's page, instead of waiting forever."""

from datetime import timedelta

import boto3
import pytest
from django.core.files.base import ContentFile
from moto.server import ThreadedMotoServer

from botapp import clock
from botapp.models import Broadcast, BroadcastAttachment
from botapp.services.messages import AttachmentSpec, message_schedule
from scheduler.jobs.registry import job_run
from tests.botapp.test_doctor import doctor
from tests.factories import met_user
from tests.processes import free_port

HOUR = timedelta(hours=1)
BUCKET = "courier-media"


@pytest.fixture
def s3(settings):
    """A local S3 endpoint with an empty bucket; the default storage set up as settings.py does
    when S3_BUCKET is set."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="ak", aws_secret_access_key="sk", region_name="us-east-1"
    )
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": endpoint,
                "region_name": "us-east-1",
                "access_key": "ak",
                "secret_key": "sk",
                "location": "media",
                "default_acl": None,
                "file_overwrite": False,
            },
        },
    }
    yield client
    server.stop()


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def cover():
    return AttachmentSpec("photo", upload=ContentFile(b"\xff\xd8 a jpeg" * 50, name="cover.jpg"))


def scheduled_with_a_file(telegram):
    user = met_user(telegram)
    message = message_schedule(send_at=clock.now() + HOUR, text="With a file", user_ids=[user.telegram_id], attachments=[cover()])
    return user, message


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_a_file_uploaded_to_the_bucket_reaches_the_user(telegram, gateway, s3):
    user, message = scheduled_with_a_file(telegram)
    (attachment,) = message.attachments.all()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == [f"media/{attachment.upload.name}"]  # in the bucket, under S3_PREFIX

    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)  # a worker: it reads the file from the bucket

    (photo,) = telegram.bot_messages(user.telegram_id)
    assert (photo.file.kind, photo.file.name, photo.text) == ("photo", "cover.jpg", "With a file")
    message.refresh_from_db()
    assert message.status == Broadcast.Status.DONE


@pytest.mark.django_db(transaction=True)
def test_a_file_missing_from_the_bucket_fails_its_message_with_the_reason(telegram, gateway, s3, admin_client):
    user, message = scheduled_with_a_file(telegram)
    (attachment,) = message.attachments.all()
    s3.delete_object(Bucket=BUCKET, Key=f"media/{attachment.upload.name}")  # another bucket, a lifecycle rule ...

    clock.clock_advance(HOUR)
    job_run("send_broadcasts", trigger="test", gateway=gateway)

    message.refresh_from_db()
    attachment.refresh_from_db()
    assert message.status == Broadcast.Status.CANCELLED
    assert attachment.error == (
        f"the worker cannot read {attachment.upload.name} from S3Storage {BUCKET} (not found): every process needs "
        "the same storage (object storage across hosts; docs/operating.md)"
    )
    assert telegram.bot_messages(user.telegram_id) == []
    page = admin_client.get(f"/botapp/broadcast/{message.pk}/change/", secure=True)
    assert attachment.error in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_file_the_worker_cannot_find_in_media_root_fails_its_message_at_once(telegram, gateway, media_root):
    user, message = scheduled_with_a_file(telegram)
    (attachment,) = message.attachments.all()
    (media_root / attachment.upload.name).unlink()  # the worker's MEDIA_ROOT is not the web's

    clock.clock_advance(HOUR)
    outcome = job_run("send_broadcasts", trigger="test", gateway=gateway)

    message.refresh_from_db()
    assert message.status == Broadcast.Status.CANCELLED  # not retried every minute for ever
    assert "files uploaded: 0 (0 to retry, 1 refused)" in outcome.detail
    error = BroadcastAttachment.objects.get(pk=attachment.pk).error
    assert error.startswith(f"the worker cannot read {attachment.upload.name} from FileSystemStorage {media_root} (not found)")


def test_the_doctor_writes_and_reads_the_bucket(s3, db):
    code, lines = doctor("media")

    assert code == 0, lines
    assert lines["storage"] == ("✔", f"S3Storage {BUCKET}: writable and readable from this host")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)  # the probe is gone


def test_the_doctor_names_a_bucket_it_cannot_reach(s3, settings, db):
    settings.STORAGES["default"]["OPTIONS"]["bucket_name"] = "no-such-bucket"
    settings.STORAGES = {**settings.STORAGES}  # tell Django the storages changed

    code, lines = doctor("media")

    assert code == 1
    assert lines["storage"][0] == "✘" and "NoSuchBucket" in lines["storage"][1]
