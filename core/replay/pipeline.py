"""One check pipeline: a verify or a replay is an ordered list of small named checks.

A :class:`Check` is a name and a function over a state object. The function does its part
(records what it learnt on the state, appends its line to the report) and returns ``None``,
or returns a :class:`Refusal`: the exact error code, the message and the fields (where it
broke, the expected and observed values) the report fails with. :func:`run` owns the order
(the list's), the first failure (the first refusal stops the run, no later check runs) and
the report (``state.report``, failed with that refusal, and returned).

Pure: no Django; the formats' engines build their lists and state objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar


class FailingReport(Protocol):
    """What the runner needs of a report: a way to fail it with a refusal."""

    def fail(self, code: str, message: str, **fields: Any) -> Self: ...


R = TypeVar("R", bound=FailingReport)


class HasReport(Protocol[R]):
    report: R


S = TypeVar("S", bound=HasReport[Any])


@dataclass(frozen=True)
class Refusal:
    """The first failing check's verdict: ``report.fail(code, message, **fields)``."""

    code: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check(Generic[S]):
    """One named step of a pipeline: ``fn(state)`` is ``None`` (go on) or a :class:`Refusal`."""

    name: str
    fn: Callable[[S], Refusal | None]


def first_refusal(checks: Sequence[Check[S]], state: S) -> tuple[str, Refusal] | None:
    """Run ``checks`` in order over ``state``; the first one's name and refusal, if any."""
    for check in checks:
        refusal = check.fn(state)
        if refusal is not None:
            return check.name, refusal
    return None


def run(checks: Sequence[Check[S]], state: S) -> Any:
    """Run ``checks`` in order over ``state`` and return ``state.report``: as the checks left
    it, or failed with the first refusal (no check after it runs)."""
    found = first_refusal(checks, state)
    if found is None:
        return state.report
    refusal = found[1]
    return state.report.fail(refusal.code, refusal.message, **refusal.fields)
