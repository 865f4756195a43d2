"""The check pipeline's runner (core/replay/pipeline.py): order, first refusal, the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.replay.pipeline import Check, Refusal, first_refusal, run


@dataclass
class Report:
    failed_with: tuple[str, str, dict[str, Any]] | None = None

    def fail(self, code: str, message: str, **fields: Any) -> Report:
        self.failed_with = (code, message, fields)
        return self


@dataclass
class State:
    report: Report = field(default_factory=Report)
    ran: list[str] = field(default_factory=list)


def passing(name: str) -> Check[State]:
    return Check(name, lambda s: s.ran.append(name))  # type: ignore[func-returns-value]


def refusing(name: str, code: str) -> Check[State]:
    def fn(state: State) -> Refusal:
        state.ran.append(name)
        return Refusal(code, f"{name} refused", {"broke_at": 3, "expected": "a"})

    return Check(name, fn)


def test_it_runs_every_check_in_the_lists_order_and_returns_the_report_untouched():
    state = State()
    report = run([passing("a"), passing("b"), passing("c")], state)
    assert report is state.report
    assert state.ran == ["a", "b", "c"]
    assert report.failed_with is None


def test_the_first_refusal_fails_the_report_and_no_later_check_runs():
    state = State()
    checks = [passing("a"), refusing("b", "X_CODE"), refusing("c", "Y_CODE"), passing("d")]
    report = run(checks, state)
    assert state.ran == ["a", "b"]
    assert report.failed_with == ("X_CODE", "b refused", {"broke_at": 3, "expected": "a"})


def test_first_refusal_names_the_check_that_refused():
    state = State()
    found = first_refusal([passing("a"), refusing("b", "X_CODE")], state)
    assert found == ("b", Refusal("X_CODE", "b refused", {"broke_at": 3, "expected": "a"}))
    assert first_refusal([passing("a")], State()) is None
