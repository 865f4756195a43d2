"""A report's divergences arranged for reading: per step, changed fields side by side, and
the unchanged fields of the recorded output as folded context. Large values are cut to a
preview; the page loads the whole value on demand by its JSON Pointer into the report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from replay.diff import pointer_escape, pointer_join

PREVIEW_CHARS = 600
CONTEXT_FIELDS = 200


def render_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass
class Side:
    present: bool
    text: str = ""
    truncated: bool = False
    pointer: str = ""  # into the report, for the on-demand endpoint


@dataclass
class Change:
    path: str
    kind: str  # "changed" | "added" | "removed"
    before: Side
    after: Side


@dataclass
class StepDiff:
    step: int | str
    step_id: str
    force_continued: bool
    changes: list[Change] = field(default_factory=list)
    context: list[tuple[str, str]] = field(default_factory=list)
    context_more: int = 0


def _absent(divergence: dict[str, Any], key: str) -> bool:
    """The report spells a side that does not exist as `null` with `"absent": key`
    (replay.engine.Divergence.to_json); a side left out altogether reads the same."""
    return divergence.get("absent") == key or key not in divergence


def _side(divergence: dict[str, Any], key: str, pointer: str) -> Side:
    if _absent(divergence, key):
        return Side(present=False)
    text = render_json(divergence[key])
    if len(text) > PREVIEW_CHARS:
        return Side(True, text[:PREVIEW_CHARS] + "…", truncated=True, pointer=pointer)
    return Side(True, text, pointer=pointer)


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(pointer, scalar or empty container) for every leaf, in a stable order."""
    if isinstance(value, dict) and value:
        out: list[tuple[str, Any]] = []
        for key in sorted(value):
            out += _leaves(value[key], f"{prefix}/{pointer_escape(str(key))}")
        return out
    if isinstance(value, list) and value:
        out = []
        for index, item in enumerate(value):
            out += _leaves(item, f"{prefix}/{index}")
        return out
    return [(prefix, value)]


def _changed(path: str, leaf: str) -> bool:
    """A leaf is changed context if it sits at, under or above a changed path."""
    return leaf == path or leaf.startswith(path + "/") or path.startswith(leaf + "/") or not path


def step_diffs(report: dict[str, Any], recorded: dict[int | str, Any]) -> list[StepDiff]:
    by_step: dict[Any, StepDiff] = {}
    for index, divergence in enumerate(report.get("divergences") or []):
        step = divergence.get("step")
        group = by_step.get(step)
        if group is None:
            group = by_step[step] = StepDiff(
                step=step,
                step_id=str(divergence.get("step_id", step)),
                force_continued=bool(divergence.get("force_continued")),
            )
        path = str(divergence.get("path", ""))
        if _absent(divergence, "before"):
            kind = "added"
        elif _absent(divergence, "after"):
            kind = "removed"
        else:
            kind = "changed"
        base = pointer_join(["divergences", index])
        group.changes.append(
            Change(
                path=path or "/",
                kind=kind,
                before=_side(divergence, "before", f"{base}/before"),
                after=_side(divergence, "after", f"{base}/after"),
            )
        )
    for step, group in by_step.items():
        if step not in recorded:
            continue
        paths = [c.path if c.path != "/" else "" for c in group.changes]
        unchanged = [
            (leaf or "/", value)
            for leaf, value in _leaves(recorded[step])
            if not any(_changed(p, leaf) for p in paths)
        ]
        group.context = [(leaf, _preview(value)) for leaf, value in unchanged[:CONTEXT_FIELDS]]
        group.context_more = max(0, len(unchanged) - CONTEXT_FIELDS)
    return list(by_step.values())


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:200] + "…"
