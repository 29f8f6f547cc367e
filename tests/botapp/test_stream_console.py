"""Stream links where operators find them: the file's console page (with "Revoke stream links")
and Bot settings (the API's: tests/api/test_stream_links_api.py)."""

import re

import pytest
from django.urls import reverse

from botapp.services.stream_links import LinkState, stream_token_check
from tests.factories import StoredFileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def origin(settings):
    settings.STREAM_PUBLIC_URL = "https://files.example.com"


def tokens(html: str) -> list[str]:
    return re.findall(r'href="https://files\.example\.com/watch/([^"]+)"', html)


def test_the_files_page_shows_a_signed_link_per_message_on_the_streaming_origin(admin_client, plain_http, origin, conf):
    stored = StoredFileFactory(message_ids=[5, 6])
    page = admin_client.get(reverse("admin:botapp_storedfile_change", args=[stored.pk])).content.decode()
    found = tokens(page)
    assert [stream_token_check(token=t).message_id for t in found] == [5, 6]
    assert all(stream_token_check(token=t).user_id is None for t in found)
    assert "https://files.example.com/f/" in page and "Revoke stream links" in page


def test_revoking_on_the_files_page_asks_first_then_ends_its_links(admin_client, plain_http, origin, conf):
    stored = StoredFileFactory()
    old = tokens(admin_client.get(reverse("admin:botapp_storedfile_change", args=[stored.pk])).content.decode())[0]
    url = reverse("admin:botapp_storedfile_revoke_stream_links", args=[stored.pk])
    confirm = admin_client.get(url)
    assert confirm.status_code == 200 and b"stops working at once" in confirm.content
    assert stream_token_check(token=old).state is LinkState.OK  # asking changes nothing
    done = admin_client.post(url, follow=True)
    assert b"no longer works" in done.content
    assert stream_token_check(token=old).state is LinkState.REVOKED
    assert stream_token_check(token=tokens(done.content.decode())[0]).state is LinkState.OK


def test_the_page_says_when_the_file_was_found_gone_and_without_an_origin_how_to_get_links(
    admin_client, plain_http, settings, conf
):
    stored = StoredFileFactory()
    settings.STREAM_PUBLIC_URL = ""
    page = admin_client.get(reverse("admin:botapp_storedfile_change", args=[stored.pk])).content.decode()
    assert "Set STREAM_PUBLIC_URL" in page
    settings.STREAM_PUBLIC_URL = "https://files.example.com"
    stored.stream_gone_at = stored.created_at
    stored.save()
    page = admin_client.get(reverse("admin:botapp_storedfile_change", args=[stored.pk])).content.decode()
    assert "Gone: the streaming process found" in page


def test_bot_settings_and_the_file_form_carry_the_stream_settings(admin_client, plain_http, conf):
    settings_page = admin_client.get(reverse("admin:botapp_botsettings_change", args=[1])).content.decode()
    assert 'name="stream_links"' in settings_page and 'name="stream_lifetime_hours"' in settings_page
    stored = StoredFileFactory()
    file_page = admin_client.get(reverse("admin:botapp_storedfile_change", args=[stored.pk])).content.decode()
    assert 'name="stream_links"' in file_page and 'name="stream_lifetime_hours"' in file_page
