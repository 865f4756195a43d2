"""What the tests need from outside this repository, so that a clone alone passes `make test`.

Other projects' published files are read from the copies in `tests/fixtures/published/` (see
its NOTICE.md); ``SHARED`` is the folder they were copied from, beside a checkout (and always
in CI). Node.js, which runs the seeds' reference code, is optional outside CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "fixtures" / "published"
AHD_CHECKOUT = PUBLISHED / "ahd" / "checkout"
PAXMAN = PUBLISHED / "paxman"
SHARED = ROOT.parent / "shared" / "fixtures"


def shared_or_skip() -> Path:
    """``SHARED``, or a skip with the reason where it is absent (a clone alone); CI requires it,
    except in its stage that runs `make test` from a clean clone with no sibling folders
    (``REPLAY_CLONE_ALONE=1``, .ci/run), whose next stage requires it."""
    if not SHARED.is_dir():
        if os.environ.get("CI") and not os.environ.get("REPLAY_CLONE_ALONE"):
            raise AssertionError(f"CI requires the published fixtures at {SHARED}")
        pytest.skip(f"no {SHARED} beside this checkout (CI requires it)")
    return SHARED


def node_or_skip() -> str:
    """The path of ``node`` (the seeds' reference code runs under Node.js), or a skip with how to
    get it; CI requires it (a missing one fails there rather than skipping)."""
    import shutil

    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            raise AssertionError("CI requires Node.js (apt-get install nodejs)")
        pytest.skip("Node.js is not installed (apt-get install nodejs); CI requires it")
    return node
