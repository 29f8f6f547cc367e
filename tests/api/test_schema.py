"""The OpenAPI schema the API serves is valid OpenAPI 3, and the API keeps to it: schemathesis
generates requests from the served schema and sends them through the real WSGI application, with
the server's own validation (bounded: EXAMPLES per operation and mode, derandomized). Requests that
fit the schema get answers the schema documents; requests that do not (wrong types, numbers out of
range, missing fields) get a JSON 4xx; neither ever gets a server error."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from api.clients import apiclient_create
from tests.factories import BroadcastFactory, StoredFileFactory, TelegramUserFactory


def test_the_served_schema_is_valid_openapi_3_and_lists_every_endpoint(api):
    response = api("read").get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = response.json()
    validate_schema(schema)  # raises on anything that is not OpenAPI 3.0
    assert set(schema["paths"]) >= {
        "/api/v1/messages/",
        "/api/v1/messages/{id}/",
        "/api/v1/messages/{id}/cancel/",
        "/api/v1/users/",
        "/api/v1/users/{telegram_id}/",
        "/api/v1/scheduler/stats/",
        "/api/v1/files/",
        "/api/v1/broadcasts/",
        "/api/v1/broadcasts/{id}/start/",
        "/api/v1/broadcasts/{id}/cancel/",
    }
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert set(schema["paths"]["/api/v1/messages/"]["post"]["requestBody"]["content"]) == {
        "application/json",
        "multipart/form-data",
    }


TOKEN = {}


@pytest.fixture
def served_schema(db, settings, plain_http):
    settings.ALLOWED_HOSTS = ["*"]
    settings.STORAGE_CHANNEL_ID = "-1001000000001"
    _, TOKEN["value"] = apiclient_create(name="schemathesis", scopes="read,write", rate="100000/min")
    users = TelegramUserFactory.create_batch(2)
    BroadcastFactory(title="Draft")
    StoredFileFactory()
    TOKEN["users"] = [u.telegram_id for u in users]
    # Requests run in this test's transaction: the WSGI handler must not close its connection
    # after each one (Django's own test client does the same).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            "/api/v1/schema/?format=json",
            get_wsgi_application(),
            headers={"Authorization": f"Bearer {TOKEN['value']}"},
        )
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 25  # per operation and mode: about a minute for the whole API


def answers_json(ctx, response, case):
    """Every answer of the API is JSON, errors included (never the admin's HTML)."""
    content_type = {k.lower(): v for k, v in response.headers.items()}.get("content-type", [""])[0]
    if response.status_code != 204 and not content_type.startswith("application/json"):
        raise AssertionError(f"{case.method} {case.formatted_path}: {response.status_code} answered as {response.headers}")


@pytest.mark.slow
def test_the_api_keeps_to_its_schema(served_schema):
    # Each operation of the served schema in turn, a few generated requests each (schemathesis's
    # pytest loader for fixtures does not run under this pytest; its Python API does the same).
    operations = [result.ok() for result in served_schema.get_all_operations()]
    assert len(operations) >= 14
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
        def keeps_to_schema(case):
            response = case.call(headers={"Authorization": f"Bearer {TOKEN['value']}"})
            case.validate_response(response, checks=CHECKS)

        keeps_to_schema()


@pytest.mark.slow
def test_requests_outside_the_schema_get_a_json_4xx_never_a_500(served_schema):
    operations = [result.ok() for result in served_schema.get_all_operations()]
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
        def refused_cleanly(case):
            response = case.call(headers={"Authorization": f"Bearer {TOKEN['value']}"})
            case.validate_response(response, checks=[not_a_server_error, answers_json])

        refused_cleanly()
