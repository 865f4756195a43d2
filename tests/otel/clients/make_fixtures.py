"""Capture the golden OTLP bodies under tests/otel/fixtures/ from the real clients.

    .venv/bin/python -m tests.otel.clients.make_fixtures [--out DIR] [--only NAME ...]

Each fixture set is one run of run_client.py (harness.converse) against the fake OpenAI
server, exported with gzip and stored gunzipped, exactly as the capture server received it:

- `<set>-proto[-N].bin`, `<set>-json[-N].json`: the export bodies (N, from 1, in arrival order
  when a run sends more than one request of an encoding);
- `<set>.seen.json`: the request bodies the fake OpenAI server received, in order;
- `manifest.json`: every set, its options, files, trace id, span names and the command.

A set exported with `both` encodings sent the same spans twice, from one tracer provider:
decoding its `.bin` and its `.json` must give identical span dicts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .harness import REQUIREMENTS, ROOT, converse, ensure_clients_venv

OUT = ROOT / "tests" / "otel" / "fixtures"

#: name -> (instrumentation, options of harness.client_command)
SETS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai-v2": ("openai-v2", {"exporter": "both"}),
    "openinference": ("openinference", {"exporter": "both"}),
    "openllmetry": ("openllmetry", {"exporter": "both"}),
    "openai-v2-nocontent": ("openai-v2", {"exporter": "both", "content": False}),
    "openinference-nocontent": ("openinference", {"exporter": "proto", "content": False}),
    "openllmetry-nocontent": ("openllmetry", {"exporter": "proto", "content": False}),
    "openai-v2-stream": ("openai-v2", {"exporter": "proto", "stream": True}),
    "openinference-stream": ("openinference", {"exporter": "proto", "stream": True}),
    "openllmetry-stream": ("openllmetry", {"exporter": "proto", "stream": True}),
    "openai-v2-onebyone": ("openai-v2", {"exporter": "proto", "one_by_one": True}),
    "openai-v2-divergent": ("openai-v2", {"exporter": "proto", "divergent_tool_result": True}),
    "none": ("none", {"exporter": "both"}),
}
HEADERS = {"Authorization": "Bearer fixture-token"}


def _file_name(name: str, kind: str, index: int, count: int) -> str:
    """`openai-v2-nocontent` + proto -> `openai-v2-proto-nocontent.bin` (the encoding after the
    instrumentation, then the set's variant), numbered when a run sent several requests."""
    instrumentation = SETS[name][0]
    stem = f"{instrumentation}-{kind}{name[len(instrumentation) :]}"
    if count > 1:
        stem += f"-{index}"
    return stem + (".json" if kind == "json" else ".bin")


def make(name: str, venv: Any, out: Path) -> dict[str, Any]:
    instrumentation, options = SETS[name]
    with tempfile.TemporaryDirectory() as scratch:
        conversation = converse(
            venv, instrumentation, directory=Path(scratch), headers=HEADERS, **options
        )
    files = []
    for kind in ("proto", "json"):
        bodies = conversation.bodies(kind)
        for index, body in enumerate(bodies, start=1):
            file_name = _file_name(name, kind, index, len(bodies))
            (out / file_name).write_bytes(body)
            files.append(file_name)
    print(f"{name}: {', '.join(files)} ({conversation.seconds:.1f} s)", file=sys.stderr)
    seen = f"{name}.seen.json"
    (out / seen).write_text(
        json.dumps(conversation.seen, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    shown = [
        "var/otel-clients/<hash>/bin/python"
        if i == 0
        else str(Path(a).relative_to(ROOT))
        if i == 1
        else a
        for i, a in enumerate(conversation.command)
    ]
    return {
        "instrumentation": instrumentation,
        "options": options,
        "files": files,
        "seen": seen,
        "trace_id": conversation.summary["trace_id"],
        "exports": conversation.summary["exports"],
        "command": shown,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--only", nargs="*", choices=sorted(SETS), help="these sets only (keeps the others)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    venv = ensure_clients_venv()
    if venv.build_seconds is not None:
        print(f"built {venv.path} in {venv.build_seconds:.1f} s", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest: dict[str, Any] = {"sets": {}}
    if args.only and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
    for name in args.only or SETS:
        for old in manifest["sets"].get(name, {}).get("files", []):
            (args.out / old).unlink(missing_ok=True)
        manifest["sets"][name] = make(name, venv, args.out)
    versions = venv.versions()
    pinned = {
        line.split("==")[0].strip().lower()
        for line in REQUIREMENTS.read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    manifest["versions"] = {k: v for k, v in sorted(versions.items()) if k.lower() in pinned}
    manifest["python"] = ".".join(map(str, sys.version_info[:3]))
    manifest["sets"] = dict(sorted(manifest["sets"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"done in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
