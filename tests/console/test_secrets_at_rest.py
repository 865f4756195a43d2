"""Secrets at rest: every file under var/ is owner-only, and authenticated answers are never
cached (`Cache-Control: no-store`)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.console.conftest import trace_bytes
from tests.console.personas import persona, sign_in

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]

# Loads the real settings on a fresh var/, opens the SQLite database in WAL mode and writes to
# it, and reports the mode of everything under var/ while the connection (so -wal and -shm)
# is still open.
_PROBE = """
import json, os, stat, django
django.setup()
from django.db import connection
with connection.cursor() as cur:
    cur.execute("CREATE TABLE probe (x integer)")
    cur.execute("INSERT INTO probe VALUES (1)")
    root = os.environ["REPLAY_VAR_DIR"]
    modes = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files + ([] if base != root else ["."]):
            path = os.path.join(base, name)
            modes[os.path.relpath(path, root)] = oct(stat.S_IMODE(os.stat(path).st_mode))
    print(json.dumps(modes))
"""


def _probe(var_dir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": str(var_dir),
    }
    for name in (
        "DATABASE_URL",
        "DJANGO_SECRET_KEY",
        "DJANGO_SECRET_KEY_FILE",
        "REPLAY_KEY_ENCRYPTION_KEY",
        "REPLAY_KEY_ENCRYPTION_KEY_FILE",
        "DJANGO_DEBUG",
    ):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_fresh_var_directory_and_everything_in_it_is_owner_only(tmp_path):
    var_dir = tmp_path / "fresh-var"
    modes = _probe(var_dir)
    assert modes == {
        ".": "0o700",
        ".secret_key": "0o600",
        ".key_encryption_key": "0o600",
        "db.sqlite3": "0o600",
        "db.sqlite3-wal": "0o600",
        "db.sqlite3-shm": "0o600",
        "staticfiles": "0o700",
    }


def test_it_tightens_a_world_readable_var_directory_left_by_an_older_version(tmp_path):
    var_dir = tmp_path / "old-var"
    var_dir.mkdir(mode=0o755)
    os.chmod(var_dir, 0o755)  # noqa: S103 - the world-readable var/ of an older version
    for name in ("db.sqlite3", ".secret_key", ".key_encryption_key"):
        (var_dir / name).write_text("" if name == "db.sqlite3" else "an old secret")
        os.chmod(var_dir / name, 0o644)
    modes = _probe(var_dir)
    assert {name: modes[name] for name in (".", "db.sqlite3", ".secret_key")} == {
        ".": "0o700",
        "db.sqlite3": "0o600",
        ".secret_key": "0o600",
    }
    assert modes[".key_encryption_key"] == "0o600"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_stored_blobs_and_their_directories_are_owner_only(as_persona, trace_key, tmp_path):
    response = as_persona("alice").post(
        "/api/traces/upload/?filename=ok.trace.json",
        trace_bytes("ok"),
        content_type="application/octet-stream",
    )
    assert response.status_code == 201
    sha = response.json()["sha256"]
    blob = tmp_path / "blobs" / sha[:2] / sha[2:4] / sha
    assert _mode(blob) == 0o600
    assert _mode(blob.parent) == 0o700
    assert _mode(blob.parent.parent) == 0o700
    assert _mode(tmp_path / "blobs") == 0o700
    assert _mode(tmp_path / "var" / "tmp") == 0o700


def test_the_demo_upload_files_are_owner_only(settings, db, trace_key):
    from console.demo import demo_upload_files_write

    directory = demo_upload_files_write()
    assert _mode(directory) == 0o700
    files = list(directory.iterdir())
    assert files
    assert {_mode(f) for f in files} == {0o600}


class TestNoStore:
    def test_an_authenticated_page_is_never_stored(self, client):
        sign_in(client, persona("alice"))
        response = client.get("/traces/")
        assert response.status_code == 200
        assert "no-store" in response["Cache-Control"]
        assert "private" in response["Cache-Control"]

    def test_an_authenticated_htmx_partial_is_never_stored(self, client):
        sign_in(client, persona("alice"))
        response = client.get("/traces/", HTTP_HX_REQUEST="true")
        assert "no-store" in response["Cache-Control"]

    def test_an_api_answer_is_never_stored_session_or_refusal(self, client):
        sign_in(client, persona("alice"))
        assert "no-store" in client.get("/api/traces/")["Cache-Control"]
        anonymous = Client().get("/api/traces/")
        assert anonymous.status_code == 401
        assert "no-store" in anonymous["Cache-Control"]

    def test_the_sign_in_page_is_never_stored(self, client):
        assert "no-store" in client.get("/accounts/login/")["Cache-Control"]
