"""Schemathesis against the OpenAPI schema, in process: no generated request is a server error.

Bounded (a fixed number of examples per operation, derandomised so CI is repeatable). The
client holds a token of a user with every role a token can carry (strong roles need a second
factor, so admin and council answers are exercised as refusals).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.console.personas import make_user

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 20


def _schema() -> schemathesis.BaseSchema:
    # Generated in process from the same views (Django is set up before collection); the
    # lazy fixture loader of Schemathesis does not work with this pytest.
    from drf_spectacular.generators import SchemaGenerator

    return schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))


schema = _schema()


@pytest.fixture(autouse=True)
def world(replayed):
    """Something for the generated requests to find: traces, replays, a request, a halt."""
    from governance.services import force_continue_request_file
    from tests.console.personas import persona

    run = replayed("diverged")
    replayed("broken_chain")
    force_continue_request_file(run=run, actor=persona("alice"), reason="schemathesis")


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """As Django's test client does: a request must not close the test's transaction."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(db):
    from governance.services import api_token_create

    user = make_user("taylor", "viewer", "auditor", "operator", "legal", "admin", "council")
    return api_token_create(user=user)[1]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
def test_no_request_the_schema_allows_is_a_server_error(case, token):
    from config.wsgi import application

    response = case.call(app=application, headers={"Authorization": f"Token {token}"})
    case.validate_response(response, checks=[not_a_server_error])
