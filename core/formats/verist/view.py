"""A Verist snapshot or baseline file as the trace page's records
(:mod:`core.replay.recordview`).

In file order, each field of the snapshot (kind ``field``), the entries of its ``input``
(kind ``input``) following it, and its ``artifacts`` (kind ``artifact``, labelled with the
artifact's kind, ``(hash-only)`` when its content was not kept): a ``step-output`` artifact
is followed by the parts of the output it recorded (kind ``output``: ``output``, ``events``,
``commands``...), a ``step-commands`` artifact by each command (kind ``command``, labelled with
its type). A baseline envelope's ``format`` and ``metadata`` are fields too, with the
snapshot's fields between them, at ``/snapshot/...``: no record holds the snapshot whole,
which is the whole file. Locations are JSON pointers into the file; a row's summary holds
types, counts and hashes, never an input or output value.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from core.formats.verist.snapshot import STEP_COMMANDS, STEP_OUTPUT, VeristFile
from core.replay.diff import pointer_join
from core.replay.recordview import ViewRecord, shape
from core.replay.recordview import short as _short


def records(file: VeristFile) -> Iterator[ViewRecord]:
    """The file's records in file order (see the module)."""
    if file.envelope is None:
        yield from _snapshot(file.snapshot, [], 0)
        return
    at = 0
    for key, value in file.envelope.items():
        if key == "snapshot":
            for record in _snapshot(value, [key], at):
                yield record
                at += 1
            continue
        yield ViewRecord("field", _short(key), pointer_join([key]), value, None, shape(value))
        at += 1


def _snapshot(snapshot: Mapping[str, Any], base: list[Any], at: int) -> Iterator[ViewRecord]:
    """A snapshot's records, the first at position ``at``, its pointers below ``base``."""
    for key, value in snapshot.items():
        field = at
        yield ViewRecord(
            "field", _short(key), pointer_join([*base, key]), value, None, shape(value)
        )
        at += 1
        if key == "input" and isinstance(value, dict):
            for name, item in value.items():
                location = pointer_join([*base, key, name])
                yield ViewRecord("input", _short(name), location, item, field, shape(item))
                at += 1
        elif key == "artifacts" and isinstance(value, list):
            for i, artifact in enumerate(value):
                own = at
                yield _artifact(artifact, [*base, key, i], field)
                at += 1
                for record in _artifact_parts(artifact, [*base, key, i, "content"], own):
                    yield record
                    at += 1


def _artifact(artifact: Any, tokens: list[Any], parent: int) -> ViewRecord:
    kind = artifact.get("kind") if isinstance(artifact, dict) else None
    kept = isinstance(artifact, dict) and "content" in artifact
    label = str(kind) if isinstance(kind, str) else f"artifact {tokens[-1]}"
    summary = shape(artifact)
    if isinstance(artifact, dict) and isinstance(artifact.get("hash"), str):
        summary["hash"] = artifact["hash"]
    summary["content"] = "kept" if kept else "hash-only"
    label = label if kept else f"{label} (hash-only)"
    return ViewRecord("artifact", _short(label), pointer_join(tokens), artifact, parent, summary)


def _artifact_parts(artifact: Any, tokens: list[Any], parent: int) -> Iterator[ViewRecord]:
    """What a step's output artifact recorded (its parts), or its commands artifact (each
    command); nothing for another artifact or one kept as a hash."""
    if not isinstance(artifact, dict) or "content" not in artifact:
        return
    content = artifact["content"]
    if artifact.get("kind") == STEP_OUTPUT and isinstance(content, dict):
        for name, part in content.items():
            location = pointer_join([*tokens, name])
            yield ViewRecord("output", _short(name), location, part, parent, shape(part))
    elif artifact.get("kind") == STEP_COMMANDS and isinstance(content, list):
        for i, command in enumerate(content):
            kind = command.get("type") if isinstance(command, dict) else None
            label = kind if isinstance(kind, str) and kind else f"command {i}"
            location = pointer_join([*tokens, i])
            yield ViewRecord("command", _short(label), location, command, parent, shape(command))
