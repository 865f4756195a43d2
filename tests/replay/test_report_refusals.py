"""A refused report is never authoritative (contracts.md §3: no verdict was reached), whether
a check failed with a code that refuses or the request was refused before any check ran."""

from __future__ import annotations

import pytest

from core import errors
from core.replay.report import AUDIT, PRODUCTION, ReplayReport


@pytest.mark.parametrize("mode", [AUDIT, PRODUCTION])
@pytest.mark.parametrize(
    "code",
    [errors.FORCE_CONTINUE_REQUIRED, errors.MISSING_SNAPSHOT, errors.MALFORMED_TRACE],
)
def test_a_failure_that_refuses_is_not_authoritative(mode, code):
    report = ReplayReport(trace_id="t", format="replay-trace", mode=mode).fail(code, "why")

    assert (report.status, report.error_code, report.authoritative) == ("refused", code, False)


@pytest.mark.parametrize(
    ("code", "status"),
    [(errors.INTEGRITY_FAILURE, "tamper_detected"), (errors.REPLAY_DIVERGENCE, "diverged")],
)
def test_a_verdict_reached_stays_authoritative(code, status):
    report = ReplayReport(trace_id="t", format="replay-trace", mode=AUDIT).fail(code, "why")

    assert (report.status, report.authoritative) == (status, True)


@pytest.mark.parametrize(
    "code", [errors.INTEGRITY_FAILURE, errors.FORCE_CONTINUE_REQUIRED, errors.MISSING_SNAPSHOT]
)
def test_a_request_refused_before_any_check_is_refused_and_not_authoritative(code):
    report = ReplayReport(trace_id=None, format="", mode=PRODUCTION).refuse(
        code, "refused", broke_at=3, expected="a", observed="b"
    )

    data = report.to_json()
    assert (data["status"], data["error_code"], data["authoritative"]) == (
        "refused",
        code,
        False,
    )
    assert (data["message"], data["broke_at"], data["expected"], data["observed"]) == (
        "refused",
        3,
        "a",
        "b",
    )
    assert (data["checks"], data["divergences"]) == ([], [])
