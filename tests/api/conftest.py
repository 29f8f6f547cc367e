import pytest
from rest_framework.test import APIClient

from api.clients import apiclient_create


@pytest.fixture
def api(db, plain_http):
    """api(scopes="read,write", rate="") -> a DRF test client sending a new client's Bearer token."""

    def make(scopes="read,write", rate="", name=None):
        record, token = apiclient_create(name=name or f"test-{scopes}-{rate}", scopes=scopes, rate=rate)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        client.record, client.token = record, token
        return client

    return make
