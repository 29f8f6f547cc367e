"""Owner-only mode: only admins and listed users are answered; /authorize, /unauthorize; the CSV;
switching the mode changes no stored data."""

import pytest
from django.forms.models import model_to_dict

from botapp.models import AdminCommand, AllowedUser, AuditEntry, PendingDeletion, TelegramUser
from botapp.services.allow_list import allow_list_csv_read
from botapp.telegram.gateway import TgUser
from tests.conftest import ADMIN

pytestmark = pytest.mark.django_db

ADMIN_USER = TgUser(id=ADMIN, first_name="Admin")
BOB = TgUser(id=2002, first_name="Bob")


@pytest.fixture
def owner_only(conf):
    conf.allow_list_enabled = True
    conf.allow_list_text = "Private bot, {first_name}: ask the owner."
    conf.save()
    return conf


def sent(events) -> list[str]:
    return [e.text for e in events if e.action in ("send", "copy")]


def test_in_owner_only_mode_a_stranger_gets_the_text_and_nothing_else_happens(chat, alice, owner_only, stored):
    assert sent(chat(alice, f"/start {stored.share_id}")) == ["Private bot, Alice: ask the owner."]
    assert sent(chat(alice, "/help")) == ["Private bot, Alice: ask the owner."]
    assert not TelegramUser.objects.filter(telegram_id=alice.id).exists()  # nothing stored of them
    assert not PendingDeletion.objects.exists()


def test_in_owner_only_mode_listed_users_and_admins_are_answered(chat, alice, owner_only, stored):
    AllowedUser.objects.create(telegram_id=alice.id)
    assert sent(chat(alice, f"/start {stored.share_id}"))[:2] == ["Report", "Read me"]
    assert sent(chat(ADMIN_USER, f"/start {stored.share_id}"))[:2] == ["Report", "Read me"]
    assert sent(chat(BOB, "/help")) == ["Private bot, Bob: ask the owner."]


def test_authorize_and_unauthorize_from_an_admin(chat, alice, owner_only):
    (reply,) = sent(chat(ADMIN_USER, f"/authorize {alice.id} {BOB.id}"))
    assert reply.startswith("✅ 2 added to the allow-list (0 were on it already). Owner-only mode is on.")
    assert sent(chat(alice, "/help")) != ["Private bot, Alice: ask the owner."]
    (reply,) = sent(chat(ADMIN_USER, f"/unauthorize {alice.id}"))
    assert reply == "1 taken off the allow-list (0 were not on it)."
    assert sent(chat(alice, "/help")) == ["Private bot, Alice: ask the owner."]
    assert list(AllowedUser.objects.values_list("telegram_id", flat=True)) == [BOB.id]
    assert list(AdminCommand.objects.order_by("id").values_list("command", "ok")) == [("authorize", True), ("unauthorize", True)]
    assert AuditEntry.objects.filter(action="allowlist.add", actor=f"telegram:{ADMIN}").exists()


def test_authorize_refuses_bad_ids_and_changes_nothing_and_is_for_admins_only(chat, alice, conf):
    (reply,) = sent(chat(ADMIN_USER, f"/authorize {BOB.id} bob"))
    assert "'bob' is not a Telegram user id" in reply and "Nothing was changed." in reply
    (reply,) = sent(chat(ADMIN_USER, "/authorize"))
    assert reply.startswith("Usage: /authorize")
    (reply,) = sent(chat(alice, f"/authorize {alice.id}"))
    assert reply.startswith("I did not understand that.")
    assert not AllowedUser.objects.exists()


def test_switching_owner_only_mode_on_and_off_changes_no_stored_data(chat, alice, conf, stored):
    chat(alice, f"/start {stored.share_id}")
    AllowedUser.objects.create(telegram_id=BOB.id, note="friend")

    def stored_data():
        return (
            [model_to_dict(u) for u in TelegramUser.objects.order_by("id")],
            list(AllowedUser.objects.values_list("telegram_id", "note")),
            PendingDeletion.objects.count(),
        )

    before = stored_data()
    for on in (True, False):
        conf.allow_list_enabled = on
        conf.save()
        assert stored_data() == before
    assert sent(chat(alice, f"/start {stored.share_id}"))[:2] == ["Report", "Read me"]  # off: answered again


def test_a_csv_of_ids_is_read_with_its_header_and_a_bad_row_adds_nothing():
    assert allow_list_csv_read(data=b"\xef\xbb\xbftelegram_id,name\n1001,Alice\n\n2002,Bob\n") == [1001, 2002]
    with pytest.raises(ValueError, match=r"row 3: 'x' is not a Telegram user id.*row 4: 0 is not"):
        allow_list_csv_read(data=b"id\n1001\nx\n0\n")
    with pytest.raises(ValueError, match="no Telegram user ids"):
        allow_list_csv_read(data=b"id\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        allow_list_csv_read(data=b"\xff\xfe1\x00")
