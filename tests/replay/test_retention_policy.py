"""The retention policy (``core.replay.retention``): pure, so every rule is a plain assertion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.replay import retention
from core.replay.retention import Policy, PolicyError, Rule, TraceFacts

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def facts(pk=1, *, verdict="ok", fmt="replay-trace", started=None, uploaded=NOW - 100 * DAY):
    return TraceFacts(pk, f"t{pk}", fmt, verdict, started, uploaded)


POLICY = retention.policy_from_setting(
    {
        "default": 90,
        "verdict": {"ok": 30, "tamper_detected": None, "diverged": 60},
        "format": {"paxman": 45, "ahd": 10},
    }
)


def test_no_setting_expires_nothing():
    policy = retention.policy_from_setting(None)

    assert policy.empty
    assert retention.decide(policy, [facts()], {}) == []
    assert retention.cutoff(policy, NOW) is None


@pytest.mark.parametrize(
    ("verdict", "fmt", "rule"),
    [
        ("ok", "replay-trace", Rule("verdict:ok", 30)),
        ("refused", "replay-trace", Rule("default", 90)),
        ("refused", "paxman", Rule("format:paxman", 45)),
        ("ok", "paxman", Rule("format:paxman", 45)),  # the longer of 30 and 45
        ("diverged", "ahd", Rule("verdict:diverged", 60)),  # the longer of 60 and 10
        ("tamper_detected", "ahd", Rule("verdict:tamper_detected", None)),  # forever wins
    ],
)
def test_the_rule_that_keeps_a_trace_longer_wins(verdict, fmt, rule):
    assert retention.rule_for(POLICY, facts(verdict=verdict, fmt=fmt)) == rule


def test_retention_counts_from_the_traces_start_else_its_upload():
    started = facts(1, started=NOW - 40 * DAY, uploaded=NOW - 2 * DAY)
    uploaded = facts(2, uploaded=NOW - 20 * DAY)
    decisions = retention.decide(POLICY, [uploaded, started], {})

    assert [(d.facts.pk, d.expires_at) for d in decisions] == [
        (1, NOW - 10 * DAY),
        (2, NOW + 10 * DAY),
    ]
    assert [d.facts.pk for d in retention.due(decisions, NOW)] == [1]


def test_a_trace_expires_exactly_at_its_time():
    decision = retention.decide(POLICY, [facts(uploaded=NOW - 30 * DAY)], {})[0]

    assert decision.due(NOW)
    assert not decision.due(NOW - timedelta(microseconds=1))


def test_a_protected_trace_is_never_due():
    decisions = retention.decide(POLICY, [facts(1), facts(2)], {1: "governance event 12"})

    assert [(d.facts.pk, d.protected_by) for d in decisions] == [
        (1, "governance event 12"),
        (2, None),
    ]
    assert [d.facts.pk for d in retention.due(decisions, NOW + 1000 * DAY)] == [2]


def test_traces_kept_forever_get_no_decision():
    assert retention.decide(POLICY, [facts(verdict="tamper_detected")], {}) == []


def test_the_cutoff_is_the_shortest_retention():
    assert retention.cutoff(POLICY, NOW) == NOW - 10 * DAY


def test_a_rule_label_says_its_days():
    assert Rule("verdict:ok", 30).label == "verdict:ok (30 days)"
    assert Rule("verdict:x", None).label == "verdict:x (kept forever)"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ([], "REPLAY_RETENTION is a mapping, not list"),
        ({"days": 3}, "REPLAY_RETENTION has unknown keys ['days']: use default, verdict, format"),
        (
            {"default": "30"},
            "REPLAY_RETENTION.default: retention is a whole number of days or null, not '30'",
        ),
        (
            {"default": True},
            "REPLAY_RETENTION.default: retention is a whole number of days or null, not True",
        ),
        ({"verdict": {"ok": -1}}, "REPLAY_RETENTION.verdict.ok: -1 days is outside 0..36600"),
        ({"format": [1]}, "REPLAY_RETENTION.format: a mapping of name to days, not list"),
    ],
)
def test_it_refuses_a_setting_that_is_not_a_policy(setting, message):
    with pytest.raises(PolicyError) as caught:
        retention.policy_from_setting(setting)

    assert str(caught.value) == message


def test_a_policy_with_only_forever_rules_is_empty():
    assert Policy(verdict={"ok": None}).empty
    assert not Policy(format={"x": 0}).empty
