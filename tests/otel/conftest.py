"""Fixtures of the OpenTelemetry tests: the real clients' harness (its virtualenv, the fake
OpenAI server, the capture server) and the console's per-test blob store, server-key cache
and personas (the receiver's tests)."""

import pytest
from django.test import Client

from governance.services import api_token_create
from tests.console.conftest import (  # noqa: F401 - fixtures, found by pytest by name
    _fresh_server_key_cache,
    _private_storage,
    as_persona,
)
from tests.console.personas import persona
from tests.otel.clients.fixtures import fake_openai, otel_clients, otlp_capture  # noqa: F401


@pytest.fixture
def send(django_capture_on_commit_callbacks):
    """``send(name)``: POST one captured fixture body to the receiver as alice's exporter
    would (protobuf or JSON by its name); what it queues on commit runs (tasks inline)."""
    from tests.otel.helpers import FIXTURES

    _row, token = api_token_create(user=persona("alice"))

    def post(name: str) -> int:
        content_type = "application/json" if name.endswith(".json") else "application/x-protobuf"
        with django_capture_on_commit_callbacks(execute=True):
            response = Client().post(
                "/otlp/v1/traces",
                (FIXTURES / name).read_bytes(),
                content_type=content_type,
                HTTP_AUTHORIZATION=f"Bearer {token}",
            )
        assert response.status_code == 200, response.content
        return response.status_code

    return post
