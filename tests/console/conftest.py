from __future__ import annotations

import pytest
from django.test import Client

from tests.console.personas import client_for


@pytest.fixture
def as_persona(db):
    """`as_persona("alice")` gives a Django test client signed in as alice."""

    def make(name: str, **extra: str) -> Client:
        return client_for(name, **extra)

    return make


@pytest.fixture
def htmx_headers():
    return {"HTTP_HX_REQUEST": "true"}
