"""What the trace page shows of a reflective log (:func:`panel`), the router's decision per
iteration among it (:func:`router_decisions`); of a log as MACE's writer persists it, what it
recorded (percept, router decision, agent outputs, council votes, memory reads and writes,
final output) and why it is not replayable.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.formats.mace.reader import SNAPSHOT_FIELDS, Log


def router_decisions(log: Log) -> Iterable[str]:
    for it in log.document.get("iteration_trace", []):
        out = it.get("router_output", {})
        agents = out.get("selected_agents") or []
        names = ", ".join(
            str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents
        )
        yield f"{it.get('iteration_id')}: {out.get('decision_id', '?')} -> {names or 'none'}"


def _agents(agents: list[object]) -> str:
    return ", ".join(str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents)


def _writer_log_panel(log: Log) -> dict[str, str]:
    """A log as MACE's writer persists it: what it recorded, and why it is not replayable."""
    doc = log.document
    decision = doc["router_decision"]
    votes = [v for v in doc.get("council_votes") or [] if isinstance(v, dict)]
    approvals = sum(1 for v in votes if v.get("approve") is True)
    outputs = [o for o in doc.get("agent_outputs") or [] if isinstance(o, dict)]
    return {
        "log_id": str(doc["log_id"]),
        "timestamp": str(doc["timestamp"]),
        "signature_key_id": str(doc["signature_key_id"]),
        "percept": str(doc["percept"].get("text", "")),
        "router decision": (
            f"{decision.get('decision_id', '')} -> "
            + (_agents(decision.get("selected_agents") or []) or "no agents")
        ),
        "agent outputs": "; ".join(
            f"{o.get('agent_id', '?')}: {o.get('text', '')}" for o in outputs
        )
        or "none",
        "council votes": f"{len(votes)} ({approvals} approve)",
        "memory reads": ", ".join(map(str, doc.get("memory_reads") or [])) or "none",
        "memory writes": ", ".join(map(str, doc.get("memory_writes") or [])) or "none",
        "final output": str(doc["final_output"].get("text", "")),
        "replayable": "no: no job seed, no snapshots (a log as MACE's writer persists it)",
    }


def panel(log: Log) -> dict[str, str]:
    if not log.replayable_shape:
        return _writer_log_panel(log)
    doc = log.document
    decision = doc.get("router_decision", {})
    agents = decision.get("selected_agents") or []
    return {
        "log_id": str(doc.get("log_id", "")),
        "job_id": str(doc.get("job_id", "")),
        "job_seed": str(doc.get("job_seed", "")),
        "timestamp": str(doc.get("timestamp", "")),
        "REPLAYABLE": "true" if doc.get("REPLAYABLE") else "false",
        "signature_key_id": str(doc.get("signature_key_id", "")),
        "iterations": str(len(doc.get("iteration_trace", []))),
        "router decision": (
            f"{decision.get('decision_id', '')} -> "
            + (
                ", ".join(
                    str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents
                )
                or "no agents"
            )
        ),
        "router decisions per iteration": "; ".join(router_decisions(log)) or "none",
        "final output": str(doc.get("final_output", {}).get("text", "")),
        **{SNAPSHOT_FIELDS[k]: str(v or "(none)") for k, v in log.snapshot_ids.items()},
    }
