"""Demo and golden traces: one recorded run and the variants that produce every verdict.

Each variant changes exactly one thing about a recorded trace. Drifts (a recorded output the
runtime no longer reproduces, a wrong final answer) are re-sealed, as a runtime that really
produced them would have sealed them; tampering is not.
"""

from __future__ import annotations

import copy
import gzip
from typing import Any

from core.formats import default_registry, native
from core.formats.native.recorder import Signer, record, reseal
from core.replay.registry import Registry
from core.replay.runtime import RecordOptions


def _record(seed: str, signer: Signer, registry: Registry, **kw: Any) -> dict[str, Any]:
    return record(RecordOptions(seed=seed, **kw), registry, signer)


def variants(signer: Signer, registry: Registry | None = None) -> dict[str, dict[str, Any]]:
    """name -> document, covering every verdict of the native format."""
    reg = registry or default_registry()
    base = _record("s1", signer, reg)
    out: dict[str, dict[str, Any]] = {"ok": base}

    missing_snapshot = copy.deepcopy(_record("s2-retention", signer, reg))
    for snap in missing_snapshot["snapshots"]:
        if snap["kind"] == "router":
            del snap["body"]  # not retained: the seal still verifies, replay cannot run
    out["missing_snapshot"] = missing_snapshot

    tampered = copy.deepcopy(base)
    brain = next(s for s in tampered["snapshots"] if s["kind"] == "brainstate")
    brain["body"]["energy"] = 0.91  # one value changed after signing
    out["tampered_snapshot"] = tampered

    chain = copy.deepcopy(base)
    chain["events"][4]["payload"]["rewritten"] = True  # an event edited after the fact
    out["broken_chain"] = chain

    not_persisted = copy.deepcopy(base)
    del not_persisted["outputs"]["out-0001"]["content"]
    out["missing_output"] = not_persisted

    diverged = copy.deepcopy(base)
    decision = diverged["steps"][3]["output"]  # iteration 1's routing decision
    wrong = "write" if decision["route"] != "write" else "math"
    decision["route"] = wrong
    out["diverged"] = reseal(diverged, signer)

    mismatch = copy.deepcopy(base)
    mismatch["final_answer"]["answer"] = "search:0000000000000000"
    out["result_mismatch"] = reseal(mismatch, signer)

    sandbox = _record("s3-unpersisted", signer, reg, persist_outputs=False)
    out["unpersisted"] = sandbox
    return out


def demo_traces(signer: Signer) -> list[tuple[str, bytes]]:
    """(filename, bytes) for the demo: every verdict, both spellings, one gzipped."""
    docs = variants(signer)
    files = [(f"demo-{name}.trace.json", native.dumps_document(doc)) for name, doc in docs.items()]
    big = _record("s4-long", signer, default_registry(), iterations=12, filler_events=400)
    files.append(
        ("demo-long.trace.jsonl.gz", gzip.compress(b"".join(native.iter_jsonl(big)), mtime=0))
    )
    return files
