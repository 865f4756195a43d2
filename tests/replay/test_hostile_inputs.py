"""Nothing hostile gets in through an AHD sidecar's input paths: every token or brief path is
read inside the checkout (links resolved), only as a regular file, within a size limit, and a
report never says anything about a file outside (its existence, hash or YAML errors).

Each attack goes through `manage.py verify`; the upload page and the verify endpoint are in
tests/console/test_hostile_uploads.py. The checkout is a copy of replay/demo_ahd."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from core.errors import INTEGRITY_FAILURE, MALFORMED_TRACE, MISSING_SNAPSHOT

DEMO_AHD = Path(__file__).resolve().parents[2] / "replay" / "demo_ahd"
SWISS = "2026-04-21-swiss"
SWISS_TOKEN = "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1"
#: what the attacker wants to learn: the file beside the checkout, and its hash
SECRET = b"django-insecure-the-server-secret-key\n"
SECRET_HASH = hashlib.sha256(SECRET).hexdigest()

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("var_dirs")]


@pytest.fixture
def checkout(tmp_path) -> Path:
    dst = tmp_path / "srv" / "ahd"
    shutil.copytree(DEMO_AHD, dst)
    (tmp_path / "srv" / "secret_key").write_bytes(SECRET)
    (tmp_path / "srv" / "broken.yml").write_text("a: 1\na: 2\n")
    return dst


def with_token(checkout: Path, token_path: str, brief: bool = False) -> Path:
    sidecar = checkout / "docs" / "evals" / f"{SWISS}.replay.json"
    doc = json.loads(sidecar.read_bytes())
    doc["token"]["path"] = token_path
    if not brief:
        doc["brief"] = None
    sidecar.write_text(json.dumps(doc, indent=2))
    return sidecar


def verify_json(sidecar: Path, *args: str) -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(sidecar), "--json", *args, stdout=out)
    assert exited.value.code == 1
    return json.loads(out.getvalue()), out.getvalue()


def token_check(report: dict[str, Any]) -> str:
    return next(c["detail"] for c in report["checks"] if c["name"] == "token")


def test_it_refuses_a_relative_token_path_that_climbs_out_of_the_checkout(checkout):
    sidecar = with_token(checkout, "../secret_key")

    report, text = verify_json(sidecar)

    assert (report["status"], report["error_code"]) == ("refused", MALFORMED_TRACE)
    assert report["message"] == (
        "token: the recorded path ../secret_key is outside the checkout; not read"
    )
    assert token_check(report) == (
        "the recorded path ../secret_key is outside the checkout; not read; "
        f"expected {SWISS_TOKEN}, actual <none>"
    )
    assert SECRET_HASH not in text


def test_it_answers_the_same_for_an_outside_file_that_exists_and_one_that_does_not(
    checkout, tmp_path
):
    outside = str(tmp_path / "srv" / "secret_key")
    gone = str(tmp_path / "srv" / "no_such_key")

    there, text = verify_json(with_token(checkout, outside))
    missing, _ = verify_json(with_token(checkout, gone))

    assert SECRET_HASH not in text
    assert (there["status"], there["error_code"]) == ("refused", MISSING_SNAPSHOT)
    assert there["message"] == f"token: token file not found at {outside}"
    assert token_check(there) == (
        f"token file not found at {outside}; expected {SWISS_TOKEN}, actual <none>; the "
        f"recorded path {outside} is not portable (an absolute path on the machine that wrote "
        "the sidecar) and no file under the checkout root matches its trailing parts"
    )
    assert json.dumps(there).replace(outside, "X") == json.dumps(missing).replace(gone, "X")


def test_it_never_shows_yaml_errors_of_a_file_outside(checkout, tmp_path):
    for recorded in ("../broken.yml", str(tmp_path / "srv" / "broken.yml")):
        report, text = verify_json(with_token(checkout, recorded))

        assert report["error_code"] in (MALFORMED_TRACE, MISSING_SNAPSHOT)
        assert "Map keys must be unique" not in text
        assert "line 2" not in text


def test_it_refuses_a_link_inside_the_checkout_that_leads_out(checkout):
    (checkout / "tokens" / "leak.yml").symlink_to(checkout.parent / "secret_key")

    report, text = verify_json(with_token(checkout, "tokens/leak.yml"))

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == (
        "token: the recorded path tokens/leak.yml is outside the checkout; not read"
    )
    assert SECRET_HASH not in text


def test_it_reads_a_link_that_stays_inside_the_checkout(checkout):
    (checkout / "tokens" / "alias.yml").symlink_to(checkout / "tokens" / "swiss-editorial.yml")
    out = io.StringIO()

    call_command("verify", str(with_token(checkout, "tokens/alias.yml")), "--json", stdout=out)

    assert json.loads(out.getvalue())["status"] == "ok"


def _verify_in_a_thread(sidecar: Path) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["report"], _ = verify_json(sidecar)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=10)
    return thread, result


def test_it_does_not_hang_on_a_fifo_inside_the_checkout(checkout):
    fifo = checkout / "tokens" / "pipe.yml"
    os.mkfifo(fifo)

    thread, result = _verify_in_a_thread(with_token(checkout, "tokens/pipe.yml"))

    hung = thread.is_alive()
    if hung:  # let the stuck open() return so the test run can end
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
        thread.join(timeout=10)
    assert not hung, "verify blocked opening a FIFO"
    report = result["report"]
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == (f"token: token file at {fifo} is not a regular file; not read")


def test_it_does_not_hang_on_a_pipe_named_under_proc(checkout):
    read_end, write_end = os.pipe()
    try:
        recorded = f"/proc/self/fd/{read_end}"
        thread, result = _verify_in_a_thread(with_token(checkout, recorded))
        hung = thread.is_alive()
        if hung:
            os.write(write_end, b"x: 1\n")
            os.close(write_end)
            write_end = -1
            thread.join(timeout=10)
        assert not hung, "verify blocked reading a pipe"
        report = result["report"]
        assert report["error_code"] == MISSING_SNAPSHOT
        assert report["message"] == f"token: token file not found at {recorded}"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_it_refuses_an_input_over_the_size_limit_with_the_limit(checkout, settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 100
    token = checkout / "tokens" / "swiss-editorial.yml"

    report, _ = verify_json(with_token(checkout, "tokens/swiss-editorial.yml"))

    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == f"token: token file at {token} is over 100 bytes; not read"


class _Opens:
    """Every path this process opens while active (the "open" audit event covers open(),
    os.open() and everything built on them)."""

    def __init__(self) -> None:
        self.active = False
        self.paths: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            self.paths.append(os.path.realpath(os.fsdecode(args[0])))


_opens = _Opens()  # audit hooks cannot be removed: one for the whole test session


def test_a_verifier_never_opens_the_data_directory(tmp_path, settings):
    """The checkout holds the server's data directory (an operator pointed REPLAY_AHD_ROOT
    too high): a sidecar naming the database, its WAL or the secret key is refused, and
    nothing under the data directory is opened (another descriptor on the SQLite file would
    drop this process's POSIX locks on it)."""
    root = tmp_path / "srv"
    shutil.copytree(DEMO_AHD, root)
    var = root / "var"
    var.mkdir()
    for name in ("db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm", "secret_key"):
        (var / name).write_bytes(b"a: 1\n")
    settings.VAR_DIR = var
    for name in ("db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm", "secret_key"):
        sidecar = with_token(root, f"var/{name}")
        _opens.paths.clear()
        _opens.active = True
        try:
            report, _ = verify_json(sidecar)
        finally:
            _opens.active = False

        assert report["error_code"] == MALFORMED_TRACE
        assert report["message"] == (
            f"token: the recorded path var/{name} is outside the checkout; not read"
        )
        assert _opens.paths, "the audit hook saw no open at all"
        real_var = os.path.realpath(var)
        assert [p for p in _opens.paths if p.startswith(real_var + os.sep)] == []
