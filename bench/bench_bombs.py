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
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
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
from replay.errors import ReplayError
path, kind = Path(sys.argv[1]), sys.argv[2]
try:
    if kind == "yaml":
        from replay.formats import ahd
        from replay.formats.yaml12 import YAML12Error
        try:
            ahd.hash_structured(path.read_text())
        except YAML12Error as exc:
            print("refused", exc)
    else:
        from replay.formats import open_trace
        with path.open("rb") as fh:
            for _ in open_trace(fh, path.name).records():
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
    args = parser.parse_args()
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
