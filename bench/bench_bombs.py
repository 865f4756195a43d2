"""Peak server memory while refusing each bomb, beside the size of the file sent.

Run: ``.venv/bin/python bench/bench_bombs.py [--quick] [--core]``

Each bomb is written to a temporary directory and handed to ``manage.py verify --json`` in
its own process (a fresh SQLite database under a private ``REPLAY_VAR_DIR``, migrated first),
which reads it exactly as the upload page and the verify endpoint do; the peak RSS is that
process's ``ru_maxrss`` (``os.wait4``). A tiny malformed file gives the baseline: what the
command costs with nothing to read. ``--core`` (implied by ``--quick``) skips Django and
opens each file with the format parsers in a bare process: quicker, same refusals.

The bombs (issue 9): a gzip of 1 GiB of newlines (JSON Lines), a small ``.json.gz`` that
inflates to 256 MiB, 2 million keys in ``meta`` (a document) and in one JSON Lines record,
and an AHD token whose YAML aliases a large anchor 99 times (~200 MB once written out).
``--quick`` makes each smaller (still over every limit) for a smoke run.

``--server`` (issue 20) sends the shapes that cost a long-lived web process memory through
the API of a real gunicorn (deploy/gunicorn.conf.py, one sync worker, SQLite under a private
``REPLAY_VAR_DIR``), each as one upload, and prints the worker's peak RSS during that upload
above its idle RSS just before (``VmHWM``, reset through ``/proc/<pid>/clear_refs`` before
each upload) and what it still holds after (``VmRSS``): a ContextOS trace whose left-out
pointers once filled a per-process cache, the same through the verify-only endpoint, a
``.json.gz`` of millions of ``{}`` events, a Verist file of millions of ``[]`` and a
ContextOS trace nested deeper than any server's recursion limit, and a ContextOS value as
long as the reader allows in each width of character (1- to 4-byte UTF-8, escapes; only
these with ``--wide``). :func:`gunicorn_api` and
:func:`server_shapes` are what tests/console/test_hostile_gunicorn.py runs too.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1024**2

#: prints the process's own peak RSS at exit (``VmHWM``: per address space, so unlike
#: ``ru_maxrss`` it does not inherit the benchmark's own peak through fork)
_HWM = """
import atexit, sys
def _hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("\\nVmHWM " + line.split()[1] + "\\n")
atexit.register(_hwm)
"""

_MANAGE = (
    _HWM
    + """
import runpy
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""
)

_CORE = (
    _HWM
    + """
from pathlib import Path
from core.errors import ReplayError
path, kind = Path(sys.argv[1]), sys.argv[2]
try:
    if kind == "yaml":
        from core.formats import ahd
        from core.formats.yaml12 import YAML12Error
        try:
            ahd.hash_structured(path.read_text())
        except YAML12Error as exc:
            print("refused", exc)
    else:
        from core.formats import native
        with path.open("rb") as fh:
            for _ in native.open_native(fh, path.name).records():
                pass
        print("read")
except ReplayError as exc:
    print("refused", exc.code, exc.message)
"""
)


def header_line() -> bytes:
    golden = ROOT / "tests" / "replay" / "fixtures" / "golden" / "ok.trace.jsonl"
    first = golden.read_bytes().split(b"\n", 1)[0]
    return json.dumps(json.loads(first), separators=(",", ":")).encode() + b"\n"


def gzip_members(path: Path, prefix: bytes, filler: bytes, total: int) -> Path:
    """`prefix`, then `total` bytes of `filler`, as gzip members of 16 MiB each."""
    member = gzip.compress(filler * (16 * MB // len(filler)), compresslevel=9, mtime=0)
    with path.open("wb") as fh:
        fh.write(gzip.compress(prefix, mtime=0))
        for _ in range(max(1, total // (16 * MB))):
            fh.write(member)
    return path


def many_keys(n: int) -> bytes:
    return b",".join(b'"k%d":0' % i for i in range(n))


def yaml_laughs(anchor_chars: int, aliases: int) -> str:
    items = "\n".join(f"  - {'x' * 1000}" for _ in range(anchor_chars // 1000))
    refs = "\n".join(f"k{i}: *big" for i in range(aliases))
    return f"big: &big\n{items}\n{refs}\n"


def ahd_checkout(directory: Path, token: str) -> Path:
    """A minimal AHD checkout whose sidecar names `token` (tokens/laughs.yml)."""
    root = directory / "ahd"
    (root / "tokens").mkdir(parents=True)
    (root / "docs" / "evals").mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": "@adastracomputing/ahd"}))
    (root / "tokens" / "laughs.yml").write_text(token)
    sidecar = {
        "schema_version": 1,
        "kind": "critique",
        "ahd_version": "0.1.0",
        "ahd_commit": None,
        "git_dirty": None,
        "node_version": "v22",
        "platform": "linux",
        "invoked_at": "2026-04-21T21:48:00.597Z",
        "argv": [],
        "token": {"path": "tokens/laughs.yml", "hash": "sha256:" + "0" * 64},
        "brief": None,
        "sampling": {"n": 1, "temperature": None, "seed": None},
        "models": [],
        "conditions": {"requested": [], "effective": []},
    }
    path = root / "docs" / "evals" / "laughs.replay.json"
    path.write_text(json.dumps(sidecar))
    return path


def make_bombs(directory: Path, quick: bool) -> list[tuple[str, Path, Path, str, int]]:
    """(name, file sent, file the parser reads, kind, bytes once expanded)."""
    scale = 8 if quick else 1
    newline_total = 1024 * MB // scale
    inflate_total = 256 * MB // scale
    keys = 2_000_000 // scale if not quick else 400_000
    bombs = []
    path = gzip_members(directory / "newlines.trace.jsonl.gz", header_line(), b"\n", newline_total)
    bombs.append(("gzip of newlines", path, path, "trace", newline_total))
    prefix = b'{"format": "replay-trace", "schema_version": 1, "meta": {"pad": "'
    path = gzip_members(directory / "inflate.trace.json.gz", prefix, b" ", inflate_total)
    bombs.append((".json.gz inflating", path, path, "trace", inflate_total))
    path = directory / "keys.trace.json"
    path.write_bytes(
        b'{"format":"replay-trace","schema_version":1,"meta":{' + many_keys(keys) + b"}}"
    )
    bombs.append((f"{keys} keys in meta", path, path, "trace", path.stat().st_size))
    path = directory / "keys.trace.jsonl"
    path.write_bytes(header_line() + b'{"record":"event","payload":{' + many_keys(keys) + b"}}\n")
    bombs.append((f"{keys} keys in a record", path, path, "trace", path.stat().st_size))
    anchor = 2_000_000 // scale
    token = yaml_laughs(anchor_chars=anchor, aliases=99)
    sidecar = ahd_checkout(directory, token)
    token_path = sidecar.parents[2] / "tokens" / "laughs.yml"
    bombs.append(("YAML aliases x99", sidecar, token_path, "yaml", anchor * 100))
    return bombs


# --- through the API of a real gunicorn (--server) ---------------------------------------------


def contextos_pointer_bomb(
    depth: int = 900, levels: int = 60, keys: int = 4096, prefix: str = "k"
) -> bytes:
    """seed 004's passing trace with its first tool call nested ``depth`` deep (``call`` in
    ``call``: kept keys, each level a pointer longer than the last), the deepest ``levels``
    levels each holding ``keys`` left-out keys: every left-out pointer is ~5 x ``depth``
    characters, ~2.4 MB of text naming ~1 GB of pointers (``prefix`` spells the keys: another
    prefix, other pointers)."""
    doc = json.loads((ROOT / "tests/replay/fixtures/contextos/pass.trace.json").read_bytes())
    filler = ",".join(f'"{prefix}{i}":0' for i in range(keys))
    opening = "".join(
        '{"call":' if n < depth - levels else "{" + filler + ',"call":' for n in range(depth)
    )
    body = opening + "0" + "}" * depth
    marker = '"__NESTED__"'
    doc["tool_envelopes"][0]["call"]["call"] = "__NESTED__"
    return json.dumps(doc, separators=(",", ":")).replace(marker, body).encode()


def contextos_deep(depth: int = 20_000) -> bytes:
    """seed 004's passing trace with ``depth`` nested arrays in its first tool call's args."""
    doc = json.loads((ROOT / "tests/replay/fixtures/contextos/pass.trace.json").read_bytes())
    doc["tool_envelopes"][0]["call"]["args"] = "__DEEP__"
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace('"__DEEP__"', "[" * depth + "]" * depth).encode()


def empty_events_gz(count: int = 8_000_000) -> bytes:
    """A native ``.trace.json.gz`` of ``count`` ``{}`` events: ~23 KB for 8 million."""
    head = b'{"format":"replay-trace","schema_version":1,"events":['
    tail = b"]}"
    out = gzip.compress(head, mtime=0)
    block = 1_000_000
    member = gzip.compress(b"{}," * block, compresslevel=9, mtime=0)
    whole, rest = divmod(count - 1, block)
    out += member * whole + gzip.compress(b"{}," * rest + b"{}" + tail, mtime=0)
    return out


def contextos_empty_arrays(count: int = 16_000_000) -> bytes:
    """seed 004's passing trace with ``count`` ``[]`` in its first tool call's args."""
    doc = json.loads((ROOT / "tests/replay/fixtures/contextos/pass.trace.json").read_bytes())
    doc["tool_envelopes"][0]["call"]["args"] = "__ARRAYS__"
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace('"__ARRAYS__"', "[" + ",".join(["[]"] * count) + "]").encode()


def jsonl_empty_arrays(count: int = 10_000_000) -> bytes:
    """A native ``.trace.jsonl`` whose first event's payload holds ``count`` ``[]`` (one
    30 MB line, under the 32 MiB line limit)."""
    record = b'{"record":"event","payload":[' + b",".join([b"[]"] * count) + b"]}\n"
    return header_line() + record


def verist_empty_arrays(count: int = 16_000_000) -> bytes:
    """A Verist snapshot whose ``input`` holds ``count`` ``[]`` (48 MB for 16 million)."""
    doc = json.loads((ROOT / "tests/replay/fixtures/verist/pass.snapshot.json").read_bytes())
    doc["input"] = "__ARRAYS__"
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace('"__ARRAYS__"', "[" + ",".join(["[]"] * count) + "]").encode()


def _with_arrays(doc: dict, key: str, count: int) -> bytes:
    """``doc`` written compact with ``count`` ``[]`` as its last member ``key``."""
    doc.pop(key, None)
    doc[key] = "__ARRAYS__"
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace('"__ARRAYS__"', "[" + ",".join(["[]"] * count) + "]").encode()


def mace_empty_arrays(count: int = 16_000_000) -> bytes:
    """The log MACE's writer persisted (tests/replay/fixtures/mace/writer/clean.json) with
    ``count`` ``[]`` as its ``agent_outputs``."""
    doc = json.loads((ROOT / "tests/replay/fixtures/mace/writer/clean.json").read_bytes())
    return _with_arrays(doc, "agent_outputs", count)


def paxman_empty_arrays(count: int = 16_000_000) -> bytes:
    """A published Paxman artifact with ``count`` ``[]`` in a member of its own."""
    path = ROOT / "tests/fixtures/published/paxman/money_unresolved.json"
    return _with_arrays(json.loads(path.read_bytes()), "padding", count)


def ahd_empty_arrays(count: int = 5_000_000) -> bytes:
    """An AHD sidecar whose ``argv`` holds ``count`` ``[]`` (15 MB: a sidecar is at most
    16 MiB)."""
    sidecar = json.loads(ahd_checkout(Path(tempfile.mkdtemp()), "a: 1\n").read_bytes())
    return _with_arrays(sidecar, "argv", count)


#: one character of each width in UTF-8 (1 to 4 bytes), and two escapes, as JSON text: each
#: costs CPython 1, 2 or 4 bytes a character once decoded (a surrogate pair escaped, 12 bytes
#: of ASCII text, is one 4-byte character)
WIDE_TEXT = {
    "1-byte": "a",
    "2-byte": "\u00e9",
    "3-byte": "\u20ac",
    "4-byte": "\U0001f600",
    "\\u00e9 escapes": "\\u00e9",
    "\\ud83d\\ude00 pairs": "\\ud83d\\ude00",
}


def value_bound() -> int:
    """The longest ContextOS value the reader accepts, in characters (``MAX_VALUE_CHARS``)."""
    from core.formats.contextos import reader

    return reader.MAX_VALUE_CHARS


def contextos_long_value(unit: str, count: int, *, head: bool = False) -> bytes:
    """seed 004's passing trace with a string of ``count`` times ``unit`` (JSON text: a
    character, or an escape) as its first tool call's args (``head``: as its invoke request's
    ``note``, a top-level value held while the trace is verified)."""
    doc = json.loads((ROOT / "tests/replay/fixtures/contextos/pass.trace.json").read_bytes())
    if head:
        doc["invoke"]["request"]["note"] = "__LONG__"
    else:
        doc["tool_envelopes"][0]["call"]["args"] = "__LONG__"
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    before, after = text.split('"__LONG__"')
    return b"".join((before.encode(), b'"', unit.encode() * count, b'"', after.encode()))


def wide_shapes(quick: bool = False) -> Iterator[tuple[str, str, str, bytes]]:
    """A ContextOS value of each character width as long as the reader accepts (the bound, in
    characters of text, less 4 KiB: the rest of the envelope, or of the head), then the
    4-byte one as a top-level value, and one unit past the bound (refused); made one at a
    time (each is up to 4 x the bound in bytes)."""
    bound = value_bound()
    room = bound // 8 if quick else bound - 4096
    for n, (name, unit) in enumerate(WIDE_TEXT.items()):
        data = contextos_long_value(unit, room // len(unit))
        yield f"value {name}", "upload", f"wide{n}.trace.json", data
    four = WIDE_TEXT["4-byte"]
    data = contextos_long_value(four, room, head=True)
    yield "value 4-byte, in the head", "upload", "widehead.trace.json", data
    if not quick:
        data = contextos_long_value(four, bound + 1)
        yield "value 4-byte, past the bound", "upload", "widepast.trace.json", data


def server_shapes(quick: bool = False) -> list[tuple[str, str, str, bytes]]:
    """(name, endpoint, file name, bytes) of each shape sent to the server."""
    levels = 15 if quick else 60
    shallow = 12 if quick else 50
    return [
        (
            "ContextOS pointers 900 deep",
            "upload",
            "pointers.trace.json",
            contextos_pointer_bomb(levels=levels),
        ),
        (
            "ContextOS pointers 60 deep",
            "upload",
            "pointers60.trace.json",
            contextos_pointer_bomb(depth=60, levels=shallow),
        ),
        (
            "the same, other keys",
            "upload",
            "pointers60b.trace.json",
            contextos_pointer_bomb(depth=60, levels=shallow, prefix="j"),
        ),
        (
            "the same, verify endpoint",
            "verify",
            "pointers60c.trace.json",
            contextos_pointer_bomb(depth=60, levels=shallow, prefix="i"),
        ),
        ("ContextOS 20000 deep", "upload", "deep.trace.json", contextos_deep()),
        ("8M {} events .json.gz", "upload", "empty.trace.json.gz", empty_events_gz()),
        ("16M [] Verist", "upload", "arrays.snapshot.json", verist_empty_arrays()),
        ("10M [] in a JSONL record", "upload", "arrays.trace.jsonl", jsonl_empty_arrays()),
        ("16M [] ContextOS args", "upload", "arrays.trace.json", contextos_empty_arrays()),
        ("16M [] in a MACE log", "upload", "arrays.log.json", mace_empty_arrays()),
        ("16M [] Paxman artifact", "upload", "arrays.artifact.json", paxman_empty_arrays()),
        ("5M [] AHD sidecar", "upload", "arrays.replay.json", ahd_empty_arrays()),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid: int, field: str) -> float:
    """A memory line of /proc/<pid>/status, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


@dataclass
class Sent:
    status: int
    body: dict
    idle: float  # the worker's RSS before the upload, MiB
    peak: float  # its peak RSS during it (VmHWM), MiB
    held: float  # its RSS after it, MiB

    @property
    def over_idle(self) -> float:
        return self.peak - self.idle


class GunicornApi:
    """A gunicorn (deploy/gunicorn.conf.py) with one sync worker, and an API token."""

    def __init__(self, base: str, token: str, master: subprocess.Popen) -> None:
        self.base, self.token, self.master = base, token, master

    def worker(self) -> int:
        children = Path(f"/proc/{self.master.pid}/task/{self.master.pid}/children")
        pids = [int(p) for p in children.read_text().split()]
        assert len(pids) == 1, pids
        return pids[0]

    def send(self, endpoint: str, filename: str, data: bytes) -> Sent:
        pid = self.worker()
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        idle = proc_status(pid, "VmRSS")
        request = urllib.request.Request(  # noqa: S310 - our own http server
            f"{self.base}/api/traces/{endpoint}/?filename={filename}",
            data=data,
            method="POST",
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/octet-stream",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - http
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        assert self.worker() == pid, "the worker was replaced during the upload"
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {"text": body[:300].decode("utf-8", "replace")}
        return Sent(status, parsed, idle, proc_status(pid, "VmHWM"), proc_status(pid, "VmRSS"))


@contextlib.contextmanager
def gunicorn_api(directory: Path) -> Iterator[GunicornApi]:
    """Migrate a fresh SQLite database under ``directory``, give alice (the demo's uploader)
    an API token, and serve the console with gunicorn until the block ends."""
    env = {
        **os.environ,
        "REPLAY_VAR_DIR": str(directory / "var"),
        "DJANGO_DEBUG": "1",
        "REPLAY_TASK_RUNNER": "eager",
        "WEB_CONCURRENCY": "1",
    }
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    subprocess.run([*manage, "demo", "--no-traces"], env=env, cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    token = subprocess.run(
        [*manage, "api_token", "create", "alice", "--name", "bombs"],
        env=env, cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    port = free_port()
    env["GUNICORN_BIND"] = f"127.0.0.1:{port}"
    with (directory / "gunicorn.log").open("wb") as log:  # the child keeps its own copy
        master = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "-c", "deploy/gunicorn.conf.py"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=30).read()  # noqa: S310
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline or master.poll() is not None:
                    raise RuntimeError(
                        "gunicorn did not start: " + (directory / "gunicorn.log").read_text()
                    ) from None
                time.sleep(0.3)
        yield GunicornApi(base, token, master)
    finally:
        master.send_signal(signal.SIGTERM)
        try:
            master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()


def answer(sent: Sent) -> str:
    body = sent.body.get("report", sent.body)
    code = body.get("error_code") or body.get("verdict") or body.get("status")
    return f"{sent.status} {code} {str(body.get('message', body.get('text', '')))[:90]}"


def run_server(quick: bool, wide: bool = False) -> int:
    with (
        tempfile.TemporaryDirectory(prefix="bench-bombs-server-") as tmp,
        gunicorn_api(Path(tmp)) as api,
    ):
        header = (
            f"{'shape':<28} {'sent KiB':>9} {'idle MiB':>9} {'peak MiB':>9} {'over idle':>10} "
            f"{'held after':>11}  answer"
        )
        print("each shape as one API upload to gunicorn (one sync worker)")
        print(header)
        print("-" * len(header))
        worst = 0.0
        shapes = (
            wide_shapes(quick)
            if wide
            else itertools.chain(server_shapes(quick), wide_shapes(quick))
        )
        for name, endpoint, filename, data in shapes:
            sent = api.send(endpoint, filename, data)
            worst = max(worst, sent.over_idle)
            print(
                f"{name:<28} {len(data) / 1024:>9.0f} {sent.idle:>9.0f} {sent.peak:>9.0f} "
                f"{sent.over_idle:>10.0f} {sent.held - sent.idle:>+11.0f}  {answer(sent)}"
            )
        print(f"worst peak over idle: {worst:.0f} MiB")
    return 0


def measured(argv: list[str], env: dict[str, str]) -> tuple[int, float, float, str]:
    """Exit code, wall seconds, peak RSS (MiB, the child's own VmHWM) and stdout of `argv`
    in its own process."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - t0
    hwm = [line for line in done.stderr.splitlines() if line.startswith("VmHWM ")]
    rss = int(hwm[-1].split()[1]) / 1024 if hwm else float("nan")
    return done.returncode, seconds, rss, done.stdout or done.stderr


def refusal(text: str, core: bool) -> str:
    if core:
        return text.strip().splitlines()[-1] if text.strip() else "?"
    try:
        report = json.loads(text[text.index("{") :])
    except ValueError:
        return text.strip().splitlines()[-1] if text.strip() else "?"
    return f"{report.get('error_code')} {report.get('message')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller bombs: a smoke run")
    parser.add_argument("--core", action="store_true", help="parsers only, no Django")
    parser.add_argument(
        "--server", action="store_true", help="the API of a real gunicorn, peak RSS per upload"
    )
    parser.add_argument(
        "--wide", action="store_true", help="with --server: only the long ContextOS values"
    )
    args = parser.parse_args()
    if args.server:
        return run_server(args.quick, args.wide)
    core = args.core or args.quick
    with tempfile.TemporaryDirectory(prefix="bench-bombs-") as tmp:
        directory = Path(tmp)
        env = {**os.environ, "REPLAY_VAR_DIR": str(directory / "var"), "DJANGO_DEBUG": "1"}
        env.pop("DATABASE_URL", None)
        if core:
            base_argv = [sys.executable, "-c", _CORE]
        else:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True
            )
            base_argv = [sys.executable, "-c", _MANAGE, "verify", "--json"]
        tiny = directory / "tiny.trace.json"
        tiny.write_bytes(b"{}")

        def run(sent: Path, read: Path, kind: str) -> tuple[int, float, float, str]:
            if core:
                return measured([*base_argv, str(read), kind], env)
            return measured([*base_argv, str(sent)], env)

        _c, base_seconds, baseline, _t = run(tiny, tiny, "trace")
        print(
            f"bombs refused by {'the parsers' if core else 'manage.py verify'}; baseline "
            f"(a 2-byte file): peak RSS {baseline:.0f} MiB, {base_seconds:.2f} s"
        )
        header = (
            f"{'bomb':<24} {'sent KiB':>10} {'expands MiB':>12} {'seconds':>8} "
            f"{'peak RSS MiB':>13} {'over base':>10}  refusal"
        )
        print(header)
        print("-" * len(header))
        ok = True
        for name, sent, read, kind, expanded in make_bombs(directory, args.quick):
            size = sent.stat().st_size + (read.stat().st_size if read != sent else 0)
            _code, seconds, rss, text = run(sent, read, kind)
            why = refusal(text, core)
            refused = "refused" in why or "MALFORMED_TRACE" in why or "INTEGRITY_FAILURE" in why
            ok = ok and refused
            print(
                f"{name:<24} {size / 1024:>10.0f} {expanded / MB:>12.0f} {seconds:>8.2f} "
                f"{rss:>13.0f} {rss - baseline:>10.0f}  {why[:110]}"
            )
        print("every bomb refused" if ok else "NOT OK: a bomb was not refused")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
