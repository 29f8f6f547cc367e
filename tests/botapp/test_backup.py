"""The backup storage channel: admins' files are copied there, delivery falls back to the copy when
the storage channel's message is gone, and files without a copy are shown and backfilled."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from botapp.models import BotSettings, StoredFile
from botapp.services.delivery import FILE_GONE
from scheduler.jobs.registry import job_run
from tests.factories import StoredFileFactory
from tests.transcripts import printed, sandbox

pytestmark = pytest.mark.django_db

BACKUP = -1003000000001


@pytest.fixture
def box(telegram, bot, gateway, conf):
    return sandbox(telegram, bot, gateway, as_json=False)


def delivered(telegram, user_id):
    return [(m.media.kind, m.media.file, m.text) for m in telegram.bot_messages(user_id) if m.media]


def test_a_file_whose_primary_message_was_deleted_is_delivered_from_the_backup(box, telegram):
    out = printed(box, f"set backup_channel_id {BACKUP}", "1000 sends document report.pdf Price list")
    assert "Stored. Backup copy made." in out
    stored = StoredFile.objects.get()
    (copy_id,) = stored.backup_message_ids
    assert (stored.backup_chat_id, telegram.message(BACKUP, copy_id).media.file) == (BACKUP, "report.pdf")

    out = printed(box, f"delete post #{stored.message_ids[0]}", f"1001: /start {stored.share_id}")

    assert 'copy document "Price list"' in out
    assert FILE_GONE not in out
    assert delivered(telegram, 1001) == [("document", "report.pdf", "Price list")]


def test_a_lost_storage_channel_falls_back_to_the_backup_with_the_caption_template(box, telegram):
    printed(
        box,
        f"set backup_channel_id {BACKUP}",
        "set file_caption {filename}: {previouscaption}",
        "1000 sends video clip.mp4 Trailer",
    )
    stored = StoredFile.objects.get()

    out = printed(box, "storage channel lost", f"1001: /start {stored.share_id}")

    assert 'video "clip.mp4: Trailer"' in out
    assert delivered(telegram, 1001) == [("video", "clip.mp4", "clip.mp4: Trailer")]


def test_without_a_backup_a_deleted_file_gets_the_friendly_answer(box, telegram):
    printed(box, "1000 sends document report.pdf")
    stored = StoredFile.objects.get()
    assert stored.backup_chat_id is None  # no backup channel set

    out = printed(box, f"delete post #{stored.message_ids[0]}", f"1001: /start {stored.share_id}")
    assert FILE_GONE in out


def test_files_stored_before_the_backup_channel_are_backfilled_by_the_job(box, telegram):
    printed(box, "1000 sends document a.pdf", "post Chapter 1", "1000: /batch", "1000 forwards #2", "1000 forwards #2")
    assert StoredFile.objects.filter(backup_chat_id__isnull=True).count() == 2

    out = printed(box, f"set backup_channel_id {BACKUP}", "wait 1h")
    assert "job backfill_backups: 2 processed, 0 failed (0 file(s) still without a backup)" in out

    printed(box, "storage channel lost")
    for stored in StoredFile.objects.order_by("id"):
        printed(box, f"1001: /start {stored.share_id}")
    assert [m.text for m in telegram.bot_messages(1001) if m.text in ("", "Chapter 1")] == ["", "Chapter 1"]
    assert delivered(telegram, 1001) == [("document", "a.pdf", "")]


def test_a_backup_channel_the_bot_cannot_post_in_leaves_the_file_for_the_backfill(box, telegram, gateway):
    printed(box, f"set backup_channel_id {BACKUP}", "backup channel lost")
    printed(box, "1000 sends document a.pdf")
    reply = telegram.bot_messages(1000)[-1].text
    assert reply.startswith("Stored. Not copied to the backup channel (") and "the hourly backfill tries again" in reply
    assert job_run("backfill_backups", trigger="test", gateway=gateway).failed == 1

    telegram.create_channel(BACKUP)  # the bot is an admin there again
    outcome = job_run("backfill_backups", trigger="test", gateway=gateway)
    assert (outcome.processed, outcome.failed) == (1, 0)
    assert StoredFile.objects.get().backup_chat_id == BACKUP


def test_the_command_counts_files_without_a_backup(box, capsys):
    StoredFileFactory.create_batch(3)
    call_command("backfill_backups", "--dry-run")
    assert "backfill_backups: dry run: 0 processed" in capsys.readouterr().out  # no backup channel yet
    printed(box, f"set backup_channel_id {BACKUP}")
    call_command("backfill_backups", "--dry-run")
    assert "backfill_backups: dry run: 3 processed, 0 failed (files without a backup)" in capsys.readouterr().out


def test_backup_channel_setting_refuses_what_cannot_be_a_second_channel(box, settings):
    settings.STORAGE_CHANNEL_ID = "-1001000000001"
    assert not box.feed("set backup_channel_id 12345")
    assert not box.feed("set backup_channel_id -1001000000001")
    assert "That is the storage channel itself" in box.out.getvalue()
    assert BotSettings.load().backup_channel_id is None


@pytest.fixture
def operator(client, django_user_model, plain_http):
    client.force_login(django_user_model.objects.create_superuser("op", "op@example.com", "pw"))
    return client


def test_the_admin_lists_files_without_a_backup_and_queues_a_backup(operator, monkeypatch):
    from scheduler.tasks import backup_files

    queued = []
    monkeypatch.setattr(backup_files, "apply_async", lambda *args, **kwargs: queued.append((args, kwargs)))
    backed = StoredFileFactory(title="Backed up", backup_chat_id=BACKUP, backup_message_ids=[7])
    bare = StoredFileFactory(title="Bare")
    changelist = reverse("admin:botapp_storedfile_changelist")

    page = operator.get(changelist, {"backup": "no"}).content.decode()
    assert "Bare" in page and "Backed up" not in page

    selected = {"action": "back_up_now", "_selected_action": [backed.pk, bare.pk]}
    page = operator.post(changelist, selected, follow=True).content.decode()
    assert "Set a backup channel id in Bot settings first." in page
    assert queued == []

    conf = BotSettings.load()
    conf.backup_channel_id = BACKUP
    conf.save()
    page = operator.post(changelist, selected, follow=True).content.decode()
    assert "1 file(s) queued for the backup channel" in page
    assert queued == [((), {"args": [[bare.share_id]], "retry": False})]
