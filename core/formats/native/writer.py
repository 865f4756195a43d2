"""Writing a document in the format's two spellings: :func:`dumps_document` (.trace.json)
and :func:`iter_jsonl` (.trace.jsonl).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def dumps_document(document: dict[str, Any]) -> bytes:
    """The .trace.json spelling (readable, two-space indent, UTF-8)."""
    import json

    return json.dumps(document, indent=2, ensure_ascii=False).encode() + b"\n"


def iter_jsonl(document: dict[str, Any]) -> Iterator[bytes]:
    """The .trace.jsonl spelling of a document, one line at a time."""
    import json

    def line(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    yield line({k: v for k, v in document.items() if k not in ("events", "steps", "outputs")})
    for event in document["events"]:
        yield line({"record": "event", **event})
    for step in document["steps"]:
        yield line({"record": "step", **step})
    for ref in sorted(document["outputs"]):
        yield line({"record": "output", "output_ref": ref, **document["outputs"][ref]})
