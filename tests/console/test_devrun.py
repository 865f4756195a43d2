"""``make run`` starts one local witness beside runserver (``deploy/devrun.py``): its own key
and state under ``var/witness/`` made on the first run, named to the development settings,
pushed to once, so the ledger is witnessed by 1 of 1 out of the box."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


SUMMARY = (
    "import json; from governance import witnessing; "
    "s = witnessing.summary(); print(json.dumps([s['configured'], s['witnessed_size']]))"
)
APPEND = (
    "from core.ledger import codes; from governance import services; "
    "[services.event_append(event_type=codes.PII_REVEALED, payload={'n': i}) for i in range(3)]"
)


def test_the_local_witness_is_made_started_configured_and_pushed_to(tmp_path):
    var = tmp_path / "var"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"GOVERNANCE_WITNESSES", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(REPLAY_VAR_DIR=str(var), DJANGO_DEBUG="1")
    run(env, "manage.py", "migrate", "-v0")
    run(env, "manage.py", "shell", "-c", APPEND)  # a server key (KEY_ADDED) and three events
    port = free_port()

    out = run(env, "deploy/devrun.py", "--no-server", "--witness-port", str(port))

    first, pushed = out.splitlines()[-2:]
    assert first.startswith("witness localhost/witness-1+")
    assert first.endswith(f" on http://127.0.0.1:{port}")
    assert pushed == "localhost/witness-1: cosigned at size 4"
    key = var / "witness" / "witness.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    vkey = first.split(" ")[1]
    assert json.loads((var / "witness" / "witnesses.json").read_text()) == [
        {"url": f"http://127.0.0.1:{port}", "vkey": vkey}
    ]
    assert list((var / "witness" / "state").glob("*.checkpoint"))
    # the development settings name it: the ledger page's "Witnessed by 1 of 1 through seq 4"
    assert json.loads(run(env, "manage.py", "shell", "-c", SUMMARY).splitlines()[-1]) == [1, 4]

    run(env, "manage.py", "shell", "-c", APPEND)
    again = run(env, "deploy/devrun.py", "--no-server", "--witness-port", str(port))

    assert again.splitlines()[-2] == first  # the same key, kept
    assert again.splitlines()[-1] == "localhost/witness-1: cosigned at size 7"
    # the test settings ignore it
    test_env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings_test"}
    assert json.loads(run(test_env, "manage.py", "shell", "-c", SUMMARY).splitlines()[-1]) == [
        0,
        None,
    ]


def test_make_prod_says_it_starts_no_witness_and_where_to_run_them():
    import importlib.util

    spec = importlib.util.spec_from_file_location("stack", ROOT / "deploy" / "stack.py")
    assert spec is not None
    assert spec.loader is not None
    stack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stack)

    assert stack.witnesses_line({"GOVERNANCE_WITNESSES": "[]"}) == (
        "witnesses: none (GOVERNANCE_WITNESSES is empty): checkpoints carry this server's "
        "signature only; have witnesses run by someone else (docs/deployment.md#witnesses)"
    )
    configured = {
        "GOVERNANCE_WITNESSES": '[{"url": "https://w1"}]',
        "GOVERNANCE_WITNESS_QUORUM": "2",
    }
    assert stack.witnesses_line(configured) == (
        "witnesses: GOVERNANCE_WITNESSES, quorum 2 (each new checkpoint is pushed)"
    )
