"""The canonical loops a Context Pack names, registered as ``name@version``
(:func:`register_loop`; ``refund-triage@1`` ships), and :func:`run_loop`, the seed's
``runReplay`` over a lookup of the recorded transcripts: nothing live.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.formats.contextos.inputs import KgSnapshot, Pack
from core.formats.contextos.reader import ContextosTrace


class MissingCall(Exception):
    def __init__(self, call_id: str) -> None:
        super().__init__(call_id)
        self.call_id = call_id


@dataclass(frozen=True)
class Compiled:
    """What the loop runs on: ``compilePack`` of the pinned pack with the recorded invoke
    and the pinned KG snapshot; nothing live."""

    pack: dict[str, Any]
    pack_version: str
    kg: dict[str, Any]
    kg_snapshot_id: str
    run_context: dict[str, Any]
    request: dict[str, Any]


Loop = Callable[[Compiled, Callable[[dict[str, Any]], dict[str, Any]]], dict[str, Any]]
LOOPS: dict[str, Loop] = {}


def register_loop(name: str, loop: Loop) -> None:
    """Register a canonical loop under ``name@version`` (a new version for any change in
    behaviour, so old traces still replay)."""
    if "@" not in name:
        raise ValueError("a loop is registered as name@version")
    if name in LOOPS:
        raise ValueError(f"loop {name!r} is already registered")
    LOOPS[name] = loop


def refund_triage_v1(c: Compiled, call_tool: Callable[[dict[str, Any]], dict[str, Any]]):
    """The reference refund loop: plan the pack's tools in order, call each through the
    recorded transcripts, decide by the pack's policies and the KG snapshot's facts."""
    req = c.request
    order_id = req["order_id"]
    amount = req["amount"]
    calls = []
    evidence = sorted(
        str(fact["id"])
        for fact in c.kg.get("facts", [])
        if fact.get("subject") == req.get("customer_id")
    )
    tool_outputs: dict[str, Any] = {}
    for i, capability in enumerate(c.pack["tools"]):
        call_id = f"{req['request_id']}-{i + 1}"
        result = call_tool(
            {"call_id": call_id, "capability": capability, "args": {"order_id": order_id}}
        )
        calls.append(call_id)
        output = result.get("output", {})
        tool_outputs[capability] = output
        if isinstance(output, dict) and "evidence_ref" in output:
            evidence.append(str(output["evidence_ref"]))
    decisions = [
        {"policy": p["id"], "decision": "allow" if amount <= p["max_amount"] else "deny"}
        for p in c.pack["policies"]
    ]
    denied = any(d["decision"] == "deny" for d in decisions)
    over = amount > c.pack["approval_over"]
    approvals = list(c.run_context.get("approvals", [])) if over else []
    return {
        "decision_key": f"{req['kind']}:{order_id}",
        "evidence_refs": evidence,
        "policy_decisions": decisions,
        "approvals": approvals,
        "lineage": {"pack": c.pack_version, "kg_snapshot": c.kg_snapshot_id, "calls": calls},
        "outputs": {
            "decision": "deny" if denied else "refund",
            "amount": 0 if denied else amount,
            "tools": tool_outputs,
        },
        "status": "needs_approval" if over and not approvals else "completed",
    }


register_loop("refund-triage@1", refund_triage_v1)


def run_loop(trace: ContextosTrace, pack: Pack, kg: KgSnapshot) -> dict[str, Any]:
    """``runReplay``: the pack's registered loop over a lookup of the recorded transcripts
    (``call_id`` -> result; a later duplicate wins, as ``Map.set`` does). Raises
    ``MissingCall`` for a call nobody recorded, ``KeyError`` for an unregistered loop."""
    index: dict[str, Any] = {}
    for env in trace.envelopes:
        index[env["call"]["call_id"]] = env["result"]

    def call_tool(call: dict[str, Any]) -> dict[str, Any]:
        recorded = index.get(call["call_id"])
        if recorded is None:
            raise MissingCall(call["call_id"])
        return recorded

    loop = LOOPS[pack.loop]
    invoke = trace.head["invoke"]
    compiled = Compiled(
        pack=pack.body,
        pack_version=trace.head["pack_version"],
        kg=kg.body,
        kg_snapshot_id=trace.head["kg_snapshot_id"],
        run_context=invoke["run_context"],
        request=invoke["request"],
    )
    return loop(compiled, call_tool)
