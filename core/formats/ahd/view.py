"""An AHD replay sidecar as the trace page's records (:mod:`core.replay.recordview`).

In file order, each field of the sidecar (kind ``field``), but its ``token`` and ``brief``,
the inputs the run hashed (kind ``input``, labelled with the field and the path recorded, their
hash in the row's summary); each model of ``models`` follows that field as a child (kind
``model``, labelled with its id). Locations are JSON pointers into the sidecar; a row's
summary holds types, counts, hashes and providers, never an argument of ``argv``.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.formats.ahd import Sidecar
from core.replay.diff import pointer_join
from core.replay.recordview import ViewRecord, shape
from core.replay.recordview import short as _short

#: the sidecar's fields that name an input the run hashed
INPUTS = ("token", "brief")


def records(sidecar: Sidecar) -> Iterator[ViewRecord]:
    """The sidecar's fields in file order, its models following theirs (see the module)."""
    at = 0
    for key, value in sidecar.document.items():
        parent = at
        yield _field(key, value)
        at += 1
        if key != "models" or not isinstance(value, list):
            continue
        for i, model in enumerate(value):
            yield _model(model, i, parent)
            at += 1


def _field(key: str, value: Any) -> ViewRecord:
    location = pointer_join([key])
    if key in INPUTS and isinstance(value, dict):
        path, digest = value.get("path"), value.get("hash")
        label = f"{key} {path}" if isinstance(path, str) else key
        summary = shape(value)
        if isinstance(digest, str):
            summary["hash"] = digest
        return ViewRecord("input", _short(label), location, value, None, summary)
    return ViewRecord("field", _short(key), location, value, None, shape(value))


def _model(model: Any, i: int, parent: int) -> ViewRecord:
    get = model.get if isinstance(model, dict) else {}.get
    name, provider, requests = get("id"), get("provider"), get("provider_request_ids")
    summary = shape(model)
    if isinstance(provider, str):
        summary["provider"] = _short(provider)
    if isinstance(requests, list):
        summary["requests"] = len(requests)
    label = name if isinstance(name, str) and name else f"model {i}"
    location = pointer_join(["models", i])
    return ViewRecord("model", _short(label), location, model, parent, summary)
