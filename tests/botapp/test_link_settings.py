"""A link's own settings (protect content, auto-delete minutes, skip verification, expiry) win over
Bot settings, as a user of the sandbox sees them."""

from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import PendingDeletion, StoredFile
from tests.transcripts import printed, sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(telegram, bot, gateway, conf):
    return sandbox(telegram, bot, gateway, as_json=False)


@pytest.fixture
def link(box):
    """A document an admin stored, with Bot settings: verification on, auto-delete after 30 minutes."""
    printed(box, "set verification_enabled yes", "set auto_delete_minutes 30", "1000 sends document report.pdf Report")
    return StoredFile.objects.get().share_id


def test_bot_settings_apply_when_the_link_has_none_of_its_own(box, link):
    out = printed(box, f"1001: /start {link}")
    assert "[✅ Verify | ℹ️ How to verify]" in out or "[✅ Verify]" in out
    assert "copy document" not in out


def test_skip_verification_delivers_without_verify(box, link, telegram):
    out = printed(box, f"link {link} skip_verification yes", f"1001: /start {link}")

    assert f"link {link}: skip_verification saved" in out
    assert "Verify" not in out
    assert 'copy document "Report"' in out


def test_a_link_s_auto_delete_minutes_and_protection_win(box, link, telegram):
    out = printed(
        box,
        "set protect_content yes",
        f"link {link} skip_verification yes",
        f"link {link} auto_delete_minutes 5",
        f"link {link} protect_content no",
        f"1001: /start {link}",
    )

    assert "deleted in 5 min" in out
    (copy,) = [m for m in telegram.bot_messages(1001) if m.media]
    assert not copy.protect  # Bot settings protect; this link says no
    assert abs(PendingDeletion.objects.get().delete_at - clock.now() - timedelta(minutes=5)) < timedelta(seconds=5)
    out = printed(box, "wait 6m")
    assert "-> 1001 delete" in out

    printed(box, f"link {link} auto_delete_minutes 0", f"link {link} protect_content default", f"1002: /start {link}")
    (copy,) = [m for m in telegram.bot_messages(1002) if m.media]
    assert copy.protect
    assert not PendingDeletion.objects.filter(chat_id=1002).exists()  # 0: never deleted


def test_an_expired_link_gets_a_friendly_answer(box, link):
    out = printed(box, f"link {link} skip_verification yes", f"link {link} expires_at 2h", f"1001: /start {link}")
    assert 'copy document "Report"' in out

    out = printed(box, "wait 2h", f"1001: /start {link}")
    assert '"This link has expired. Ask whoever shared it for a new one."' in out
    assert "copy" not in out

    printed(box, f"link {link} expires_at never")
    assert 'copy document "Report"' in printed(box, f"1001: /start {link}")


def test_a_link_cannot_auto_delete_beyond_telegram_s_window(box, link):
    assert not box.feed(f"link {link} auto_delete_minutes 3000")
    assert "Ensure this value is less than or equal to 2880" in box.out.getvalue()
    assert StoredFile.objects.get().auto_delete_minutes is None


def test_sandbox_edits_refuse_what_the_forms_refuse(box, link):
    assert not box.feed("set file_caption " + "x" * 1100)
    assert "Telegram allows 1024" in box.out.getvalue()
    assert not box.feed("set no_such_field 1")
    assert not box.feed("link nope skip_verification yes")
    assert not box.feed(f"link {link} expires_at tomorrow")
    assert "span from now" in box.out.getvalue()
