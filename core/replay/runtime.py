"""The reference deterministic runtime ("mace-reference") and its recorder.

It follows seed 003 §6: selfrep and brainstate are materialised from the snapshots plus the
ordered events (step 7), then every deterministic step is re-evaluated against that state
with the trace's seeded RNG (step 8). Each step draws from its own RNG stream
(`rng.fork(f"step:{seq}")`) and the brainstate replay from `rng.fork("brainstate")`, so a
replay can resume at any step.

The recorder runs the same functions live, answering external calls with a seeded stand-in
agent, and writes native traces ("replay-trace" v1) whose snapshots and seal are signed.

Pure: no Django, no clock (the caller passes `started_at`), no network.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.replay.registry import Registry, ReplayState, Runtime
from core.replay.rng import DeterministicRNG

RUNTIME_NAME = "mace-reference"
RUNTIME_VERSION = "1.0.0"
REQUIRED_SNAPSHOTS = ["selfrep", "brainstate", "router", "privacy", "governance"]
ROUTES = ("search", "math", "write", "plan")


def _r9(x: float) -> float:
    return float(f"{x:.9f}")


def _clamp(x: float) -> float:
    """`_r9(min(1.0, max(0.0, x)))`, spelled for the per-event hot path: the comparisons are
    what min() and max() do (NaN becomes 0.0), and round(x, 9) is the same double as
    float(f"{x:.9f}") (both CPython's correctly rounded dtoa, mode 3, then strtod)."""
    x = x if x > 0.0 else 0.0
    return round(x if x < 1.0 else 1.0, 9)


# --- materialisation (seed 003 §6 step 7) -------------------------------------------------


class ReferenceMaterialiser:
    """selfrep.reduce@1 and brainstate.replay@1 folded over the ordered events."""

    def __init__(self, snapshots: Mapping[str, Any], rng: DeterministicRNG) -> None:
        selfrep = snapshots.get("selfrep") or {}
        brain = snapshots.get("brainstate") or {}
        self._skills = dict(selfrep.get("skills", {}))
        self._brain = {k: brain.get(k, 0.0) for k in ("energy", "focus", "fatigue")}
        self._rng = rng.fork("brainstate")
        self._messages = 0
        self._events = 0

    def apply(self, event: Mapping[str, Any]) -> None:
        self._events += 1
        kind = event["type"]
        if kind == "skill.feedback":
            payload = event["payload"]
            skill = payload.get("skill")
            if isinstance(skill, str):
                delta = payload.get("delta", 0.0)
                if type(delta) is not float:  # a float is its own float(); _num words the rest
                    delta = _num(payload, "delta")
                self._skills[skill] = _clamp(self._skills.get(skill, 0.0) + delta)
        elif kind == "brain.tick":
            load = event["payload"].get("load", 0.0)
            if type(load) is not float:
                load = _num(event["payload"], "load")
            b = self._brain
            b["energy"] = _clamp(b["energy"] - 0.05 * load + 0.02 * self._rng.random())
            b["focus"] = _clamp(0.5 * b["focus"] + 0.5 * (1.0 - load))
            b["fatigue"] = _clamp(b["fatigue"] + 0.01 * load)
        elif kind == "user.message":
            self._messages += 1

    def state(self) -> dict[str, Any]:
        return {
            "selfrep": {"skills": dict(self._skills)},
            "brainstate": dict(self._brain),
            "messages": self._messages,
            "events": self._events,
        }


def _num(payload: Mapping[str, Any], key: str) -> float:
    value = payload.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        return float(value)
    except OverflowError:  # an integer beyond every float: saturate (clamped by the caller)
        return math.inf if value > 0 else -math.inf


# --- deterministic step functions (seed 003 §6 step 8) -------------------------------------


def router_decide_v1(step_input: Any, state: ReplayState, rng: DeterministicRNG) -> Any:
    """Score each candidate route from skills, energy and focus; pick the best."""
    router = state.snapshots.get("router") or {}
    routes = {r["name"]: r for r in router.get("routes", [])}
    temperature = float(router.get("temperature", 0.0))
    mat = state.materialised
    skills = mat["selfrep"]["skills"]
    brain = mat["brainstate"]
    vigour = 0.5 + 0.5 * brain["energy"] * brain["focus"]
    scores = {}
    for name in step_input.get("candidates", []):
        route = routes.get(name, {})
        skill = skills.get(route.get("skill", name), 0.0)
        noise = temperature * (rng.random() - 0.5)
        scores[name] = _r9(skill * vigour + float(route.get("bias", 0.0)) + noise)
    best = max(sorted(scores), key=lambda n: scores[n]) if scores else None
    return {"route": best, "scores": scores}


def answer_compose_v1(step_input: Any, state: ReplayState, rng: DeterministicRNG) -> Any:
    """Compose the answer from the chosen route and the agent output's content address."""
    brain = state.materialised["brainstate"]
    output_hash = str(step_input.get("output_hash", ""))
    return {
        "answer": f"{step_input.get('route')}:{output_hash.removeprefix('sha256:')[:16]}",
        "route": step_input.get("route"),
        "confidence": _r9(0.5 * brain["focus"] + 0.5 * brain["energy"]),
    }


def final_answer_v1(last_output: Any, step_count: int) -> Any:
    """The run's final answer: the last composed answer, its route, and how many steps ran."""
    last = last_output if isinstance(last_output, dict) else {}
    return {"answer": last.get("answer"), "route": last.get("route"), "steps": step_count}


def register(registry: Registry) -> None:
    """Register the reference runtime's functions under their stable names."""
    registry.register("router.decide@1", router_decide_v1)
    registry.register("answer.compose@1", answer_compose_v1)
    registry.register_mock("llm.complete", _stand_in_mock)
    registry.register_runtime(
        Runtime(
            name=RUNTIME_NAME,
            materialiser=ReferenceMaterialiser,
            final_answer=final_answer_v1,
        )
    )


# --- the recorder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordOptions:
    seed: str
    iterations: int = 3
    filler_events: int = 8  # extra observation/tick/feedback events besides the messages
    persist_outputs: bool = True
    started_at: str = "2026-01-01T00:00:00Z"


def trace_id_for(seed: str) -> str:
    return hashlib.sha256(f"replay-trace:{seed}".encode()).hexdigest()[:32]


def reference_snapshots(rng: DeterministicRNG) -> dict[str, dict[str, Any]]:
    r = rng.fork("snapshots")
    return {
        "selfrep": {
            "agent": "atlas",
            "skills": {name: _r9(0.3 + 0.6 * r.random()) for name in ROUTES},
        },
        "brainstate": {"energy": 0.9, "focus": 0.6, "fatigue": 0.05},
        "router": {
            "routes": [{"name": n, "skill": n, "bias": _r9(0.1 * r.random())} for n in ROUTES],
            "temperature": 0.1,
        },
        "privacy": {"redact": ["/user/email", "/user/name"], "retention_days": 30},
        "governance": {"policy": "standard", "max_iterations": 10000},
    }


_NAMES = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Karen Spärck Jones")


def reference_events(opts: RecordOptions, rng: DeterministicRNG) -> Iterator[tuple[str, dict]]:
    """(type, payload) pairs: one user message per iteration, then filler events."""
    r = rng.fork("events")
    for i in range(opts.iterations):
        name = _NAMES[i % len(_NAMES)]
        email = name.lower().replace(" ", ".").replace("ä", "a") + "@example.org"
        yield "user.message", {"user": {"name": name, "email": email}, "text": f"question {i}"}
    for i in range(opts.filler_events):
        pick = i % 3
        if pick == 0:
            yield "brain.tick", {"load": _r9(r.random())}
        elif pick == 1:
            yield "skill.feedback", {"skill": ROUTES[r.randbelow(len(ROUTES))], "delta": 0.01}
        else:
            yield "observation", {"source": "sensor", "value": r.randbelow(1000)}


def _stand_in_mock(step_input: Any, rng: DeterministicRNG) -> Any:
    return stand_in_agent(str(step_input.get("route")), str(step_input.get("prompt")), rng)


def stand_in_agent(route: str, prompt: str, rng: DeterministicRNG) -> dict[str, Any]:
    """The seeded stand-in for an external LLM call: plausible, reproducible content."""
    return {
        "text": f"[{route}] answer to {prompt!r} #{rng.randbelow(10**6):06d}",
        "tokens": 20 + rng.randbelow(200),
    }
