"""One interface every kind of governed request implements, and the one registry of kinds.

A governed request is anything that waits for signatures before it takes effect: a
force-continue, a production replay, a role grant, a halt clear, a legal request's release or
erasure. A kind is an object with:

- ``name`` (``"force-continue"``, what the inbox and its API call it), ``label`` (in words);
- ``codes``: its ledger event types (``core.ledger.codes``): the filing, the signed vote, and
  the decisions, where it has them (:class:`KindCodes`);
- ``summary``: what it needs, one line ("one admin and a council quorum sign it");
- ``signer_roles()``: the roles that may sign it, read from the roles matrix
  (``core.ledger.roles``) and, where a setting chooses, from that setting;
- ``quorum()``: how many signatures in which role decide it, from the settings, in words;
- ``open_requests(now=...)``: the requests of this kind that are still open, each an
  :class:`OpenRequest`, read with a handful of queries whatever their number (the facts its
  refusal needs come with each one);
- ``capacities(open)``: the roles someone may sign ``open`` in, each with the roles-matrix
  action that allows signing in it (``{"council": "halt_clear"}``);
- ``refusal(open, user=..., role=..., now=..., history=...)``: why ``user`` may not sign
  ``open`` in ``role`` now, or None. Each kind answers with its own service's refusal
  functions (the checks a signature goes through before the signature itself is looked at),
  so what the inbox lists is what the signing takes; never a copy of their rules;
- ``needed(open)``: the signatures still missing, by role (``{"council": 1}``);
- ``key_of(payload, seq)``: the ``key`` of the request its ``codes.announced_by`` event (with
  this payload and seq) announces.

A kind with ``has_pages`` also carries what the one approval page ``/requests/<kind>/<key>/``
(``console/views/requests.py``, ``templates/console/request_approve.html``) and the one set of
API endpoints ``/api/requests/<kind>/…`` (``console/api/requests.py``) need
(:class:`KindPages`): who may see it (``seen_by``), ``detail(key)``, ``page_context`` (what its
body partial reads, with the ``blocker``), the payload builder (``payload_for``) and the signing
service (``record``). Every built-in kind has them; the council kinds
(``governance.requests.common.CouncilRequestKind``) add their shared list
(``/requests/<kind>/``, ``has_list``).

A kind an installed package brings declares its own ledger event types
(``KindCodes.event_types``, codes from 1000 up); registering it makes them known
(``core.ledger.codes.register_event_types``), so its requests and votes are ledger events and
``governance verify`` reconciles its rows (``governance.ledger``, the installed kinds' check).

Built-in kinds are the four council kinds, registered in :mod:`governance.requests.builtin`
(whose ``kinds()`` is the one registry). Installed
packages (and the other apps of this console, which governance does not import: the legal
requests of ``dsr``) add kinds through the entry-point group
``replay_console.request_kinds``: each entry point names a callable that takes the registry
and registers what it brings, as trace formats do (``replay_console.formats``)::

    [project.entry-points."replay_console.request_kinds"]
    my_kind = "my_package.requests:register"

Pure: no Django, no I/O beyond reading installed package metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from importlib.metadata import entry_points
from typing import Any, Protocol

from core.ledger import codes as ledger_codes

ENTRY_POINT_GROUP = "replay_console.request_kinds"


@dataclass(frozen=True)
class KindCodes:
    """The ledger event types of one kind (``core.ledger.codes`` names).

    A kind an installed package brings declares its own types in ``event_types`` (each an
    ``core.ledger.codes.EventType`` with a code from ``codes.INSTALLED_FIRST_CODE`` up): the
    registry makes them known when it registers the kind, so its filings, votes and decisions
    are ledger events like the built-in kinds', and ``governance verify`` reconciles its
    ``governance_request`` and ``governance_vote`` rows with them (``governance.ledger``)."""

    filed: str
    vote: str
    approved: str | None = None
    rejected: str | None = None
    #: the event after which it takes signatures, when that is not the filing (a legal
    #: request, once its subject's identity is verified): when its signers are told
    ready: str | None = None
    #: the event types this kind brings (an installed kind's; the built-in kinds' are
    #: ``core.ledger.codes.EVENT_TYPES``)
    event_types: tuple[ledger_codes.EventType, ...] = ()

    @property
    def announced_by(self) -> str:
        return self.ready or self.filed


@dataclass
class OpenRequest:
    """One open request of some kind, as the inbox shows it, with what its refusal reads.

    ``key`` names it within its kind (a request id, a halt's seq); ``filed_by`` is who asked
    (a username, or the label the ledger gives an actor); ``expires_at`` is when it stops
    taking signatures, ``due_date`` when it is due (legal requests); ``url`` is its approval
    page; ``facts`` is whatever the kind read in bulk for its refusal and tally."""

    kind: str
    key: str
    subject: str
    filed_by: str
    filed_at: datetime
    url: str
    request: Any
    expires_at: datetime | None = None
    due_date: date | None = None
    facts: dict[str, Any] = field(default_factory=dict)


class RequestKind(Protocol):
    name: str
    label: str
    codes: KindCodes
    summary: str

    def signer_roles(self) -> frozenset[str]: ...

    def quorum(self) -> str: ...

    def open_requests(self, *, now: datetime) -> list[OpenRequest]: ...

    def capacities(self, open_request: OpenRequest) -> Mapping[str, str]: ...

    def refusal(
        self,
        open_request: OpenRequest,
        *,
        user: Any,
        role: str,
        now: datetime,
        history: tuple[tuple[int, frozenset[str]], ...],
    ) -> Exception | None: ...

    def needed(self, open_request: OpenRequest) -> Mapping[str, int]: ...

    def key_of(self, payload: Mapping[str, Any], seq: int) -> str: ...


@dataclass(frozen=True)
class Vote:
    """One signed vote on a request as the ledger has it, whatever its kind."""

    seq: int
    approver: str
    role: str
    key_id: str
    decision: str
    reason: str


def vote_of_ballot(ballot: Any) -> Vote:
    """A ``governance.selectors.Ballot`` as a :class:`Vote`."""
    return Vote(
        seq=ballot.seq,
        approver=ballot.approver.get_username(),
        role=ballot.role,
        key_id=ballot.key_id,
        decision=ballot.decision,
        reason=ballot.reason,
    )


class KindPages(Protocol):
    """What the shared approval page and API read from a kind (``has_pages = True``).

    - ``title``, ``what`` (what one request is called: "halt"), ``page_title(request)``;
    - ``seen_by``: the roles-matrix actions that let someone see its requests (any one);
    - ``signed_in``: capacity (the role a vote is signed in) -> the action allowing it;
    - ``decisions``: the decisions a signer chooses between (``()``: approving only);
    - ``heading_partial`` (``""``: ``<h1>{{ kind.title }}</h1>``), ``body_partial`` (what is
      asked and the tally, reading ``page_context``), ``sign_heading``, ``signed_message``;
    - ``detail(key)``: the request ``key`` names, or None (the view checks roles first);
    - ``page_context(request, user=)``: what ``body_partial`` reads, with ``blocker``, why
      ``user`` may not sign it now in words ("" when they may);
    - ``payload_for(request, decision=, role=, reason=)``: the exact payload a signer signs;
    - ``record(request, approver=, document=)``: record one signed vote, or refuse with a
      ``GovernanceError``;
    - ``done_url(request)``: where the page goes once a vote is recorded;
    - ``state_of(request)``: ``pending`` while it takes signatures, else what became of it;
    - ``votes(request)``: its signed votes per the ledger, each a :class:`Vote`.
    """

    has_pages: bool
    title: str
    what: str
    seen_by: tuple[str, ...]
    signed_in: Mapping[str, str]
    decisions: tuple[str, ...]
    heading_partial: str
    body_partial: str
    sign_heading: str
    signed_message: str

    def page_title(self, request: Any) -> str: ...

    def detail(self, key: str) -> Any: ...

    def page_context(self, request: Any, *, user: Any) -> dict[str, Any]: ...

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict: ...

    def record(self, request: Any, *, approver: Any, document: Any) -> Any: ...

    def done_url(self, request: Any) -> str: ...

    def state_of(self, request: Any) -> str: ...

    def votes(self, request: Any) -> list[Vote]: ...


def needs_in_words(needed: Mapping[str, int]) -> str:
    """What a request still needs: "1 more council signature", "1 more admin signature and 2
    more council signatures"."""
    parts = [
        f"{count} more {role} signature{'' if count == 1 else 's'}"
        for role, count in needed.items()
        if count > 0
    ]
    return " and ".join(parts) or "nothing more"


class KindRegistry:
    """The kinds of governed request this console knows, in the order they were registered."""

    def __init__(self) -> None:
        self._kinds: dict[str, RequestKind] = {}

    def register(self, kind: RequestKind) -> None:
        if kind.name in self._kinds:
            raise ValueError(f"request kind {kind.name!r} is already registered")
        brought = {t.name for t in kind.codes.event_types}
        named = {kind.codes.filed, kind.codes.vote, kind.codes.approved, kind.codes.rejected}
        unknown = sorted(
            n for n in named if n and n not in brought and n not in ledger_codes.BY_NAME
        )
        if unknown:
            raise ValueError(f"request kind {kind.name!r} names unknown event types {unknown}")
        ledger_codes.register_event_types(kind.codes.event_types)
        self._kinds[kind.name] = kind

    def get(self, name: str) -> RequestKind | None:
        return self._kinds.get(name)

    def names(self) -> list[str]:
        return list(self._kinds)

    def __iter__(self) -> Iterator[RequestKind]:
        return iter(self._kinds.values())


def load_entry_points(registry: KindRegistry, eps: Iterable[Any] | None = None) -> list[str]:
    """Let installed packages register their kinds; returns the entry points loaded."""
    loaded = []
    for ep in eps if eps is not None else entry_points(group=ENTRY_POINT_GROUP):
        ep.load()(registry)
        loaded.append(ep.name)
    return loaded
