"""`make run` itself, in a real browser (issue 21): the Makefile's target migrates, makes the
demo users and traces, starts the local witness (deploy/devrun.py), pushes the ledger's
checkpoint to it once and starts runserver; a demo user signs in and the ledger page says
"Witnessed by 1 of 1 through seq N", N the size the witness cosigned. Ctrl-C (SIGINT to the
process group, as a terminal sends it) stops the server and the witness.

Everything it writes is under a temporary REPLAY_VAR_DIR (its SQLite database, the witness's
key and state). Its two ports are free ones the system gives, or free ones in
REPLAY_MAKE_RUN_PORTS (`first-last`) where only a range may be used."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORTS = os.environ.get("REPLAY_MAKE_RUN_PORTS", "")
STARTUP_SECONDS = 300
#: what the test process has that a developer's shell running `make run` has not
NOT_INHERITED = {
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "GOVERNANCE_WITNESSES",
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "REPLAY_VAR_DIR",
}


def free_ports(count: int) -> list[int]:
    if not PORTS:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            b.bind(("127.0.0.1", 0))
            return [a.getsockname()[1], b.getsockname()[1]][:count]
    first, last = (int(p) for p in PORTS.split("-"))
    found = []
    for port in range(first, last + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    pytest.fail(f"fewer than {count} free ports in {PORTS}")


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def answered(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our server
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def make_run(tmp_path):
    """`make run` started in its own process group; yields (base URL, output file, process)."""
    port, witness_port = free_ports(2)
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    env.update(REPLAY_VAR_DIR=str(tmp_path / "var"), DJANGO_DEBUG="1")
    output = tmp_path / "make-run.out"
    with output.open("w") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}", f"WITNESS_PORT={witness_port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not answered(f"{base}/healthz"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"make run did not serve {base}:\n{output.read_text()[-3000:]}")
            time.sleep(1)
        yield base, output, process, witness_port
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_make_run_serves_a_ledger_witnessed_by_its_local_witness(chromium, make_run):
    base, output, process, witness_port = make_run
    text = output.read_text()
    pushed = re.search(r"^localhost/witness-1: cosigned at size (\d+)$", text, re.M)
    assert pushed, text[-3000:]
    size = int(pushed.group(1))
    assert re.search(
        rf"^witness localhost/witness-1\+[0-9a-f]{{8}}\+\S+ on http://127\.0\.0\.1:{witness_port}$",
        text,
        re.M,
    ), text[-3000:]
    password = re.search(r"^  alice\s+auditor\s+password: (\S+)$", text, re.M)
    assert password, text[-3000:]

    context = chromium.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto("/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", password.group(1))
        page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r"/traces/"))
        page.goto("/governance/")
        assert page.inner_text("#tlog-witnessed") == f"Witnessed by 1 of 1 through seq {size}."
        assert errors == []
    finally:
        context.close()

    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C stops the server and then the witness
    process.wait(timeout=30)
    assert not listening(witness_port)
    assert not listening(int(base.rsplit(":", 1)[1]))
