"""``make run``: the development server with one local witness beside it, stopped together.

The witness (``python -m witness serve``) keeps its own key and state under
``var/witness/`` (made on the first run), is told the ledger's verifier keys
(``manage.py governance tlog-vkey``) and is written to ``var/witness/witnesses.json``, which
the development settings read when ``GOVERNANCE_WITNESSES`` is not set (DEBUG only). One push
(``manage.py governance witness-push``) runs before the server starts, so the ledger page says
"Witnessed by 1 of 1 through seq N" out of the box; each new checkpoint is pushed after that.
Ctrl-C stops runserver (it is in the terminal's process group) and then the witness.

A witness on the operator's machine, with a key the operator holds, proves nothing to an
auditor: it is here so the journey works. See docs/deployment.md for real witnesses.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from witness import __main__ as witness_cli  # noqa: E402 - pure: imports nothing of the console

WITNESS_NAME = "localhost/witness-1"
FILE_MODE = 0o600


def var_dir() -> Path:
    return Path(os.environ.get("REPLAY_VAR_DIR", str(ROOT / "var")))


def witness_key(directory: Path) -> str:
    """The local witness's cosigner vkey; its key file is made on the first run."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = directory / "witness.key"
    if not key.exists():
        return witness_cli.keygen(WITNESS_NAME, str(key))
    return witness_cli.read_signer(str(key)).verifier.vkey


def manage(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write_config(path: Path, url: str, vkey: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump([{"url": url, "vkey": vkey}], handle)
        handle.write("\n")


def start_witness(directory: Path, vkeys: list[str], port: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "witness", "serve", "--key", str(directory / "witness.key")]
    argv += ["--state", str(directory / "state"), "--port", str(port), "--quiet"]
    for vkey in vkeys:
        argv += ["--log", vkey]
    # its own session: the terminal's Ctrl-C reaches runserver; the witness is stopped after it
    process = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("witness "):
        process.wait(timeout=10)
        raise SystemExit(f"the local witness did not start (exit {process.returncode})")
    print(line.rstrip("\n"), flush=True)
    return process


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


class _Terminated(Exception):
    pass


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/devrun.py", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--witness-port", type=int, default=8207)
    parser.add_argument(
        "--no-server", action="store_true", help="start the witness and push once, then stop"
    )
    args = parser.parse_args(argv)

    directory = var_dir() / "witness"
    vkey = witness_key(directory)
    url = f"http://127.0.0.1:{args.witness_port}"
    log_vkeys = manage("governance", "tlog-vkey").split()
    if "GOVERNANCE_WITNESSES" in os.environ:
        print("GOVERNANCE_WITNESSES is set: no local witness is started", flush=True)
        witness = None
    else:
        write_config(directory / "witnesses.json", url, vkey)
        witness = start_witness(directory, log_vkeys, args.witness_port)
    try:
        if witness is not None:
            print(manage("governance", "witness-push").rstrip("\n"), flush=True)
        if args.no_server:
            return 0
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"{args.host}:{args.port}"], cwd=ROOT
        )
        signal.signal(signal.SIGTERM, _terminated)
        try:
            return server.wait()
        except KeyboardInterrupt:  # Ctrl-C reached runserver too: let it finish
            return server.wait()
        except _Terminated:  # stopped by a signal to this process alone: pass it on
            server.send_signal(signal.SIGTERM)
            return server.wait()
    finally:
        if witness is not None:
            stop(witness)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C before the server ran (the witness, if any, stopped)
        sys.exit(130)
