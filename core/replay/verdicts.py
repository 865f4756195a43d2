"""What a stored trace's verdict is: one rule, here, and nowhere else.

A trace's verdict is the verdict of its verification at upload, then that of the latest
finished replay that *decides*: an **authoritative** replay in **audit** or **production**
mode that reached a verdict (``ok``, ``diverged`` or ``tamper_detected``). Every other replay
stays in the trace's history and never changes its verdict:

- a **sandbox** replay: mocks may stand in for what was not persisted, so it is never
  authoritative;
- a **non-authoritative** replay: force-continued past an approved divergence, it went on
  past a step that did not reproduce, so its ``ok`` says nothing about the trace;
- a **refused** replay (``FORCE_HALT_ACTIVE``, ``MISSING_SNAPSHOT``,
  ``MISSING_PERSISTED_AGENT_OUTPUT``, ``REPLAY_TIMEOUT``, ...): it stopped before it could
  say whether the trace is intact and reproduces. A halt is a fact about the ledger, not the
  trace, and is shown beside the verdict while it is active. A snapshot removed by retention
  or an output that was never persisted is a fact about what is *stored*, and the trace's
  "replayable" flag and its "missing for production replay" list already say it; the trace
  is no less intact for it. (A snapshot or signature that does not verify is not a refusal:
  that is ``INTEGRITY_FAILURE``, verdict ``tamper_detected``, and it does decide.)

"Latest" is the order in which replays finished. A later deciding replay overrides an
earlier one, in either direction: an audit replay that finds intact a file whose
verification at upload said ``tamper_detected`` turns it into ``ok``.

Pure: no Django. The replay service stores the verdict it computes here on the trace row
(``Trace.last_status``) at upload and whenever a run finishes, and the trace page shows each
run's :func:`run_effect`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.replay.report import AUDIT, DIVERGED, OK, PRODUCTION, REFUSED, TAMPER_DETECTED

#: the modes whose authoritative replays decide a trace's verdict
DECIDING_MODES = (AUDIT, PRODUCTION)
#: the verdicts a deciding replay may reach (``refused`` is none of them)
DECIDING_STATUSES = (OK, DIVERGED, TAMPER_DETECTED)

DECIDES = "decides the verdict"
SUPERSEDED = "superseded by a later authoritative replay"
NOT_FINISHED = "not finished: no verdict yet"
SANDBOX_NEVER = "a sandbox replay never changes the trace's verdict"
NON_AUTHORITATIVE = "non-authoritative (force-continued): never changes the trace's verdict"
REFUSED_NEVER = "refused ({code}): the replay reached no verdict on the trace"


@dataclass(frozen=True)
class RunOutcome:
    """What the rule needs to know about one replay run (``status`` is "" until it finished)."""

    mode: str
    status: str
    error_code: str = ""
    authoritative: bool = True


def why_not_deciding(run: RunOutcome) -> str | None:
    """Why ``run`` never changes its trace's verdict, or None when it decides it (as long as
    no later deciding run finishes)."""
    if not run.status:
        return NOT_FINISHED
    if run.mode not in DECIDING_MODES:
        return SANDBOX_NEVER
    if run.status == REFUSED or run.status not in DECIDING_STATUSES:
        return REFUSED_NEVER.format(code=run.error_code or "no code")
    if not run.authoritative:
        return NON_AUTHORITATIVE
    return None


def deciding_index(runs: Sequence[RunOutcome]) -> int | None:
    """The index of the run that decides the verdict among ``runs`` (in the order they
    finished, oldest first), or None when none does and the upload's verdict stands."""
    for index in range(len(runs) - 1, -1, -1):
        if why_not_deciding(runs[index]) is None:
            return index
    return None


def trace_verdict(*, ingest: str, runs: Iterable[RunOutcome]) -> str:
    """The trace's verdict: ``ingest`` (the verdict of its verification at upload), unless a
    run decides it; ``runs`` in the order they finished, oldest first."""
    finished = list(runs)
    index = deciding_index(finished)
    return ingest if index is None else finished[index].status


def run_effect(runs: Sequence[RunOutcome], index: int) -> str:
    """What ``runs[index]`` does to the verdict, in words: it decides it, was superseded, or
    why it never does (``runs`` in the order they finished, oldest first)."""
    why = why_not_deciding(runs[index])
    if why is not None:
        return why
    return DECIDES if deciding_index(runs) == index else SUPERSEDED


def ingest_effect(runs: Sequence[RunOutcome]) -> str:
    """What the verification at upload does to the verdict, given the runs since."""
    return DECIDES if deciding_index(runs) is None else SUPERSEDED
