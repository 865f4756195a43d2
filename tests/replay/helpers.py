"""Shared helpers for the replay tests: the golden fixtures, their key, what is stored."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.canonical import mace_v1
from replay.keys import key_add_hmac
from replay.models import Blob, Snapshot, Trace, VerificationKey
from tests.replay.fixtures.make_golden import (
    GOLDEN_DIR,
    GOLDEN_KEY_ID,
    GOLDEN_SECRET,
    golden_key_ring,
    golden_signer,
)

__all__ = [
    "GOLDEN_DIR",
    "GOLDEN_KEY_ID",
    "GOLDEN_SECRET",
    "canonical_report",
    "files_under",
    "golden",
    "golden_key_ring",
    "golden_report",
    "golden_signer",
    "register_golden_key",
    "stored_counts",
]

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def golden(name: str) -> Path:
    """The path of a checked-in golden fixture."""
    path = GOLDEN_DIR / name
    assert path.is_file(), f"missing golden fixture {name}: run make_golden.py"
    return path


def golden_report(name: str, mode: str) -> bytes:
    """The reviewed canonical report of golden trace `name` replayed in `mode`."""
    return golden(f"{name}.{mode}.report.json").read_bytes()


def canonical_report(report: dict[str, Any]) -> bytes:
    """A report in the same spelling as the `*.report.json` fixtures."""
    return mace_v1(report) + b"\n"


def register_golden_key() -> VerificationKey:
    return key_add_hmac(key_id=GOLDEN_KEY_ID, secret=GOLDEN_SECRET, valid_from=LONG_AGO)


def stored_counts() -> dict[str, int]:
    return {
        "traces": Trace.objects.count(),
        "blobs": Blob.objects.count(),
        "snapshots": Snapshot.objects.count(),
    }


def files_under(path: Path) -> list[str]:
    """Every file below `path` (relative names), empty if it does not exist."""
    if not path.exists():
        return []
    return sorted(
        str(Path(root, f).relative_to(path)) for root, _dirs, files in os.walk(path) for f in files
    )
