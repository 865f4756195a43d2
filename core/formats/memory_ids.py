"""Working-memory and episodic ids (seed 003 §5), wherever a trace records a memory write.

    wm_id       = hex(sha256(job_seed + ":" + wm_counter))
    episodic_id = hex(sha256(job_seed + ":" + episodic_counter))

A memory write records its id with the counter it was derived from (seed 003 §5: "record
the generator function and seed ... so replay can verify id provenance"): ``{"wm_id": hex,
"wm_counter": int, ...}`` or ``{"episodic_id": hex, "episodic_counter": int, ...}``. Each id
must recompute from the job's seed and its counter; an id recorded without an integer
counter (or in a trace without a job seed) cannot, and fails the same way. Where a format
keeps memory writes: a native trace's event payloads (contracts.md §2), a MACE log's
``memory_writes`` and ``event_refs`` entries. Each format words the failure in the style of
its own event-id check, as ``INTEGRITY_FAILURE`` with ``expected`` and ``observed``.

Shared by the formats (native, MACE): it imports none of them. Pure: no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: (id field, counter field), in the order a record is checked
MEMORY_IDS = (("wm_id", "wm_counter"), ("episodic_id", "episodic_counter"))
GENERATORS = {
    "wm_id": "sha256(job_seed:wm_counter)",
    "episodic_id": "sha256(job_seed:episodic_counter)",
}


def memory_id_of(job_seed: str, counter: int) -> str:
    """``wm_id`` or ``episodic_id`` (one rule, its own counter): hex sha256 of
    ``job_seed + ":" + counter``."""
    return hashlib.sha256(f"{job_seed}:{counter}".encode("utf-8", "surrogatepass")).hexdigest()


def wm_id_of(job_seed: str, wm_counter: int) -> str:
    return memory_id_of(job_seed, wm_counter)


def episodic_id_of(job_seed: str, episodic_counter: int) -> str:
    return memory_id_of(job_seed, episodic_counter)


@dataclass(frozen=True)
class MemoryIdProblem:
    """Why one recorded memory id does not recompute."""

    field: str  # "wm_id" or "episodic_id"
    counter_field: str
    observed: Any  # the recorded id
    counter: Any  # the recorded counter (None when absent)
    expected: str | None  # the id the counter gives; None when there is nothing to derive

    @property
    def observed_text(self) -> str:
        return self.observed if isinstance(self.observed, str) else repr(self.observed)[:80]

    @property
    def why_not(self) -> str:
        """Why nothing could be derived (``" (no integer wm_counter recorded)"``), or "" when
        the counter gives another id."""
        if self.expected is not None:
            return ""
        if type(self.counter) is not int:
            return f" (no integer {self.counter_field} recorded)"
        return " (no job_seed to derive it from)"


def carries_memory_ids(record: Mapping[str, Any]) -> bool:
    return "wm_id" in record or "episodic_id" in record


def memory_id_problem(record: Mapping[str, Any], job_seed: Any) -> MemoryIdProblem | None:
    """The first memory id ``record`` carries that does not recompute from ``job_seed``
    and its counter (seed 003 §5), or None."""
    for field, counter_field in MEMORY_IDS:
        if field not in record:
            continue
        observed = record[field]
        counter = record.get(counter_field)
        if type(counter) is not int or not isinstance(job_seed, str):
            return MemoryIdProblem(field, counter_field, observed, counter, None)
        expected = memory_id_of(job_seed, counter)
        if observed != expected:
            return MemoryIdProblem(field, counter_field, observed, counter, expected)
    return None
