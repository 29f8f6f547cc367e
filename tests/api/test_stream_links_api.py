"""Stored files' stream links through the API: listed per message, revoked with the write scope."""

import pytest

from botapp.services.stream_links import LinkState, stream_token_check
from tests.factories import StoredFileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def origin(settings):
    settings.STREAM_PUBLIC_URL = "https://files.example.com"


def test_the_api_lists_a_files_stream_links_and_revokes_them(api, origin, conf):
    stored = StoredFileFactory(message_ids=[5, 6])
    reader, writer = api("read"), api("write")
    body = reader.get(f"/api/v1/files/{stored.share_id}/").json()
    assert [u["watch"].startswith("https://files.example.com/watch/") for u in body["stream_urls"]] == [True, True]
    old = body["stream_urls"][0]["watch"].rsplit("/", 1)[1]
    assert reader.post(f"/api/v1/files/{stored.share_id}/revoke-stream-links/").status_code == 403
    revoked = writer.post(f"/api/v1/files/{stored.share_id}/revoke-stream-links/")
    assert revoked.status_code == 200
    assert stream_token_check(token=old).state is LinkState.REVOKED
    assert stream_token_check(token=revoked.json()["stream_urls"][0]["watch"].rsplit("/", 1)[1]).state is LinkState.OK


def test_the_api_gives_no_links_without_a_streaming_origin(api, conf, settings):
    settings.STREAM_PUBLIC_URL = ""
    stored = StoredFileFactory()
    assert api("read").get(f"/api/v1/files/{stored.share_id}/").json()["stream_urls"] == []
