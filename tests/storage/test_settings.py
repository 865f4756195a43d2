"""The S3 settings as the environment gives them (no server needed): the append-only storage
with the application's keys, and a separate retention storage only when its keys are set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT = (
    "import json; from django.conf import settings as s; "
    "print(json.dumps({k: v for k, v in s.STORAGES.items() if k.startswith('blobs')}))"
)


def _storages(tmp_path: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("REPLAY_S3_", "DATABASE_URL"))}
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {PRINT}"],
        cwd=ROOT,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "REPLAY_VAR_DIR": str(tmp_path / "var"),
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_without_a_bucket_the_blobs_are_files(tmp_path):
    assert _storages(tmp_path) == {
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "var" / "blobs")},
        }
    }


def test_a_bucket_with_the_application_and_retention_keys(tmp_path):
    secret = tmp_path / "app_secret"
    secret.write_text("app-secret\n")
    found = _storages(
        tmp_path,
        REPLAY_S3_BUCKET="replay-blobs",
        REPLAY_S3_ENDPOINT_URL="http://127.0.0.1:8333",
        REPLAY_S3_ADDRESSING_STYLE="path",
        REPLAY_S3_ACCESS_KEY_ID="app-key",
        REPLAY_S3_SECRET_ACCESS_KEY_FILE=str(secret),
    )
    app = {
        "BACKEND": "console.blobstore.AppendOnlyS3Storage",
        "OPTIONS": {
            "bucket_name": "replay-blobs",
            "endpoint_url": "http://127.0.0.1:8333",
            "region_name": None,
            "access_key": "app-key",
            "secret_key": "app-secret",
            "addressing_style": "path",
            "file_overwrite": False,
        },
    }
    assert found == {"blobs": app}  # no deleting identity: retention uses the app's keys
    found = _storages(
        tmp_path,
        REPLAY_S3_BUCKET="replay-blobs",
        REPLAY_S3_ENDPOINT_URL="http://127.0.0.1:8333",
        REPLAY_S3_ADDRESSING_STYLE="path",
        REPLAY_S3_ACCESS_KEY_ID="app-key",
        REPLAY_S3_SECRET_ACCESS_KEY_FILE=str(secret),
        REPLAY_S3_RETENTION_ACCESS_KEY_ID="retention-key",
        REPLAY_S3_RETENTION_SECRET_ACCESS_KEY="retention-secret",
    )
    retention = {
        **app,
        "OPTIONS": {
            **app["OPTIONS"],
            "access_key": "retention-key",
            "secret_key": "retention-secret",
        },
    }
    assert found == {"blobs": app, "blobs_retention": retention}
