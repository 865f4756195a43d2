"""Pins of the native replay's report where no other test looks (issue 20: one check
pipeline): the whole report for an erased event, a step out of order, an output listed twice,
an unregistered runtime or function, and the progress callback over a long trace.

The expected reports were printed by the engine before its steps became a pipeline of named
checks (core/replay/pipeline.py), and must not change with it.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest

from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import record, reseal
from core.replay.registry import Registry, Runtime
from core.replay.runtime import (
    RUNTIME_NAME,
    RecordOptions,
    ReferenceMaterialiser,
    answer_compose_v1,
    final_answer_v1,
)
from tests.replay.helpers import golden_key_ring, golden_signer

KEYS = golden_key_ring()
SIGNER = golden_signer()


def recorded(**kw: Any) -> dict[str, Any]:
    return record(RecordOptions(seed="pins", **kw), default_registry(), SIGNER)


def replay_bytes(data: bytes, name: str, **kw: Any) -> dict[str, Any]:
    trace = native.open_native(io.BytesIO(data), name)
    kw.setdefault("registry", default_registry())
    return engine.replay(trace, mode=engine.AUDIT, keys=KEYS, **kw).to_json()


def replay_doc(document: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return replay_bytes(native.dumps_document(document), "t.trace.json", **kw)


def checks(report: dict[str, Any]) -> list[tuple[str, bool, str]]:
    return [(c["name"], c["ok"], c["detail"]) for c in report["checks"]]


def test_an_erased_event_links_the_chain_by_its_recorded_hash_and_skips_the_seal():
    document = copy.deepcopy(recorded())
    event = document["events"][2]
    event["payload"] = {**event["payload"], "erased": "[erased]"}
    report = replay_doc(document, erased=[{"location": "event 2", "path": "payload.erased"}])
    assert report == PIN_ERASED


def test_a_step_out_of_order_is_malformed_naming_it():
    document = copy.deepcopy(recorded())
    document["steps"][1]["seq"] = 7
    report = replay_doc(reseal(document, SIGNER))
    assert report == PIN_STEP_ORDER


def test_an_output_listed_twice_in_json_lines_is_malformed_naming_it():
    lines = list(native.iter_jsonl(recorded(persist_outputs=True)))
    outputs = [line for line in lines if b'"record":"output"' in line]
    data = b"".join([*lines, outputs[0]])
    report = replay_bytes(data, "t.trace.jsonl")
    assert report == PIN_OUTPUT_TWICE


def test_an_unregistered_runtime_is_capability_not_found():
    report = replay_doc(recorded(), registry=Registry())
    assert report == PIN_NO_RUNTIME


def test_an_unregistered_step_function_is_capability_not_found_at_its_step():
    registry = Registry()
    registry.register("answer.compose@1", answer_compose_v1)
    registry.register_runtime(
        Runtime(name=RUNTIME_NAME, materialiser=ReferenceMaterialiser, final_answer=final_answer_v1)
    )
    report = replay_doc(recorded(), registry=registry)
    assert report == PIN_NO_FUNCTION


def test_progress_is_called_every_4096_records_and_once_at_the_end():
    seen: list[int] = []
    document = recorded(iterations=1, filler_events=5000)
    report = replay_doc(document, progress=seen.append)
    assert report["status"] == engine.OK
    assert seen == PIN_PROGRESS


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_over_json_lines_is_called_at_the_same_counts(workers):
    # the events of a run (a chunk's plain events, taken whole) are counted one by one
    seen: list[int] = []
    document = recorded(iterations=1, filler_events=5000)
    data = b"".join(native.iter_jsonl(document))
    report = replay_bytes(data, "t.trace.jsonl", progress=seen.append, workers=workers)
    assert report["status"] == engine.OK
    assert seen == PIN_PROGRESS


# --- the reports the engine printed before the pipeline -----------------------------------

PIN_ERASED = {
    "authoritative": False,
    "broke_at": None,
    "checks": [
        {
            "detail": "replay-trace v1 (json): 11 events, 9 steps, 3 outputs",
            "name": "format",
            "ok": True,
        },
        {"detail": "not checked (offline, no ledger)", "name": "halts", "ok": True},
        {
            "detail": "all of selfrep, brainstate, router, privacy, governance",
            "name": "required_snapshots",
            "ok": True,
        },
        {"detail": "5 snapshot ids and signatures verify", "name": "snapshots", "ok": True},
        {
            "detail": "11 event ids and chain links verify; the chain hashes of 1 event "
            "cannot be recomputed, their personal values are erased: event 2 "
            "(payload.erased)",
            "name": "events",
            "ok": True,
        },
        {
            "detail": "not checked: the seal covers the erased values of event 2",
            "name": "seal",
            "ok": True,
        },
        {
            "detail": "3 stored outputs match their hashes; 3 consumed outputs match the "
            "hashes their steps consumed",
            "name": "outputs",
            "ok": True,
        },
        {"detail": "9 steps replayed", "name": "steps", "ok": True},
        {
            "detail": "recomputed final answer equals the stored one",
            "name": "final_answer",
            "ok": True,
        },
    ],
    "divergences": [],
    "erased": [{"location": "event 2", "path": "payload.erased"}],
    "error_code": None,
    "expected": None,
    "force_continued": False,
    "format": "replay-trace",
    "message": "",
    "missing": [],
    "mode": "audit",
    "observed": None,
    "replayable": True,
    "snapshot_ids": [
        "sha256:f42e6df1d134e5f7dee9d34887e6426d9dc59ac1b6eff36026f1489f77b16bd0",
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88",
        "sha256:7ab30f48a4b7df8f0f95ad096544a2cff03fecc7129b868a4ff96a8908756e0b",
        "sha256:eb23b83671a178798f47820f240c72626c597407900f587e9b00c276169a8ef3",
        "sha256:4f874c0b7b7500d41b18b806f350981901faef67035427a88942dad5bf9f71d6",
    ],
    "stats": {"events": 11, "outputs": 3, "steps": 9},
    "status": "ok",
    "substituted": [],
    "trace_id": "4f75c2678a3bc3ba2a9f87c830ba18d4",
    "unprotected_fields": ["meta", "job.started_at"],
    "within_epsilon": [],
}

PIN_STEP_ORDER = {
    "authoritative": False,
    "broke_at": None,
    "checks": [
        {"detail": "steps[1]: step seq 7 where 1 was expected", "name": "format", "ok": False}
    ],
    "divergences": [],
    "error_code": "MALFORMED_TRACE",
    "expected": None,
    "force_continued": False,
    "format": "replay-trace",
    "message": "steps[1]: step seq 7 where 1 was expected",
    "missing": [],
    "mode": "audit",
    "observed": None,
    "replayable": False,
    "snapshot_ids": [
        "sha256:f42e6df1d134e5f7dee9d34887e6426d9dc59ac1b6eff36026f1489f77b16bd0",
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88",
        "sha256:7ab30f48a4b7df8f0f95ad096544a2cff03fecc7129b868a4ff96a8908756e0b",
        "sha256:eb23b83671a178798f47820f240c72626c597407900f587e9b00c276169a8ef3",
        "sha256:4f874c0b7b7500d41b18b806f350981901faef67035427a88942dad5bf9f71d6",
    ],
    "stats": {"events": 11, "outputs": 3, "steps": 9},
    "status": "refused",
    "substituted": [],
    "trace_id": "4f75c2678a3bc3ba2a9f87c830ba18d4",
    "unprotected_fields": ["meta", "job.started_at"],
    "within_epsilon": [],
}

PIN_OUTPUT_TWICE = {
    "authoritative": False,
    "broke_at": None,
    "checks": [
        {"detail": "line 25: output_ref 'out-0000' appears twice", "name": "format", "ok": False}
    ],
    "divergences": [],
    "error_code": "MALFORMED_TRACE",
    "expected": None,
    "force_continued": False,
    "format": "replay-trace",
    "message": "line 25: output_ref 'out-0000' appears twice",
    "missing": [],
    "mode": "audit",
    "observed": None,
    "replayable": False,
    "snapshot_ids": [
        "sha256:f42e6df1d134e5f7dee9d34887e6426d9dc59ac1b6eff36026f1489f77b16bd0",
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88",
        "sha256:7ab30f48a4b7df8f0f95ad096544a2cff03fecc7129b868a4ff96a8908756e0b",
        "sha256:eb23b83671a178798f47820f240c72626c597407900f587e9b00c276169a8ef3",
        "sha256:4f874c0b7b7500d41b18b806f350981901faef67035427a88942dad5bf9f71d6",
    ],
    "stats": {},
    "status": "refused",
    "substituted": [],
    "trace_id": "4f75c2678a3bc3ba2a9f87c830ba18d4",
    "unprotected_fields": ["meta", "job.started_at"],
    "within_epsilon": [],
}

PIN_NO_RUNTIME = {
    "authoritative": False,
    "broke_at": None,
    "checks": [
        {
            "detail": "replay-trace v1 (json): 11 events, 9 steps, 3 outputs",
            "name": "format",
            "ok": True,
        },
        {"detail": "not checked (offline, no ledger)", "name": "halts", "ok": True},
        {
            "detail": "all of selfrep, brainstate, router, privacy, governance",
            "name": "required_snapshots",
            "ok": True,
        },
        {"detail": "5 snapshot ids and signatures verify", "name": "snapshots", "ok": True},
        {"detail": "11 event ids and chain hashes verify", "name": "events", "ok": True},
        {
            "detail": "HMAC-SHA256 by golden verifies; not covered: meta, job.started_at",
            "name": "seal",
            "ok": True,
        },
        {
            "detail": "3 stored outputs match their hashes; 3 consumed outputs match the "
            "hashes their steps consumed",
            "name": "outputs",
            "ok": True,
        },
        {"detail": "runtime 'mace-reference' is not registered", "name": "steps", "ok": False},
    ],
    "divergences": [],
    "error_code": "CAPABILITY_NOT_FOUND",
    "expected": None,
    "force_continued": False,
    "format": "replay-trace",
    "message": "runtime 'mace-reference' is not registered",
    "missing": [],
    "mode": "audit",
    "observed": None,
    "replayable": True,
    "snapshot_ids": [
        "sha256:f42e6df1d134e5f7dee9d34887e6426d9dc59ac1b6eff36026f1489f77b16bd0",
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88",
        "sha256:7ab30f48a4b7df8f0f95ad096544a2cff03fecc7129b868a4ff96a8908756e0b",
        "sha256:eb23b83671a178798f47820f240c72626c597407900f587e9b00c276169a8ef3",
        "sha256:4f874c0b7b7500d41b18b806f350981901faef67035427a88942dad5bf9f71d6",
    ],
    "stats": {"events": 11, "outputs": 3, "steps": 9},
    "status": "refused",
    "substituted": [],
    "trace_id": "4f75c2678a3bc3ba2a9f87c830ba18d4",
    "unprotected_fields": ["meta", "job.started_at"],
    "within_epsilon": [],
}

PIN_NO_FUNCTION = {
    "authoritative": False,
    "broke_at": 0,
    "checks": [
        {
            "detail": "replay-trace v1 (json): 11 events, 9 steps, 3 outputs",
            "name": "format",
            "ok": True,
        },
        {"detail": "not checked (offline, no ledger)", "name": "halts", "ok": True},
        {
            "detail": "all of selfrep, brainstate, router, privacy, governance",
            "name": "required_snapshots",
            "ok": True,
        },
        {"detail": "5 snapshot ids and signatures verify", "name": "snapshots", "ok": True},
        {"detail": "11 event ids and chain hashes verify", "name": "events", "ok": True},
        {
            "detail": "HMAC-SHA256 by golden verifies; not covered: meta, job.started_at",
            "name": "seal",
            "ok": True,
        },
        {
            "detail": "3 stored outputs match their hashes; 3 consumed outputs match the "
            "hashes their steps consumed",
            "name": "outputs",
            "ok": True,
        },
        {
            "detail": "step 0 (route-0): function 'router.decide@1' is not registered",
            "name": "steps",
            "ok": False,
        },
    ],
    "divergences": [],
    "error_code": "CAPABILITY_NOT_FOUND",
    "expected": None,
    "force_continued": False,
    "format": "replay-trace",
    "message": "step 0 (route-0): function 'router.decide@1' is not registered",
    "missing": [],
    "mode": "audit",
    "observed": None,
    "replayable": True,
    "snapshot_ids": [
        "sha256:f42e6df1d134e5f7dee9d34887e6426d9dc59ac1b6eff36026f1489f77b16bd0",
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88",
        "sha256:7ab30f48a4b7df8f0f95ad096544a2cff03fecc7129b868a4ff96a8908756e0b",
        "sha256:eb23b83671a178798f47820f240c72626c597407900f587e9b00c276169a8ef3",
        "sha256:4f874c0b7b7500d41b18b806f350981901faef67035427a88942dad5bf9f71d6",
    ],
    "stats": {"events": 11, "outputs": 3, "steps": 9},
    "status": "refused",
    "substituted": [],
    "trace_id": "4f75c2678a3bc3ba2a9f87c830ba18d4",
    "unprotected_fields": ["meta", "job.started_at"],
    "within_epsilon": [],
}

PIN_PROGRESS = [4096, 5005]
