"""What an approval covers (``core.bundle.scope``, pure): the signed list of released values, the
signed part of an erasure plan, and the phrases that name how a plan changed."""

from __future__ import annotations

import pytest

from core.bundle import scope

SHA_A, SHA_B = "aa" * 32, "bb" * 32


def plan(*traces: tuple[str, str, list[str]], subjects=("subj_a",), erased=(), unknown=()):
    rows = [
        {"trace_id": t, "file_sha256": sha, "format": "replay-trace", "fields": fields}
        for t, sha, fields in traces
    ]
    return {
        "subjects": list(subjects),
        "unknown": list(unknown),
        "already_erased": list(erased),
        "traces": rows,
        "fields": sum(len(r["fields"]) for r in rows),
        "keys": len(subjects),
        "stays": ["prose that is not signed"],
    }


def test_the_signed_plan_leaves_out_what_stays_and_is_empty_without_a_plan():
    signed = scope.signed_plan(plan(("t1", SHA_A, ["event 2 /user/name"])))
    assert list(signed) == ["subjects", "unknown", "already_erased", "traces", "fields", "keys"]
    assert scope.signed_plan(None) == {}


@pytest.mark.parametrize(
    ("now", "changes"),
    [
        (plan(("t1", SHA_A, ["event 2 /user/name"])), []),
        (
            plan(("t1", SHA_A, ["event 2 /user/name"]), ("t1", SHA_B, ["event 3 /to"])),
            [f"trace t1 (file {SHA_B}) added with 1 field(s)"],
        ),
        (plan(), [f"trace t1 (file {SHA_A}) removed"]),
        (
            plan(("t1", SHA_A, ["event 2 /user/email"])),
            [
                "field 'event 2 /user/email' of trace t1 added",
                "field 'event 2 /user/name' of trace t1 removed",
            ],
        ),
        (
            plan(("t1", SHA_A, ["event 2 /user/name"]), subjects=(), erased=("subj_a",)),
            ["subject to erase subj_a removed", "subject already erased subj_a added"],
        ),
    ],
)
def test_plan_changes_name_each_difference(now, changes):
    signed = scope.signed_plan(plan(("t1", SHA_A, ["event 2 /user/name"])))
    assert scope.plan_changes(signed, scope.signed_plan(now)) == changes


def test_a_count_alone_that_differs_is_still_named():
    signed = scope.signed_plan(plan(("t1", SHA_A, ["event 2 /user/name"])))
    assert scope.plan_changes(signed, {**signed, "keys": 2}) == ["keys 1 is now 2"]


def test_release_values_are_distinct_and_in_one_order():
    a = scope.release_value(
        subject="subj_b", trace_id="t2", file_sha256=SHA_A, location="event 2", path="/x"
    )
    b = scope.release_value(
        subject="subj_a", trace_id="t1", file_sha256=SHA_B, location="event 9", path="/y"
    )
    assert scope.release_values([a, b, dict(a)]) == [b, a]
    assert scope.value_label(a) == "event 2 /x of subj_b in trace t2"
