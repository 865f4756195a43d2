"""What a legal request's approval covers, exactly, and what changed since. Pure: no Django.

* A release approval signs the list of values the bundle hands over: each one field of one
  subject in one trace (subject ref, trace id, stored file's SHA-256, location, path; never
  the value itself). :func:`release_value` is one entry, :func:`release_values` the sorted
  list, :func:`value_label` how a message names one.
* An erasure approval signs the plan it carries out (``privacy.erasure.plan``: the subjects
  to erase, those unknown or already erased, every trace and field concerned).
  :func:`signed_plan` is the part that is signed (what stays is prose, not a plan);
  :func:`plan_changes` names what differs between a signed plan and today's.
* A release row is believed only when its ``PII_REVEALED`` event says the same thing
  (:func:`release_problem`): ``governance verify`` names the rows where it does not, and no
  bundle reveals such a row's value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

#: the members of one released value, in the order a message names them
VALUE_KEYS: Final = ("subject", "trace_id", "file_sha256", "location", "path")
#: the members of an erasure plan an approval signs
PLAN_KEYS: Final = ("subjects", "unknown", "already_erased", "traces", "fields", "keys")


def release_value(
    *, subject: str, trace_id: str, file_sha256: str, location: str, path: str
) -> dict[str, str]:
    """One released value as a release approval signs it."""
    return {
        "subject": subject,
        "trace_id": trace_id,
        "file_sha256": file_sha256,
        "location": location,
        "path": path,
    }


def value_key(value: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(value.get(k, "")) for k in VALUE_KEYS)


def release_values(values: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Distinct values in one order (trace, location, path, subject): the signed list."""
    unique = {
        value_key(v): release_value(**{k: str(v.get(k, "")) for k in VALUE_KEYS}) for v in values
    }
    return [unique[k] for k in sorted(unique, key=lambda k: (k[1], k[2], k[3], k[4], k[0]))]


def value_label(value: Mapping[str, Any]) -> str:
    """``event 2 /user/name of subj_... in trace T`` (no personal data: refs and places)."""
    return (
        f"{value.get('location')} {value.get('path')} of {value.get('subject')} "
        f"in trace {value.get('trace_id')}"
    )


def signed_plan(plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """The part of an erasure plan its approval signs ({} when there is no plan)."""
    if not plan:
        return {}
    return {k: plan[k] for k in PLAN_KEYS if k in plan}


def _traces(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    traces = plan.get("traces") or []
    return {str(t.get("file_sha256")): t for t in traces if isinstance(t, Mapping)}


def _listed(name: str, before: Sequence[Any], after: Sequence[Any]) -> list[str]:
    out = [f"{name} {x} added" for x in after if x not in before]
    out += [f"{name} {x} removed" for x in before if x not in after]
    return out


def plan_changes(signed: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between the plan an approval signed and today's, one phrase each (empty
    when they are the same): subjects, traces (by trace id and file), fields per trace."""
    if dict(signed) == dict(current):
        return []
    changes: list[str] = []
    for name, label in (
        ("subjects", "subject to erase"),
        ("already_erased", "subject already erased"),
        ("unknown", "unknown subject"),
    ):
        changes += _listed(label, list(signed.get(name) or []), list(current.get(name) or []))
    before, after = _traces(signed), _traces(current)
    for sha, trace in after.items():
        if sha not in before:
            changes.append(
                f"trace {trace.get('trace_id')} (file {sha}) added with "
                f"{len(trace.get('fields') or [])} field(s)"
            )
    for sha, trace in before.items():
        if sha not in after:
            changes.append(f"trace {trace.get('trace_id')} (file {sha}) removed")
    for sha in (s for s in after if s in before):
        old, new = list(before[sha].get("fields") or []), list(after[sha].get("fields") or [])
        where = f"of trace {after[sha].get('trace_id')}"
        changes += [f"field {f!r} {where} added" for f in new if f not in old]
        changes += [f"field {f!r} {where} removed" for f in old if f not in new]
    if not changes:
        changes = [
            f"{k} {signed.get(k)!r} is now {current.get(k)!r}"
            for k in sorted(set(signed) | set(current))
            if signed.get(k) != current.get(k)
        ]
    return changes


@dataclass(frozen=True, slots=True)
class ReleaseRow:
    """A ``dsr_dsrrelease`` row, with its trace's id and file as the trace table says."""

    id: int
    event_id: int
    request_id: str
    subject_ref: str
    trace_id: str | None
    file_sha256: str | None
    location: str
    path: str
    released_by_id: int
    trace_pk: int = 0

    @property
    def value(self) -> dict[str, str]:
        return release_value(
            subject=self.subject_ref,
            trace_id=str(self.trace_id),
            file_sha256=str(self.file_sha256),
            location=self.location,
            path=self.path,
        )


def release_problem(row: ReleaseRow, actor_id: int | None, payload: Any) -> str | None:
    """Why release ``row`` is not what its ``PII_REVEALED`` event (signer, payload) says, or
    None when it is."""
    p = payload if isinstance(payload, Mapping) else {}
    pairs = (
        ("legal request", row.request_id, p.get("request_id")),
        ("subject", row.subject_ref, p.get("subject")),
        ("trace", row.trace_id, p.get("trace_id")),
        ("file", row.file_sha256, p.get("file_sha256")),
        ("fields", [f"{row.location} {row.path}"], p.get("fields")),
        ("releaser", f"user {row.released_by_id}", f"user {actor_id}"),
    )
    for name, in_row, in_event in pairs:
        if in_row != in_event:
            return (
                f"release row {row.id} says {name} {in_row}, its ledger event {row.event_id} "
                f"says {in_event}"
            )
    return None
