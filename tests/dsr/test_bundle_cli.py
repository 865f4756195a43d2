"""The offline bundle verifier (``python -m dsr.bundle_cli``): what it prints, its exit status,
its trust anchors, and that it runs without Django."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.bundle import cli as bundle_cli
from core.bundle import verify_bundle
from core.ledger.codes import BUNDLE_FAILURES
from tests.dsr import bundles as b

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = b.build()
MANIFEST = verify_bundle(BUNDLE).manifest_sha256


@pytest.fixture
def bundle_file(tmp_path):
    path = tmp_path / "dsr_0001.bundle.json"
    path.write_bytes(BUNDLE)
    return path


def _run(*args, **kwargs):
    out = io.StringIO()
    status = bundle_cli.verify_bundle_file(*args, out, **kwargs)
    return status, out.getvalue()


def test_it_says_the_bundle_verifies_and_that_trust_was_not_checked(bundle_file):
    status, text = _run(str(bundle_file))

    assert status == 0
    assert text == (
        f"bundle {bundle_file}\n"
        f"signed by server key {b.KEY_ID} (public key {b.PUBLIC.hex()})\n"
        "trust: NOT CHECKED - no --trust-key or --checkpoint was given, so this says only that"
        " the bundle is intact and signed by the key it names\n"
        f"request {b.REQUEST}; subjects {b.SUBJECT}\n"
        f"manifest {MANIFEST}\n"
        "OK: the bundle verifies (2 trace(s), 4 ledger event(s), 8 member(s))\n"
    )


def test_it_checks_the_key_against_a_trusted_key(bundle_file):
    status, text = _run(str(bundle_file), trust_keys=[b.PUBLIC.hex()])

    assert status == 0
    assert "trust: the signing key was checked against the trusted key given\n" in text


def test_it_checks_the_key_against_a_checkpoint_file(bundle_file, tmp_path):
    point = tmp_path / "checkpoint.json"
    point.write_text(json.dumps(b.checkpoint(b.ledger())))
    status, text = _run(str(bundle_file), checkpoint_path=str(point))

    assert status == 0
    assert f"trust: the signing key signed the trusted checkpoint {point}\n" in text


def test_it_names_the_first_failure_and_exits_1(bundle_file):
    bundle_file.write_bytes(BUNDLE.replace(b"Ada Lovelace", b"Ada Lovelacf"))
    status, text = _run(str(bundle_file))

    assert status == 1
    last, why = text.splitlines()[-2:]
    assert last.startswith(f"FAIL BUNDLE_MEMBER_HASH at traces/{'a1' * 32}/data.json: sha256 ")
    assert why == "  (a member's sha256 or size differs from the manifest's)"


def test_it_refuses_a_bundle_signed_by_another_key_than_the_trusted_one(bundle_file):
    status, text = _run(str(bundle_file), trust_keys=[b.OTHER_PUBLIC.hex()])

    assert status == 1
    assert f"FAIL BUNDLE_UNTRUSTED_KEY at manifest.server_key: signed by {b.KEY_ID}" in text


def test_it_refuses_a_file_over_the_limit_without_reading_it(bundle_file):
    status, text = _run(str(bundle_file), max_bytes=100)

    assert status == 1
    assert text == (
        f"bundle {bundle_file}\n"
        f"FAIL BUNDLE_MALFORMED at file: {len(BUNDLE)} bytes, more than the limit of 100\n"
        f"  ({BUNDLE_FAILURES['BUNDLE_MALFORMED']})\n"
    )


def test_it_prints_the_finding_as_json(bundle_file):
    status, text = _run(str(bundle_file), as_json=True)

    assert status == 0
    assert json.loads(text)["manifest_sha256"] == MANIFEST


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trust_keys": ["nope"]}, "error: a trusted key is not an Ed25519 public key"),
        ({"checkpoint_path": "/nonexistent/checkpoint.json"}, "error: [Errno 2]"),
    ],
)
def test_a_usage_problem_exits_2(bundle_file, kwargs, message):
    status, text = _run(str(bundle_file), **kwargs)

    assert status == 2
    assert text.startswith(message)


def test_a_missing_file_exits_2(tmp_path):
    status, text = _run(str(tmp_path / "absent.json"))

    assert status == 2
    assert text.startswith("error: [Errno 2] No such file or directory")


def test_it_runs_as_a_module_without_django(bundle_file):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-m", "dsr.bundle_cli", str(bundle_file), "--trust-key", b.PUBLIC.hex()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith(
        "OK: the bundle verifies (2 trace(s), 4 ledger event(s), 8 member(s))\n"
    )

    probe = (
        "import sys; from core.bundle import cli as bundle_cli; "
        f"status = bundle_cli.main([{str(bundle_file)!r}]); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'celery')); "
        "print(status, loaded)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.splitlines()[-1] == "0 []"
