"""The report every format's verify and replay returns (contracts.md §3): the modes, the
statuses, one check, one divergence, and the report with its JSON shape. What a failure's
code makes the status is decided here once (``ReplayReport.fail``).

Pure: no Django, and no format: every format, the native engine included, imports it.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Self

from core import errors
from core.replay.diff import DiffEntry

AUDIT = "audit"
SANDBOX = "sandbox"
PRODUCTION = "production"
MODES = (AUDIT, SANDBOX, PRODUCTION)

OK = "ok"
DIVERGED = "diverged"
TAMPER_DETECTED = "tamper_detected"
REFUSED = "refused"

_STATUS_OF = {
    errors.INTEGRITY_FAILURE: TAMPER_DETECTED,
    errors.REPLAY_DIVERGENCE: DIVERGED,
    errors.RESULT_MISMATCH: DIVERGED,
}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Divergence:
    """One field that differs: recorded (`before`) and recomputed (`after`).

    A side that does not exist (a key or an element only one side has) is `diff.MISSING`
    here; in the JSON report that side is `null` and `"absent"` names it (see `to_json`),
    so an absent value is never confused with a recorded `null`.
    """

    step: int | str
    step_id: str
    path: str
    before: Any
    after: Any
    force_continued: bool = False

    def to_json(self) -> dict[str, Any]:
        """`{"step", "step_id", "path", "before", "after"}`, plus `"absent": "before"` or
        `"after"` when that side does not exist (its value is then `null`), plus
        `"force_continued": true` past an approved force-continue."""
        data: dict[str, Any] = {"step": self.step, "step_id": self.step_id}
        data.update(DiffEntry(self.path, self.before, self.after).to_json())
        if self.force_continued:
            data["force_continued"] = True
        return data


@dataclass
class ReplayReport:
    trace_id: str | None
    format: str
    mode: str
    status: str = OK
    error_code: str | None = None
    authoritative: bool = True
    checks: list[Check] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    broke_at: int | str | None = None
    expected: str | None = None
    observed: str | None = None
    message: str = ""
    force_continued: bool = False
    replayable: bool = False
    missing: list[str] = field(default_factory=list)
    #: sandbox only: `{"output_ref", "step", "hash", "matches_recorded"}` per missing
    #: external output a registered mock stood in for (its output fed the consuming step)
    substituted: list[dict[str, Any]] = field(default_factory=list)
    unprotected_fields: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    snapshot_ids: list[str] = field(default_factory=list)
    #: numbers whose canonical spellings differ by at most NUMERIC_EPSILON: not divergences,
    #: listed so the report says where equality needed the epsilon (seed 003 §4)
    within_epsilon: list[Divergence] = field(default_factory=list)
    #: fields whose values were erased (crypto-shredded) before this replay:
    #: ``{"location": "event 12", "path": "/user/email"}``; left out of the JSON when none
    erased: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The report as contracts.md §3 spells it (plus a few extra keys)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["checks"] = [asdict(c) for c in self.checks]
        data["divergences"] = [d.to_json() for d in self.divergences]
        data["within_epsilon"] = [d.to_json() for d in self.within_epsilon]
        if not self.erased:
            del data["erased"]
        return copy.deepcopy(data)

    def fail(self, code: str, message: str, **where: Any) -> Self:
        self.error_code = code
        self.status = _STATUS_OF.get(code, REFUSED)
        if self.status == REFUSED:  # no verdict was reached: nothing to rely on
            self.authoritative = False
        self.message = message
        self.broke_at = where.get("broke_at")
        self.expected = where.get("expected")
        self.observed = where.get("observed")
        return self

    def refuse(self, code: str, message: str, **where: Any) -> Self:
        """:meth:`fail` for a request refused before any verdict was reached (a file that
        was not stored, a force-continue without its approvals): ``refused`` whatever the
        code, and never authoritative."""
        self.fail(code, message, **where)
        self.status = REFUSED
        self.authoritative = False
        return self
