"""What a stored row records of a reflective log (:func:`stored_facts`): a log with seed
003's replay fields, with its snapshots; a log as MACE's writer persists it, with none (the
five snapshot kinds it would need are recorded unnamed, each saying why, so the console lists
it as not replayable and names what it lacks).

Pure: no Django.
"""

from __future__ import annotations

from core.formats.mace.reader import SCHEMA_VERSION, Log
from core.formats.protocol import StoredFacts, StoredSnapshot
from core.replay.report import ReplayReport

#: the kind a MACE snapshot is stored under
SNAPSHOT_KIND = "mace-{kind}"


#: why a log as MACE's writer persists it names no snapshot (the trace page's missing list)
NOT_NAMED = "not named: a log as MACE's writer persists it has no job seed and no snapshots"


def _snapshot_refs(log: Log) -> list[dict[str, object]]:
    refs: list[dict[str, object]] = [
        {
            "kind": SNAPSHOT_KIND.format(kind=kind),
            "snapshot_id": sid,
            "path": f"{sid}.json" if sid else "",
        }
        for kind, sid in log.snapshot_ids.items()
    ]
    if not log.replayable_shape:
        for ref in refs:
            ref["why"] = NOT_NAMED
    return refs


def stored_facts(log: Log, report: ReplayReport) -> StoredFacts:
    doc = log.document
    facts = StoredFacts(
        trace_id=str(doc["log_id"])[:64],
        schema_version=int(doc.get("schema_version", SCHEMA_VERSION)),
        runtime_name="mace",
        runtime_version=", ".join(map(str, doc.get("model_versions") or [])),
        started_at=doc["timestamp"],
        required_snapshot_ids=_snapshot_refs(log),
    )
    if not log.replayable_shape:
        # no job id, no seed, no iterations, no events: only its signature verifies it
        return facts
    facts.job_id = doc["job_id"]
    facts.job_seed = doc["job_seed"]
    facts.event_count = len(doc.get("event_refs") or [])
    facts.step_count = len(doc["iteration_trace"])
    facts.missing_outputs = [
        m.removeprefix("agent_output:") for m in report.missing if m.startswith("agent_output:")
    ]
    facts.snapshots = [
        StoredSnapshot(
            snap["snapshot_id"],
            SNAPSHOT_KIND.format(kind=kind),
            snap,
            snap["schema_version"],
            {
                "alg": "hmac-sha256",
                "key_id": snap["signature_key_id"],
                "value": snap["signature"],
            },
        )
        for kind, snap in log.snapshots.items()
    ]
    return facts
