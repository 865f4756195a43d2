"""Pytest fixtures of the real-client harness; tests/otel/conftest.py imports them.

- `otel_clients`: the clients' virtualenv (openai, three instrumentations, the SDK's OTLP/HTTP
  exporters), built once under var/otel-clients/<hash of requirements.txt>/ (~20 s; a file lock
  keeps xdist workers from building it twice). When it cannot be built the test is skipped,
  except under CI=true, where a failed build fails.
- `fake_openai`, `otlp_capture`: the two local servers, fresh for each test.

Run a client with `harness.run_client` (any endpoint, e.g. the console's live server) or
`harness.converse` (fresh servers, the captures returned).
"""

from __future__ import annotations

import os

import pytest

from .capture import CaptureServer
from .fake_openai import FakeOpenAI
from .harness import ClientsUnavailable, ClientsVenv, ensure_clients_venv


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def otel_clients() -> ClientsVenv:
    try:
        return ensure_clients_venv()
    except ClientsUnavailable as error:
        if in_ci():
            pytest.fail(f"the OpenTelemetry clients' virtualenv could not be built: {error}")
        pytest.skip(f"the OpenTelemetry clients' virtualenv could not be built (no PyPI?): {error}")


@pytest.fixture
def fake_openai():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def otlp_capture(tmp_path):
    with CaptureServer(directory=tmp_path / "otlp-capture") as server:
        yield server
