"""Signed stream links (botapp/services/stream_links.py): only the link the bot made opens the
file, until it expires or the file's links are revoked; nothing of it can be changed."""

import string
from datetime import timedelta

import pytest

from botapp import clock
from botapp.models import BotSettings
from botapp.services.premium import premium_grant
from botapp.services.stream_links import (
    LinkState,
    stream_file_gone,
    stream_link_switched,
    stream_links_for,
    stream_links_offered,
    stream_links_revoke,
    stream_token_check,
    stream_token_make,
)
from tests.factories import StoredFileFactory, TelegramUserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _origin(settings):
    settings.STREAM_PUBLIC_URL = "https://files.example.com"


def token(stored, index=0, hours=1, user_id=None):
    return stream_token_make(stored=stored, index=index, expires_at=clock.now() + timedelta(hours=hours), user_id=user_id)


def test_a_link_opens_the_message_it_names_for_the_user_it_was_given_to():
    stored = StoredFileFactory(message_ids=[7, 8, 9])
    check = stream_token_check(token=token(stored, index=2, user_id=5_000_000_123))
    assert check.state is LinkState.OK
    assert (check.stored.pk, check.index, check.message_id, check.user_id) == (stored.pk, 2, 9, 5_000_000_123)


def test_the_link_names_no_row_number_and_no_guessable_id():
    stored = StoredFileFactory()
    t = token(stored)
    assert t.startswith(stored.share_id + ".")  # 72 random bits
    assert f".{stored.pk}." not in t.replace(stored.share_id, "")


def test_changing_any_character_of_a_link_breaks_it():
    stored = StoredFileFactory(message_ids=[7, 8])
    t = token(stored, user_id=42)
    alphabet = string.ascii_letters + string.digits + "-_."
    for i, ch in enumerate(t):
        other = alphabet[(alphabet.index(ch) + 1) % len(alphabet)]
        changed = t[:i] + other + t[i + 1 :]
        assert stream_token_check(token=changed).state is LinkState.BAD, (i, changed)


def test_a_link_made_for_one_user_cannot_be_made_into_another_users():
    stored = StoredFileFactory()
    t = token(stored, user_id=42)
    share, index, gen, exp, user, mac = t.split(".")
    assert user == "16"  # 42 in base 36
    assert stream_token_check(token=".".join([share, index, gen, exp, "17", mac])).state is LinkState.BAD
    assert stream_token_check(token=".".join([share, index, gen, exp, "", mac])).state is LinkState.BAD


def test_a_later_expiry_or_another_message_cannot_be_written_in():
    stored = StoredFileFactory(message_ids=[7, 8])
    t = token(stored)
    share, index, gen, exp, user, mac = t.split(".")
    later = format(int(exp, 36) + 3600, "x")  # any digits: the signature no longer matches
    assert stream_token_check(token=".".join([share, index, gen, later, user, mac])).state is LinkState.BAD
    assert stream_token_check(token=".".join([share, "1", gen, exp, user, mac])).state is LinkState.BAD


def test_a_link_signed_with_another_secret_is_refused(settings):
    stored = StoredFileFactory()
    t = token(stored)
    settings.SECRET_KEY = "another-secret-" * 4
    assert stream_token_check(token=t).state is LinkState.BAD


@pytest.mark.parametrize("text", ["", "x", "a.b.c.d.e.f", "../../etc/passwd", "A" * 500, "abc.0.0.0..AAAAAAAAAAAAAAAAAAAAAA"])
def test_anything_else_is_not_a_link(text):
    assert stream_token_check(token=text).state is LinkState.BAD


def test_a_link_stops_working_when_it_expires():
    stored = StoredFileFactory()
    t = token(stored, hours=2)
    clock.clock_advance(timedelta(hours=2) - timedelta(seconds=1))
    assert stream_token_check(token=t).state is LinkState.OK
    clock.clock_advance(timedelta(seconds=1))
    assert stream_token_check(token=t).state is LinkState.EXPIRED


def test_revoking_a_files_links_stops_them_and_no_other_files():
    stored, other = StoredFileFactory(), StoredFileFactory()
    old, others = token(stored), token(other)
    stream_links_revoke(stored=stored)
    assert stream_token_check(token=old).state is LinkState.REVOKED
    assert stream_token_check(token=others).state is LinkState.OK
    assert stream_token_check(token=token(stored)).state is LinkState.OK  # made after: works


def test_a_link_to_a_removed_file_is_gone():
    stored = StoredFileFactory()
    t = token(stored)
    stored.delete()
    assert stream_token_check(token=t).state is LinkState.GONE


def test_a_file_found_gone_is_recorded_once_and_revoking_forgets_it():
    stored = StoredFileFactory()
    stream_file_gone(stored=stored)
    stored.refresh_from_db()
    first = stored.stream_gone_at
    clock.clock_advance(timedelta(minutes=5))
    stream_file_gone(stored=stored)
    stored.refresh_from_db()
    assert stored.stream_gone_at == first is not None
    stream_links_revoke(stored=stored)
    assert stored.stream_gone_at is None


def test_links_are_on_the_streaming_origin_and_last_the_files_lifetime():
    conf = BotSettings.load()
    conf.stream_lifetime_hours = 24
    stored = StoredFileFactory(message_ids=[3, 4], stream_lifetime_hours=6)
    links = stream_links_for(stored=stored, conf=conf, user_id=77)
    assert [u.watch.split("/watch/")[0] for u in links] == ["https://files.example.com"] * 2
    checks = [stream_token_check(token=u.watch.rsplit("/", 1)[1]) for u in links]
    assert [c.message_id for c in checks] == [3, 4]
    assert {c.expires_at for c in checks} == {(clock.now() + timedelta(hours=6)).replace(microsecond=0)}
    stored.stream_lifetime_hours = None
    check = stream_token_check(token=stream_links_for(stored=stored, conf=conf, user_id=77)[0].watch.rsplit("/", 1)[1])
    assert check.expires_at == (clock.now() + timedelta(hours=24)).replace(microsecond=0)
    assert links[0].download.startswith("https://files.example.com/f/") and links[0].download.endswith("?download=1")


def test_who_is_offered_links_follows_the_file_then_the_settings(settings):
    conf = BotSettings.load()
    user = TelegramUserFactory()
    stored = StoredFileFactory()
    conf.stream_links = BotSettings.StreamLinks.OFF
    assert not stream_links_offered(stored=stored, conf=conf, user=user)
    conf.stream_links = BotSettings.StreamLinks.ON
    assert stream_links_offered(stored=stored, conf=conf, user=user)
    stored.stream_links = "off"
    assert not stream_links_offered(stored=stored, conf=conf, user=user)
    stored.stream_links = "premium"
    assert not stream_links_offered(stored=stored, conf=conf, user=user)
    premium_grant(user=user, duration=timedelta(days=1))
    user.refresh_from_db()
    assert stream_links_offered(stored=stored, conf=conf, user=user)
    settings.STREAM_PUBLIC_URL = ""  # no streaming origin: no links, whatever is set
    assert not stream_links_offered(stored=stored, conf=conf, user=user)


def test_a_premium_only_link_opens_while_its_user_is_premium_and_not_after():
    conf = BotSettings.load()
    conf.stream_links = BotSettings.StreamLinks.ON
    user = TelegramUserFactory()
    stored = StoredFileFactory(stream_links="premium")
    premium_grant(user=user, duration=timedelta(hours=1))
    given = stream_token_check(token=token(stored, hours=6, user_id=user.telegram_id))
    admins = stream_token_check(token=token(stored, hours=6))  # made in the console or the API
    assert stream_link_switched(check=given, conf=conf) is None
    clock.clock_advance(timedelta(hours=2))  # the plan ended; the link has not expired
    assert stream_link_switched(check=given, conf=conf) == "premium"
    assert stream_link_switched(check=admins, conf=conf) is None
    stranger = stream_token_check(token=token(stored, user_id=987_654_321))  # no such user (any more)
    assert stream_link_switched(check=stranger, conf=conf) == "premium"
    given.stored.stream_links = ""  # the file as Bot settings: on, for everyone
    assert stream_link_switched(check=given, conf=conf) is None
    conf.stream_links = BotSettings.StreamLinks.OFF
    assert stream_link_switched(check=given, conf=conf) == "off"
    admins.stored.stream_links = "on"  # the file's own choice wins over Bot settings
    assert stream_link_switched(check=admins, conf=conf) is None
    admins.stored.stream_links = "off"
    assert stream_link_switched(check=admins, conf=conf) == "off"
