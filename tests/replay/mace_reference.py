"""MACE's reference rules, written out literally from seed 003 and MACE's writer, and a
generator of MACE reflective logs and snapshot files made with them.

Independent of ``core.formats.mace`` on purpose: the tests verify files made here with the
console's code, and the bench times both on the same files. The rules:

- canonical JSON (MACE ``canonical_json_serialize``): string values NFKD-normalised, floats
  rounded to 9 decimals (``float("{:.9f}".format(x))``), ``json.dumps(sort_keys=True,
  separators=(",", ":"), ensure_ascii=False)``;
- signature (MACE ``sign_payload``): ``hmac.new(secret, canonical.encode("utf-8"),
  sha256).hexdigest()``;
- the writer's immutable sub-payload: ``log_id``, ``percept.text``, ``final_output.text``,
  ``router_decision.decision_id``;
- ids (seed 003 §5): ``snapshot_id = sha256(config_hash + ":" + schema_version + ":" +
  seed_namespace)``, ``event_id = sha256(job_seed + ":" + sequence_index + ":" + event_type)``.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import unicodedata
from pathlib import Path
from typing import Any

KEY_ID = "reflective_log_key"
SECRET = b"mace-reference-secret-0123456789"
KINDS = ("selfrep", "brainstate", "router", "privacy", "governance")


def canonical_json_serialize(obj: Any) -> str:
    def normalize(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: normalize(v) for k, v in o.items()}
        if isinstance(o, list):
            return [normalize(v) for v in o]
        if isinstance(o, str):
            return unicodedata.normalize("NFKD", o)
        if isinstance(o, float):
            return float(f"{o:.9f}")
        return o

    return json.dumps(normalize(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sign_payload(payload: Any, secret: bytes = SECRET) -> str:
    serialized = canonical_json_serialize(payload)
    return hmac.new(secret, serialized.encode("utf-8"), hashlib.sha256).hexdigest()


def verify_signature(payload: Any, signature: str, secret: bytes = SECRET) -> bool:
    return hmac.compare_digest(signature, sign_payload(payload, secret))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def snapshot(kind: str, body: Any, *, namespace: str, secret: bytes = SECRET) -> dict[str, Any]:
    config_hash = sha256_hex(canonical_json_serialize(body))
    snap: dict[str, Any] = {
        "snapshot_id": sha256_hex(f"{config_hash}:1:{namespace}"),
        "kind": kind,
        "schema_version": 1,
        "seed_namespace": namespace,
        "config_hash": config_hash,
        "generator": "sha256(config_hash:schema_version:seed_namespace)",
        "body": body,
    }
    snap["signature"] = sign_payload(snap, secret)
    snap["signature_key_id"] = KEY_ID
    return snap


def sign_log(log: dict[str, Any], secret: bytes = SECRET, key_id: str = KEY_ID) -> dict[str, Any]:
    """What MACE's writer does before it persists a log."""
    subpayload = {
        "log_id": log["log_id"],
        "percept_text": log["percept"]["text"],
        "final_output_text": log["final_output"]["text"],
        "router_decision_id": log["router_decision"]["decision_id"],
    }
    log["immutable_subpayload"] = subpayload
    log["signature"] = sign_payload(subpayload, secret)
    log["signature_key_id"] = key_id
    return log


def job(seed: str = "s1", *, iterations: int = 2, persisted: bool = True) -> dict[str, Any]:
    """A MACE job: its five snapshots (kind -> file) and its signed reflective log."""
    snaps = {
        "selfrep": snapshot(
            "selfrep", {"modules": ["router", "profile_agent"], "version": 3}, namespace=seed
        ),
        "brainstate": snapshot(
            "brainstate",
            {"goals": [], "attention_gain": 0.5, "explore_bias": 0.1, "tick_count": 7},
            namespace=seed,
        ),
        "router": snapshot(
            "router", {"depth_level": 1, "memory_strategy": "sem_only"}, namespace=seed
        ),
        "privacy": snapshot("privacy", {"redact": ["email", "phone"]}, namespace=seed),
        "governance": snapshot("governance", {"council_size": 3, "quorum": 2}, namespace=seed),
    }
    trace = []
    outputs = []
    for i in range(iterations):
        out_id = f"out_{seed}_{i}"
        output = {"agent_id": "profile_agent", "text": f"answer {i} café", "confidence": 0.75}
        trace.append(
            {
                "iteration_id": f"it_{i}",
                "router_input_snapshot": {"percept_id": f"percept_{seed}", "tick": i},
                "router_output": {
                    "decision_id": f"dec_{seed}_{i}",
                    "selected_agents": [{"agent_id": "profile_agent", "role": "primary"}],
                },
                "agent_output_id": out_id,
                "agent_output": output,
            }
        )
        if persisted:
            outputs.append({"agent_output_id": out_id, "output": copy.deepcopy(output)})
    events = [
        {"sequence_index": n, "event_type": t, "event_id": sha256_hex(f"{seed}:{n}:{t}")}
        for n, t in enumerate(["apt_event", "action_request", "episodic_write"], start=1)
    ]
    log: dict[str, Any] = {
        "log_id": f"log_{seed}",
        "timestamp": "2025-01-01T12:00:00Z",
        "job_id": f"job_{seed}",
        "job_seed": seed,
        "percept": {"percept_id": f"percept_{seed}", "text": "Hello world", "intent": "greeting"},
        "router_decision": {
            "decision_id": f"dec_{seed}",
            "percept_id": f"percept_{seed}",
            "selected_agents": [{"agent_id": "profile_agent", "role": "primary"}],
            "depth_level": 1,
        },
        "iteration_trace": trace,
        "agent_outputs": outputs,
        "council_votes": [],
        "event_refs": events,
        "brainstate_before": {"goals": [], "attention_gain": 0.5, "explore_bias": 0.1},
        "brainstate_after": {"goals": [], "attention_gain": 0.5, "explore_bias": 0.1},
        "final_output": {"text": "Hello!", "confidence": 1.0, "speculative": False},
        "random_seed": seed,
        "model_versions": ["stage1"],
        "REPLAYABLE": persisted,
        **{f"{k}_snapshot_id": snaps[k]["snapshot_id"] for k in KINDS},
    }
    return {"snapshots": snaps, "log": sign_log(log)}


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8")


def write(directory: Path, made: dict[str, Any], name: str = "log.json") -> Path:
    """The log and its snapshot files (``<snapshot_id>.json``) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for snap in made["snapshots"].values():
        (directory / f"{snap['snapshot_id']}.json").write_bytes(dumps(snap))
    path = directory / name
    path.write_bytes(dumps(made["log"]))
    return path


def reference_verify(log: dict[str, Any], snapshots: dict[str, dict[str, Any]]) -> bool:
    """The seed's checks as its reference shows them (§6 steps 2-3 and the writer's HMAC):
    snapshot ids present and signed, the log's sub-payload signed."""
    for kind in KINDS:
        snap = snapshots.get(log.get(f"{kind}_snapshot_id"))
        if snap is None:
            return False
        part = {k: v for k, v in snap.items() if k not in ("signature", "signature_key_id")}
        if not verify_signature(part, snap["signature"]):
            return False
    return verify_signature(log["immutable_subpayload"], log["signature"])
