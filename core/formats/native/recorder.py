"""Runs the reference runtime live and writes the native trace it leaves behind.

External calls are answered by the seeded stand-in agent; snapshots and the seal are signed
with the key given. `tamper` helpers make the fixtures that golden tests and the demo need:
each changes exactly one thing and, where the point is a drift rather than a forgery,
re-seals the trace so only the replay itself can notice.

Pure: no Django, no clock (the caller passes started_at).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from core.canonical import mace_v1
from core.formats import native
from core.replay.registry import Registry, ReplayState
from core.replay.rng import DeterministicRNG
from core.replay.runtime import (
    REQUIRED_SNAPSHOTS,
    ROUTES,
    RUNTIME_NAME,
    RUNTIME_VERSION,
    RecordOptions,
    reference_events,
    reference_snapshots,
    stand_in_agent,
    trace_id_for,
)
from core.replay.signatures import sign

Signer = Callable[[bytes], dict[str, str]]


def signer_for(key_id: str, alg: str, secret: bytes) -> Signer:
    """A signer with the given key (HMAC secret or raw Ed25519 private key)."""
    return lambda message: sign(message, key_id=key_id, alg=alg, secret=secret)


def record(opts: RecordOptions, registry: Registry, signer: Signer) -> dict[str, Any]:
    """Run the reference runtime for `opts.seed` and return the signed native trace."""
    rng = DeterministicRNG(opts.seed)
    bodies = reference_snapshots(rng)
    snapshots = []
    for kind in REQUIRED_SNAPSHOTS:
        message = mace_v1(bodies[kind])
        snapshots.append(
            {
                "kind": kind,
                "snapshot_id": native.snapshot_id_of(bodies[kind]),
                "schema_version": 1,
                "body": bodies[kind],
                "signature": signer(message),
            }
        )
    runtime = registry.runtime(RUNTIME_NAME)
    assert runtime is not None, "the reference runtime is registered by core.replay.runtime"
    materialiser = runtime.materialiser(bodies, rng)
    events = []
    prev = ""
    for seq, (type_, payload) in enumerate(reference_events(opts, rng)):
        event = {
            "seq": seq,
            "type": type_,
            "event_id": native.event_id_of(opts.seed, seq, type_),
            "payload": payload,
        }
        prev, _body = native.event_hash(prev, event)
        event["hash"] = prev
        events.append(event)
        materialiser.apply(event)
    state = ReplayState(snapshots=bodies, materialised=materialiser.state())
    router = registry.function("router.decide@1")
    compose = registry.function("answer.compose@1")
    assert router is not None
    assert compose is not None
    agent_rng = rng.fork("agent")
    steps: list[dict[str, Any]] = []
    outputs: dict[str, dict[str, Any]] = {}
    last: Any = None
    for i in range(opts.iterations):
        query = f"question {i}"
        decide_input = {"query": query, "candidates": list(ROUTES)}
        seq = len(steps)
        decision = router(decide_input, state, rng.fork(f"step:{seq}"))
        steps.append(
            {
                "seq": seq,
                "step_id": f"route-{i}",
                "kind": "deterministic",
                "fn": "router.decide@1",
                "input": decide_input,
                "output": decision,
            }
        )
        ref = f"out-{i:04d}"
        call_input = {"route": decision["route"], "prompt": query}
        content = stand_in_agent(decision["route"], query, agent_rng)
        steps.append(
            {
                "seq": len(steps),
                "step_id": f"agent-{i}",
                "kind": "external",
                "name": "llm.complete",
                "input": call_input,
                "output_ref": ref,
            }
        )
        digest = native.output_hash_of(content)
        outputs[ref] = {"content": content, "hash": digest}
        compose_input = {"route": decision["route"], "output_hash": digest, "query": query}
        seq = len(steps)
        last = compose(compose_input, state, rng.fork(f"step:{seq}"))
        steps.append(
            {
                "seq": seq,
                "step_id": f"answer-{i}",
                "kind": "deterministic",
                "fn": "answer.compose@1",
                "input": compose_input,
                "output": last,
            }
        )
    document: dict[str, Any] = {
        "format": native.FORMAT,
        "schema_version": native.SCHEMA_VERSION,
        "trace_id": trace_id_for(opts.seed),
        "job": {
            "job_id": f"job-{opts.seed}",
            "job_seed": opts.seed,
            "runtime": {"name": RUNTIME_NAME, "version": RUNTIME_VERSION},
            "replayable": opts.persist_outputs,
            "started_at": opts.started_at,
        },
        "required_snapshots": list(REQUIRED_SNAPSHOTS),
        "snapshots": snapshots,
        "events": events,
        "steps": steps,
        "outputs": outputs,
        "final_answer": runtime.final_answer(last, len(steps)),
    }
    if not opts.persist_outputs:
        for output in outputs.values():
            del output["content"]
    return reseal(document, signer)


def reseal(document: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """Sign the document's seal afresh (what a runtime does when it writes the trace)."""
    document = {k: v for k, v in document.items() if k != "seal"}
    document["seal"] = signer(native.seal_message_of(document))
    return document


def resign_snapshot(document: dict[str, Any], kind: str, body: Any, signer: Signer) -> None:
    """Replace a snapshot's body, id and signature consistently (then reseal the document)."""
    for snap in document["snapshots"]:
        if snap["kind"] == kind:
            snap["body"] = body
            snap["snapshot_id"] = native.snapshot_id_of(body)
            snap["signature"] = signer(mace_v1(body))


def rechain(document: dict[str, Any]) -> None:
    """Recompute every event id and chain hash after events were edited on purpose."""
    prev = ""
    seed = document["job"]["job_seed"]
    for event in document["events"]:
        event["event_id"] = native.event_id_of(seed, event["seq"], event["type"])
        prev, _ = native.event_hash(prev, event)
        event["hash"] = prev


def deep(document: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(document)
