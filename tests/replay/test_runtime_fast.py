"""The reference materialiser's hot-path spellings give the values the plain ones give."""

from __future__ import annotations

import math
import random
import struct

from core.replay.rng import DeterministicRNG
from core.replay.runtime import ReferenceMaterialiser, _clamp, _r9

EDGES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-10,
    4.9999999995e-10,
    5e-10,
    0.9999999995,
    0.99999999949,
    1.0000000001,
    0.1234567895,
    0.1234567885,
    2.5e-9,
    math.inf,
    -math.inf,
    math.nan,
    5e-324,
    1e300,
]


def _plain_clamp(x: float) -> float:
    return _r9(min(1.0, max(0.0, x)))


def _same(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b)


def test_clamp_is_bit_for_bit_min_max_and_r9():
    rnd = random.Random(23)
    values = EDGES + [rnd.uniform(-0.5, 1.5) for _ in range(100_000)]
    # halfway cases at the ninth decimal, where a rounding rule would show
    values += [(k + 0.5) / 1e9 for k in range(0, 1_000_000_000, 9_973)]
    for x in values:
        assert _same(_clamp(x), _plain_clamp(x)), x
        assert type(_clamp(x)) is float


def _plain_apply(state: dict, rng: DeterministicRNG, event: dict) -> None:
    # the materialiser as it was written before its hot path was tuned
    def num(payload, key):
        value = payload.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0.0
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf

    kind, payload = event["type"], event["payload"]
    if kind == "skill.feedback":
        skill = payload.get("skill")
        if isinstance(skill, str):
            skills = state["skills"]
            skills[skill] = _plain_clamp(skills.get(skill, 0.0) + num(payload, "delta"))
    elif kind == "brain.tick":
        load = num(payload, "load")
        b = state["brain"]
        b["energy"] = _plain_clamp(b["energy"] - 0.05 * load + 0.02 * rng.random())
        b["focus"] = _plain_clamp(0.5 * b["focus"] + 0.5 * (1.0 - load))
        b["fatigue"] = _plain_clamp(b["fatigue"] + 0.01 * load)


def test_apply_matches_the_plain_materialiser_on_odd_values():
    odd = [0.25, -3, 7, True, None, "0.5", 10**400, -(10**400), 1e308, math.nan, 0.3333333335]
    events = []
    for i, v in enumerate(odd * 3):
        events.append({"type": "brain.tick", "payload": {"load": v}})
        events.append({"type": "skill.feedback", "payload": {"skill": f"s{i % 3}", "delta": v}})
    events.append({"type": "skill.feedback", "payload": {"skill": 5, "delta": 0.5}})
    events.append({"type": "brain.tick", "payload": {}})
    events.append({"type": "skill.feedback", "payload": {"skill": "s0"}})
    snapshots = {"selfrep": {"skills": {"s0": 0.5}}, "brainstate": {"energy": 0.5, "focus": 0.4}}
    fast = ReferenceMaterialiser(snapshots, DeterministicRNG("seed"))
    state = {"skills": {"s0": 0.5}, "brain": {"energy": 0.5, "focus": 0.4, "fatigue": 0.0}}
    plain_rng = DeterministicRNG("seed").fork("brainstate")
    for event in events:
        fast.apply(event)
        _plain_apply(state, plain_rng, event)
    got = fast.state()
    assert repr(got["selfrep"]["skills"]) == repr(state["skills"])
    assert repr(got["brainstate"]) == repr(state["brain"])
