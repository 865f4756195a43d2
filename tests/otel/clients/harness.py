"""The real-client harness: the clients' virtualenv, and one traced conversation captured.

The clients (openai and three instrumentations of it, the SDK's OTLP/HTTP exporters) live in
their own virtualenv, `var/otel-clients/<hash>/`, built on demand from requirements.txt: the
project's .venv carries none of them. The directory is named by the requirements file's hash,
so a changed pin builds a new one; a file lock keeps pytest-xdist workers from building it
twice; a `.complete` marker, written once `pip check` is clean, tells a finished build from an
interrupted one (which is removed and built again).

`converse()` runs one conversation: the fake OpenAI server (fake_openai.py) and the capture
server (capture.py) in this process, run_client.py in the clients' virtualenv, and returns what
each of them saw. Stdlib only, so both the pytest suite and `make_fixtures.py` use it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capture import Capture, CaptureServer
from .fake_openai import FakeOpenAI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REQUIREMENTS = HERE / "requirements.txt"
RUN_CLIENT = HERE / "run_client.py"
VAR = ROOT / "var" / "otel-clients"
#: the instrumentations run_client.py knows, "none" being the agent's own spans only
INSTRUMENTATIONS = ("openai-v2", "openinference", "openllmetry", "none")
#: what run_client.py's environment does not inherit: the host's OTel, OpenAI and
#: instrumentation settings would change what a run emits
_SCRUBBED_PREFIXES = ("OTEL_", "OPENAI_", "TRACELOOP_", "OPENINFERENCE_", "PYTHONPATH")


class ClientsUnavailable(RuntimeError):
    """The clients' virtualenv could not be built (no network, no PyPI, a broken pin)."""


def requirements_hash(requirements: Path = REQUIREMENTS) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: Sequence[str | Path], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            [str(c) for c in command], check=False, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as error:
        raise ClientsUnavailable(f"{' '.join(map(str, command))} took over {timeout} s") from error
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-4000:]
        raise ClientsUnavailable(
            f"{' '.join(map(str, command))} exited {done.returncode}:\n{output}"
        )
    return done


@dataclass(frozen=True)
class ClientsVenv:
    """The built virtualenv."""

    path: Path
    build_seconds: float | None  # None when it was already built

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def versions(self) -> dict[str, str]:
        """The installed distributions and their versions (`pip list`)."""
        listed = _run([self.python, "-m", "pip", "list", "--format", "json"], timeout=120)
        return {item["name"]: item["version"] for item in json.loads(listed.stdout)}


def ensure_clients_venv(
    var: Path = VAR,
    requirements: Path = REQUIREMENTS,
    python: str = sys.executable,
    timeout: float = 600,
) -> ClientsVenv:
    """The clients' virtualenv for this requirements file, built first when it is not.

    Raises ClientsUnavailable when the build fails (the half-built directory is removed)."""
    target = var / requirements_hash(requirements)
    marker = target / ".complete"
    with _locked(var / ".lock"):
        if marker.exists():
            return ClientsVenv(target, None)
        started = time.monotonic()
        shutil.rmtree(target, ignore_errors=True)
        try:
            _run([python, "-m", "venv", target], timeout=timeout)
            pip = [target / "bin" / "python", "-m", "pip"]
            _run(
                [*pip, "install", "--quiet", "--disable-pip-version-check", "-r", requirements],
                timeout=timeout,
            )
            _run([*pip, "check"], timeout=timeout)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        marker.write_text(
            json.dumps({"requirements_sha256": requirements_hash(requirements), "seconds": seconds})
        )
        for stale in var.iterdir():  # the builds of earlier pins
            if stale.is_dir() and stale != target and (stale / ".complete").exists():
                shutil.rmtree(stale, ignore_errors=True)
        return ClientsVenv(target, seconds)


def client_environment() -> dict[str, str]:
    """run_client.py's environment: this one without the host's OTel/OpenAI settings, and no
    proxy between the client and the local servers."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(_SCRUBBED_PREFIXES)}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass
class Conversation:
    """One run of run_client.py and what the servers saw."""

    command: list[str]
    summary: dict[str, Any]  # run_client.py's stdout
    captures: list[Capture]  # the export requests, in arrival order
    seen: list[dict[str, Any]]  # the fake OpenAI server's requests: {"path", "body"}
    seconds: float
    stderr: str = ""
    returncode: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def bodies(self, kind: str) -> list[bytes]:
        """The export bodies of one encoding ("proto" or "json"), gunzipped, in order."""
        return [c.body for c in self.captures if c.is_json == (kind == "json")]


def client_command(
    venv: ClientsVenv,
    instrumentation: str,
    endpoint: str,
    openai_base_url: str,
    *,
    exporter: str = "proto",
    gzip: bool = True,
    content: bool = True,
    one_by_one: bool = False,
    stream: bool = False,
    divergent_tool_result: bool = False,
    headers: dict[str, str] | None = None,
) -> list[str]:
    command = [
        str(venv.python),
        str(RUN_CLIENT),
        f"--instrumentation={instrumentation}",
        f"--exporter={exporter}",
        f"--endpoint={endpoint}",
        f"--openai-base-url={openai_base_url}",
        "--gzip" if gzip else "--no-gzip",
        "--content" if content else "--no-content",
    ]
    command += ["--one-by-one"] if one_by_one else []
    command += ["--stream"] if stream else []
    command += ["--divergent-tool-result"] if divergent_tool_result else []
    for key, value in (headers or {}).items():
        command.append(f"--header={key}={value}")
    return command


@dataclass
class ClientRun:
    """One run of run_client.py."""

    command: list[str]
    returncode: int
    summary: dict[str, Any]  # its stdout: trace id, span names, each export's result
    stderr: str
    seconds: float


def run_client(
    venv: ClientsVenv,
    instrumentation: str,
    endpoint: str,
    openai_base_url: str,
    *,
    timeout: float = 120,
    check: bool = True,
    **options: Any,
) -> ClientRun:
    """Run one conversation with `instrumentation`, exporting to `endpoint` (a full traces URL:
    the capture server's, or the console's `/otlp/v1/traces`); `options` are client_command()'s.
    With `check`, a failed run raises AssertionError with its output."""
    command = client_command(venv, instrumentation, endpoint, openai_base_url, **options)
    started = time.monotonic()
    done = subprocess.run(
        command,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=client_environment(),
    )
    seconds = time.monotonic() - started
    if check and done.returncode != 0:
        raise AssertionError(
            f"run_client.py exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        )
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    return ClientRun(command, done.returncode, summary, done.stderr, seconds)


def converse(
    venv: ClientsVenv,
    instrumentation: str,
    *,
    directory: Path | None = None,
    status: int = 200,
    **options: Any,
) -> Conversation:
    """Run one conversation against fresh servers: the fake OpenAI server, and a capture server
    answering `status` (keeping the requests in `directory` too when given); `options` are
    run_client()'s."""
    with FakeOpenAI() as fake, CaptureServer(directory=directory, status=status) as capture:
        run = run_client(venv, instrumentation, capture.traces_url, fake.base_url, **options)
        # each export was answered before the client exited: the captures are complete here
        return Conversation(
            command=run.command,
            summary=run.summary,
            captures=list(capture.captures),
            seen=[dict(r) for r in fake.requests],
            seconds=run.seconds,
            stderr=run.stderr,
            returncode=run.returncode,
            options={"instrumentation": instrumentation, **options},
        )


def same_export(venv: ClientsVenv, proto_body: bytes, json_body: bytes) -> bool:
    """Whether a protobuf and an OTLP JSON export body hold the same ExportTraceServiceRequest,
    by the protobuf library of the clients' virtualenv (the JSON's hex ids turned to base64,
    the one way OTLP JSON differs from protobuf's JSON mapping)."""
    script = """
import base64, json, sys
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as R
IDS = ("traceId", "spanId", "parentSpanId")
def b64(v):
    return base64.b64encode(bytes.fromhex(v)).decode()
def ids(o):
    if isinstance(o, dict):
        return {k: b64(v) if k in IDS and v else ids(v) for k, v in o.items()}
    return [ids(x) for x in o] if isinstance(o, list) else o
proto = R.FromString(open(sys.argv[1], "rb").read())
print(json.dumps(proto == Parse(json.dumps(ids(json.load(open(sys.argv[2])))), R())))
"""
    with tempfile.TemporaryDirectory() as scratch:
        proto_file, json_file = Path(scratch) / "body.bin", Path(scratch) / "body.json"
        proto_file.write_bytes(proto_body)
        json_file.write_bytes(json_body)
        done = _run([venv.python, "-c", script, proto_file, json_file], timeout=60)
    return json.loads(done.stdout)
