"""A report's divergences arranged for reading: per step, changed fields side by side, and
the unchanged fields of the recorded output as folded context. Large values are cut to a
preview; the page loads the whole value on demand by its JSON Pointer into the report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from console.redaction import REDACTED, redact
from core.replay.diff import MISSING, pointer_escape, pointer_join

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
    (core.formats.native.engine.Divergence.to_json); a side left out altogether reads the same."""
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


# --- two stored native traces compared, record by record --------------------------------------


@dataclass
class CompareRow:
    path: str
    kind: str  # "changed" | "added" | "removed"
    before: Side
    after: Side


@dataclass
class CompareSection:
    kind: str  # "header" | "event" | "step" | "output" | "final_answer" | "seal"
    path: str
    title: str
    rows: list[CompareRow] = field(default_factory=list)


def _compare_side(value: Any) -> Side:
    if value is MISSING:
        return Side(present=False)
    text = render_json(value)
    if len(text) > PREVIEW_CHARS:
        return Side(True, text[:PREVIEW_CHARS] + "…", truncated=True)
    return Side(True, text)


def _masked_payload(path: str, value: Any, pointers: list[str] | None) -> Any:
    """``value`` at ``path`` in a native trace with the personal fields of an event payload
    redacted by the trace's privacy policy (every string when it has none); other values as
    they are."""
    parts = path.split("/")
    if value is MISSING or len(parts) < 3 or parts[1] != "events":
        return value
    if len(parts) == 3:  # a whole event added or removed
        if isinstance(value, dict) and "payload" in value:
            return {
                **value,
                "payload": _masked_payload(path + "/payload", value["payload"], pointers),
            }
        return value
    if parts[3] != "payload":
        return value
    inner = "/".join(["", *parts[4:]]) if len(parts) > 4 else ""
    if isinstance(value, str) and (pointers is None or inner in pointers):
        return REDACTED
    if pointers is None:
        return redact(value, None)[0]
    if any(inner == p or inner.startswith(p + "/") for p in pointers):
        return REDACTED
    below = [p[len(inner) :] for p in pointers if p.startswith(inner + "/")]
    return redact(value, below)[0] if below else value


def compare_sections(
    sections: list[Any], pointers: tuple[list[str] | None, list[str] | None]
) -> list[CompareSection]:
    """The sections of a native comparison (``core.formats.native.compare``) for the page:
    each value as JSON text (cut to a preview), an event payload's personal fields redacted by
    each trace's own privacy policy."""
    out = []
    for section in sections:
        shown = CompareSection(section.kind, section.path or "/", section.title)
        for change in section.changes:
            shown.rows.append(
                CompareRow(
                    path=change.path or "/",
                    kind=change.kind,
                    before=_compare_side(_masked_payload(change.path, change.before, pointers[0])),
                    after=_compare_side(_masked_payload(change.path, change.after, pointers[1])),
                )
            )
        out.append(shown)
    return out
