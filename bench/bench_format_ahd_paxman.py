"""Files verified per second for the AHD and Paxman formats, beside reference code.

Run: ``.venv/bin/python bench/bench_format_ahd_paxman.py [--files N] [--repeat R] [--quick]``

Per format, N generated files (10,000 by default; 500 with ``--quick``) are verified by the
console's own code, and the same files by reference code doing only the hashing the seeds
describe:

- Paxman: the console's ``paxman.verify_bytes`` (strict JSON, type check, versions,
  capabilities, replay hash, rehydration) beside Paxman's reference hashing from seed 001
  §2.1 in plain Python: ``json.loads``, then ``sha256("|".join(stable_dumps(x) for x in
  the hashed fields))`` with ``stable_dumps = json.dumps(sort_keys=True, separators=(",",
  ":"))``, compared with ``replay_hash``. Each artifact is generated with its replay_hash
  computed by that reference code.
- AHD: the console's ``ahd.verify_path`` (the `verify` command: the sidecar's schema, the
  checkout's hardened reads, YAML 1.2 parsed by the console's parser, js-sorted hashing)
  beside seed 000's hash contract in plain Python: ``json.load`` the sidecar, PyYAML
  ``safe_load`` + ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
  for the token, the brief's raw bytes, sha256 each, compare. Each run's hashes are
  computed by that reference code, so the console verifying every file also checks both
  agree.

Timed in process CPU time (other processes on the machine do not count), best of R passes;
every pass must find every file ok. Peak traced Python allocation of one console pass
(tracemalloc, measured separately) and the process's peak RSS are printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from core.formats import ahd, paxman

HASHED = (
    "paxman_version",
    "planner_version",
    "replay_version",
    "execution_plan",
    "field_results",
    "evidence",
    "diagnostics",
    "statistics",
    "contract_id",
    "capability_versions",
)
WORDS = ["alpha", "beta", "gamma", "invoice", "total", "vendor", "naïve", "café", "Straße"]


# --- Paxman ------------------------------------------------------------------------------------


def stable_dumps(obj: Any) -> str:
    """Paxman ``serialization.stable_dumps`` (seed 001 §2.1)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def reference_replay_hash(doc: dict[str, Any]) -> str:
    """Seed 001 §2.1: the hashed fields, stable_dumps each, joined by ``|``, sha256."""
    values = {**doc, "replay_version": "1"}
    parts = [stable_dumps(values.get(key)) for key in HASHED]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()


def make_artifact(rnd: random.Random, i: int) -> bytes:
    fields = {}
    for n in range(rnd.randint(2, 8)):
        path = f"field_{n}"
        fields[path] = {
            "field_path": path,
            "status": rnd.choice(["SUCCESS", "PARTIAL_SUCCESS", "UNRESOLVED"]),
            "value": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4))),
            "confidence": rnd.randint(0, 100),
            "candidates": [],
            "evidence_refs": [f"ev-{i}-{n}"],
        }
    doc = {
        "status": "SUCCESS",
        "id": f"artifact-{i}",
        "normalized_data": {p: r["value"] for p, r in fields.items()},
        "field_results": fields,
        "unresolved_fields": [],
        "evidence": [{"id": f"ev-{i}-{n}", "source": "input"} for n in range(len(fields))],
        "diagnostics": [],
        "execution_plan": {"steps": [{"capability": "regex_extraction", "fields": list(fields)}]},
        "statistics": {"fields": len(fields), "cost_micros": rnd.randint(0, 10_000)},
        "contract_id": f"contract-{i % 17}",
        "paxman_version": "1.0.2",
        "planner_version": "1",
        "capability_versions": {"regex_extraction": "1.0", "validation": "1.0"},
        "metadata": {},
        "created_at": "2026-05-01T10:00:00Z",
    }
    doc["replay_hash"] = reference_replay_hash(doc)
    return (stable_dumps(doc) + "\n").encode("utf-8")


def paxman_console(files: list[bytes]) -> int:
    registry = paxman.capability_registry(eps=[])
    ok = 0
    for data in files:
        ok += paxman.verify_bytes(data, registry=registry).status == "ok"
    return ok


def paxman_reference(files: list[bytes]) -> int:
    ok = 0
    for data in files:
        doc = json.loads(data)
        ok += reference_replay_hash(doc) == doc["replay_hash"]
    return ok


# --- AHD ---------------------------------------------------------------------------------------


def reference_structured(text: str) -> str:
    """Seed 000's hash contract: parse, sort keys, JSON without whitespace, sha256."""
    value = yaml.safe_load(text)
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode("utf-8")).hexdigest()


def reference_raw(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_ahd_checkout(root: Path, n: int, rnd: random.Random) -> list[Path]:
    (root / "package.json").write_text(json.dumps({"name": ahd.PACKAGE_NAME}))
    for sub in ("tokens", "briefs", "docs/evals"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    sidecars = []
    for i in range(n):
        colours = "\n".join(f"  c{k}: '#{rnd.getrandbits(24):06x}'" for k in range(6))
        token = (
            f"# token {i}\nname: token-{i}\nversion: {rnd.randint(1, 9)}\n"
            f"palette:\n{colours}\ntype:\n  scale: [12, 14, 16, 20, 24, 32]\n"
            f"  family: {rnd.choice(WORDS)}\nnotes: '{' '.join(rnd.sample(WORDS, 4))}'\n"
        )
        brief = f"# Brief {i}\n\n" + " ".join(rnd.choice(WORDS) for _ in range(60)) + "\n"
        token_path, brief_path = f"tokens/t{i}.yml", f"briefs/b{i}.md"
        (root / token_path).write_text(token, encoding="utf-8")
        (root / brief_path).write_text(brief, encoding="utf-8")
        doc = {
            "schema_version": 1,
            "kind": "eval-live",
            "ahd_version": "0.11.0",
            "ahd_commit": f"{rnd.getrandbits(160):040x}",
            "git_dirty": False,
            "node_version": "v22.22.2",
            "platform": "linux-x64",
            "invoked_at": "2026-04-21T21:48:00.597Z",
            "argv": ["node", "ahd", "eval-live", token_path, brief_path],
            "token": {"path": token_path, "hash": reference_structured(token)},
            "brief": {"path": brief_path, "hash": reference_raw(brief.encode("utf-8"))},
            "sampling": {"n": 5, "temperature": None, "seed": None},
            "models": [{"id": "m", "provider": "p", "provider_request_ids": [f"req_{i}"]}],
            "conditions": {"requested": ["raw"], "effective": ["raw"]},
        }
        sidecar = root / "docs" / "evals" / f"run-{i}.replay.json"
        sidecar.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        sidecars.append(sidecar)
    return sidecars


def ahd_console(root: Path, sidecars: list[Path]) -> int:
    ok = 0
    for path in sidecars:
        ok += ahd.verify_path(path, root=root).status == "ok"
    return ok


def ahd_reference(root: Path, sidecars: list[Path]) -> int:
    ok = 0
    for path in sidecars:
        doc = json.loads(path.read_bytes())
        token = (root / doc["token"]["path"]).read_text("utf-8")
        brief = (root / doc["brief"]["path"]).read_bytes()
        ok += (
            reference_structured(token) == doc["token"]["hash"]
            and reference_raw(brief) == doc["brief"]["hash"]
        )
    return ok


# --- timing ------------------------------------------------------------------------------------


def best_of(fn: Callable[[], int], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        ok = fn()
        seconds = time.process_time() - t0
        if ok != n:
            raise SystemExit(f"only {ok} of {n} files verified ok")
        best = min(best, seconds)
    return best


def peak_traced(fn: Callable[[], int]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="500 files, one pass")
    args = parser.parse_args()
    n, repeat = (500, 1) if args.quick else (args.files, args.repeat)
    rnd = random.Random(20260423)
    print(f"python {platform.python_version()} on {platform.machine()}; {n} files per format")
    print(f"{'format':<8} {'verifier':<44} {'files/s':>10} {'peak traced KiB':>16}")

    artifacts = [make_artifact(rnd, i) for i in range(n)]
    rows = [
        ("paxman", "console paxman.verify_bytes", lambda: paxman_console(artifacts)),
        ("paxman", "reference: seed 001 hashing in Python", lambda: paxman_reference(artifacts)),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-ahd-") as tmp:
        root = Path(tmp)
        sidecars = make_ahd_checkout(root, n, rnd)
        rows += [
            ("ahd", "console ahd.verify_path (checkout)", lambda: ahd_console(root, sidecars)),
            (
                "ahd",
                "reference: seed 000 hash contract (PyYAML)",
                lambda: ahd_reference(root, sidecars),
            ),
        ]
        rates = {}
        for fmt, label, fn in rows:
            seconds = best_of(fn, n, repeat)
            peak = peak_traced(fn) if label.startswith("console") else None
            rates[(fmt, label.startswith("console"))] = n / seconds
            peak_text = f"{peak / 1024:16.0f}" if peak is not None else f"{'-':>16}"
            print(f"{fmt:<8} {label:<44} {n / seconds:10.0f} {peak_text}")
    for fmt in ("paxman", "ahd"):
        ratio = rates[(fmt, True)] / rates[(fmt, False)]
        print(f"{fmt}: console / reference = {ratio:.2f}x")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS {rss / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
