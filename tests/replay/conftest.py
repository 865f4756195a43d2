from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.replay.helpers import register_golden_key


@dataclass(frozen=True)
class VarDirs:
    var: Path
    tmp: Path  # where uploads are spooled (VAR_DIR/tmp)
    blobs: Path  # the blob storage's location


@pytest.fixture
def var_dirs(settings, tmp_path) -> VarDirs:
    """A private VAR_DIR and blob store, so a test can check that nothing was left behind."""
    var = tmp_path / "var"
    blobs = tmp_path / "blobs"
    var.mkdir()
    settings.VAR_DIR = var
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(blobs)},
        },
    }
    return VarDirs(var=var, tmp=var / "tmp", blobs=blobs)


@pytest.fixture
def golden_key(db):
    """The fixture-only HMAC key "golden" (a test vector, see fixtures/golden/KEY.md)."""
    return register_golden_key()
