"""A supplied Dict DSL contract (seed 001 §3, check 5). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import ReplayError
from core.formats.jsonstrict import loads_strict

# --- a supplied contract --------------------------------------------------------------------


@dataclass(frozen=True)
class InvalidContract:
    """A contract file that is not a contract: replay's contract check refuses it."""

    message: str


def parse_contract(data: bytes, *, where: str = "contract") -> dict[str, Any] | InvalidContract:
    """A supplied contract file: a JSON Dict DSL contract (Paxman ``dict_dsl.py``: an object
    with a non-empty string ``id``, an optional non-empty string ``version`` and a non-empty
    list ``fields`` of objects with unique non-empty ``name``). What is not one is an
    :class:`InvalidContract` saying why (replay then fails ``INVALID_CONTRACT``)."""
    try:
        doc = loads_strict(data, where=where)
    except ReplayError as exc:
        return InvalidContract(f"the supplied contract is not JSON: {exc.message}")
    if not isinstance(doc, dict):
        return InvalidContract(f"{where}: a Dict DSL contract must be an object")
    cid = doc.get("id")
    if "id" not in doc:
        return InvalidContract(f"{where}: Dict DSL contract is missing required 'id' key")
    if not isinstance(cid, str) or not cid:
        return InvalidContract(f"{where}: Dict DSL contract 'id' must be a non-empty string")
    version = doc.get("version", "1")
    if not isinstance(version, str) or not version:
        return InvalidContract(
            f"{where}: Dict DSL contract 'version' must be a non-empty string, got {version!r}"
        )
    fields = doc.get("fields")
    if not isinstance(fields, list):
        return InvalidContract(f"{where}: Dict DSL contract 'fields' must be a list")
    if not fields:
        return InvalidContract(f"{where}: contract {cid!r} has no fields")
    seen: set[str] = set()
    for i, item in enumerate(fields):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            return InvalidContract(f"{where}: fields[{i}] must be an object with a 'name'")
        if name in seen:
            return InvalidContract(f"{where}: contract {cid!r} has duplicate field name {name!r}")
        seen.add(name)
    return doc
