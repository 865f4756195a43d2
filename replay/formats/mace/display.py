"""What the trace page shows of a reflective log (:func:`panel`), the router's decision per
iteration among it (:func:`router_decisions`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable

from replay.formats.mace.reader import SNAPSHOT_FIELDS, Log


def router_decisions(log: Log) -> Iterable[str]:
    for it in log.document.get("iteration_trace", []):
        out = it.get("router_output", {})
        agents = out.get("selected_agents") or []
        names = ", ".join(
            str(a.get("agent_id", a)) if isinstance(a, dict) else str(a) for a in agents
        )
        yield f"{it.get('iteration_id')}: {out.get('decision_id', '?')} -> {names or 'none'}"


def panel(log: Log) -> dict[str, str]:
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
