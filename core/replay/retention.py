"""Retention policy: which stored traces expire, when, and by which rule. Pure: no Django, no
clock (the caller passes ``now``), no I/O.

The setting (``REPLAY_RETENTION``; ``REPLAY_RETENTION_JSON`` in the environment)::

    {"default": None | days,
     "verdict": {"ok": days | None, "tamper_detected": None, ...},
     "format": {"paxman": days | None, ...}}

``days`` is a whole number of days counted from the trace's start (``job.started_at`` when the
trace says it, else its upload); ``None`` keeps forever. A trace's rules are the verdict rule
for its verdict and the format rule for its format, when they are set, else ``default``.
When both a verdict and a format rule apply, the one that keeps the trace **longer** wins
(``None``, forever, beats any number): retention removes evidence, so where two rules disagree
the console keeps it. With no setting at all nothing ever expires.

A trace that is *protected* never expires, whatever its rule: one a governance event names
(a replay, a halt, a force-continue, a personal-data access ...), or one a registered hold
names (an open legal request). The caller computes those sets; :func:`decide` takes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

DEFAULT: Final = "default"
VERDICT: Final = "verdict"
FORMAT: Final = "format"
#: the longest retention a rule may name (a typo such as 36500000 is refused, not obeyed)
MAX_DAYS: Final = 36_600


class PolicyError(ValueError):
    """The retention setting is not a policy (raised at start-up, so nonsense never runs)."""


@dataclass(frozen=True, slots=True)
class Policy:
    default: int | None = None
    verdict: Mapping[str, int | None] = field(default_factory=dict)
    format: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when no rule can ever expire anything."""
        return self.default is None and not any(
            d is not None for d in (*self.verdict.values(), *self.format.values())
        )


@dataclass(frozen=True, slots=True)
class Rule:
    """The rule that decides a trace's retention: its name (``default``, ``verdict:ok``,
    ``format:paxman``) and its days (None: kept forever)."""

    name: str
    days: int | None

    @property
    def label(self) -> str:
        kept = "kept forever" if self.days is None else f"{self.days} days"
        return f"{self.name} ({kept})"


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """What the policy needs to know about one stored trace."""

    pk: int
    trace_id: str
    format: str
    verdict: str
    started_at: datetime | None
    uploaded_at: datetime
    sha256: str = ""  # the stored file's, by which pages link to the trace

    @property
    def start(self) -> datetime:
        return self.started_at if self.started_at is not None else self.uploaded_at


@dataclass(frozen=True, slots=True)
class Decision:
    """One trace under a rule that expires it: when, and what (if anything) protects it."""

    facts: TraceFacts
    rule: Rule
    expires_at: datetime
    protected_by: str | None = None

    def due(self, now: datetime) -> bool:
        return self.protected_by is None and self.expires_at <= now


def _days(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{where}: retention is a whole number of days or null, not {value!r}")
    if not 0 <= value <= MAX_DAYS:
        raise PolicyError(f"{where}: {value} days is outside 0..{MAX_DAYS}")
    return value


def _table(value: Any, where: str) -> dict[str, int | None]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: a mapping of name to days, not {type(value).__name__}")
    return {str(k): _days(v, f"{where}.{k}") for k, v in value.items()}


def policy_from_setting(value: Mapping[str, Any] | None) -> Policy:
    """The policy a setting describes; :class:`PolicyError` names what is wrong with it."""
    if value is None:
        return Policy()
    if not isinstance(value, Mapping):
        raise PolicyError(f"REPLAY_RETENTION is a mapping, not {type(value).__name__}")
    unknown = sorted(set(value) - {DEFAULT, VERDICT, FORMAT})
    if unknown:
        raise PolicyError(
            f"REPLAY_RETENTION has unknown keys {unknown}: use default, verdict, format"
        )
    return Policy(
        default=_days(value.get(DEFAULT), "REPLAY_RETENTION.default"),
        verdict=_table(value.get(VERDICT), "REPLAY_RETENTION.verdict"),
        format=_table(value.get(FORMAT), "REPLAY_RETENTION.format"),
    )


def rule_for(policy: Policy, facts: TraceFacts) -> Rule:
    """The rule that decides this trace's retention (see the module docstring)."""
    rules = []
    if facts.verdict in policy.verdict:
        rules.append(Rule(f"verdict:{facts.verdict}", policy.verdict[facts.verdict]))
    if facts.format in policy.format:
        rules.append(Rule(f"format:{facts.format}", policy.format[facts.format]))
    if not rules:
        return Rule(DEFAULT, policy.default)
    forever = [r for r in rules if r.days is None]
    if forever:
        return forever[0]
    return max(rules, key=lambda r: r.days or 0)


def decide(
    policy: Policy, traces: Iterable[TraceFacts], protected: Mapping[int, str]
) -> list[Decision]:
    """A decision for every trace some rule expires (traces kept forever are left out), in
    the order they expire (then by pk); ``protected`` maps a trace's pk to why it is kept."""
    out = []
    for facts in traces:
        rule = rule_for(policy, facts)
        if rule.days is None:
            continue
        out.append(
            Decision(
                facts=facts,
                rule=rule,
                expires_at=facts.start + timedelta(days=rule.days),
                protected_by=protected.get(facts.pk),
            )
        )
    out.sort(key=lambda d: (d.expires_at, d.facts.pk))
    return out


def due(decisions: Iterable[Decision], now: datetime) -> list[Decision]:
    """The decisions whose trace expires now: past its time and not protected."""
    return [d for d in decisions if d.due(now)]


def cutoff(policy: Policy, now: datetime) -> datetime | None:
    """No trace that started after this moment can be due at ``now`` (None: nothing can be):
    the shortest retention any rule names, so the caller loads only older traces."""
    days = [
        d
        for d in (policy.default, *policy.verdict.values(), *policy.format.values())
        if d is not None
    ]
    return now - timedelta(days=min(days)) if days else None
