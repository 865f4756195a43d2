"""Hypothesis strategies for drifted traces: a recorded trace whose step outputs or final
answer gained, lost or changed keys (nested values, unicode, floats near and far), re-sealed
with the golden key as a runtime that produced them would have sealed them.

Pure (no Django): shared by the engine's property tests and the console's rendering ones.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from core.errors import ReplayError
from core.formats import default_registry
from core.formats.native.recorder import record, reseal
from core.replay.runtime import RecordOptions
from tests.replay.fixtures.make_golden import golden_signer

SIGNER = golden_signer()

#: every JSON value, unicode and floats of every size included (NaN and infinities too: the
#: parser must refuse them, never let them into a report)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(st.characters(codec="utf-8"), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _nudged(value: float, units: int) -> float:
    return float(f"{value + units * 1e-9:.9f}")


def base_document(persist_outputs: bool) -> dict[str, Any]:
    return record(
        RecordOptions(seed="mutations", iterations=2, persist_outputs=persist_outputs),
        default_registry(),
        SIGNER,
    )


_BASES = {True: base_document(True), False: base_document(False)}


def _containers(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths (as key tuples) to every dict inside `value`, itself included."""
    out = []
    if isinstance(value, dict):
        out.append(path)
        for key, item in value.items():
            out += _containers(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _containers(item, (*path, index))
    return out


def _at(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def drifted_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A recorded trace with one to three edits to step outputs or the final answer."""
    document = copy.deepcopy(_BASES[draw(st.booleans(), label="persisted")])
    targets = [("steps", i, "output") for i, s in enumerate(document["steps"]) if "output" in s]
    targets.append(("final_answer",))
    for _ in range(draw(st.integers(1, 3), label="edits")):
        target = draw(st.sampled_from(targets), label="target")
        root = _at(document, target)
        place = draw(st.sampled_from(_containers(root)), label="where")
        node = _at(root, place)
        op = draw(st.sampled_from(["add", "remove", "change", "nudge"]), label="op")
        keys = sorted(node)
        if op == "add" or not keys:
            node[draw(st.text(st.characters(codec="utf-8"), max_size=6), label="key")] = draw(
                json_values, label="value"
            )
        elif op == "remove":
            del node[draw(st.sampled_from(keys), label="key")]
        elif op == "change":
            node[draw(st.sampled_from(keys), label="key")] = draw(json_values, label="value")
        else:
            floats = [k for k in keys if type(node[k]) is float]
            if floats:
                key = draw(st.sampled_from(floats), label="key")
                node[key] = _nudged(node[key], draw(st.integers(-3, 3), label="units"))
    try:
        return reseal(document, SIGNER)
    except ReplayError:  # NaN or Infinity: no runtime could seal it; the old seal stays
        return document
