"""Governance rows: the append-only ledger, the key registries, force-continue and approvals.

Append-only at two levels: ``GovernanceEvent`` and ``Vote`` refuse update and delete in
the model layer (instances *and* querysets), and migration 0002 installs database triggers
that refuse UPDATE, DELETE and TRUNCATE (PostgreSQL) for any SQL whatsoever.

Halts have no table of their own: ``Halt`` is a proxy over the ``FORCE_HALT_REPLAY`` events,
and a halt is active until a ``FORCE_HALT_CLEAR`` event names it, so the ledger is the only
source of truth for what is halted. A halt's ``target_kind`` says what it stops:

* ``blob``: one stored file (``target_id`` is its sha256): what an integrity failure in the
  file itself halts (its events, seal, outputs, or a snapshot body it carries), so a tampered
  copy halts itself and never the genuine copies or the snapshots it claims;
* ``snapshot``: a snapshot id, every trace that uses it: a retained snapshot body that no
  longer hashes to its own id, or a declared security incident;
* ``trace``: a trace id, every stored copy: a declared security incident (and the integrity
  halts appended before halts named files, which still hold until cleared).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models.expressions import Func
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from core.ledger import codes
from replay.models import AppendOnlyError, AppendOnlyModel


class AppendOnlyQuerySet(models.QuerySet):
    """Bulk rewrites are refused too, not only ``instance.save()``/``delete()``."""

    def update(self, **kwargs):
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only")

    def delete(self):
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only")

    update.queryset_only = True  # type: ignore[attr-defined]
    delete.queryset_only = True  # type: ignore[attr-defined]


#: the payload keys under which an event names a stored trace (its trace id, its stored file's
#: sha256, one of its runs or snapshots: ``governance.evidence``), each with an expression
#: index (migration 0012) so the events naming some traces are found without reading the ledger
REFERENCE_KEYS = (
    "trace_id",
    "trace_sha256",
    "file_sha256",
    "target_id",
    "snapshot_id",
    "run_id",
)


def reference_index_name(key: str) -> str:
    return f"gov_event_ref_{key}"


class PayloadText(Func):
    """The text of an event's payload under one top-level ``key`` (NULL without it):
    ``payload ->> 'key'`` on PostgreSQL, ``JSON_EXTRACT(payload, '$."key"')`` on SQLite, the
    key written into the SQL (never a bound parameter, which SQLite does not match against an
    index's expression), so the index built on it (:data:`REFERENCE_KEYS`) serves the queries
    written with it."""

    output_field = models.TextField()

    def __init__(self, key: str) -> None:
        if not key.isidentifier() or not key.isascii():
            raise ValueError(f"a payload key is a plain identifier, not {key!r}")
        self.key = key
        super().__init__(models.F("payload"))

    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        payload, params = compiler.compile(self.source_expressions[0])
        if connection.vendor == "postgresql":
            return f"({payload} ->> '{self.key}')", params
        return f"""JSON_EXTRACT({payload}, '$."{self.key}"')""", params


class GovernanceEvent(AppendOnlyModel):
    """One ledger event. Every field is hashed or derived from the hash (core.ledger.chain)."""

    seq = models.BigIntegerField(primary_key=True)
    code = models.PositiveSmallIntegerField(db_index=True)
    type = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    # PROTECT: a person with ledger history is deactivated, never deleted (the row that
    # names them cannot change)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="governance_events",
    )
    actor_label = models.CharField(max_length=150)
    payload = models.JSONField()
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    server_key_id = models.CharField(max_length=128)
    # NULL, not "": the hashed body says null when there is no actor signature
    actor_key_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    actor_signature = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    prev_hash = models.CharField(max_length=71, blank=True)
    hash = models.CharField(max_length=71)
    server_signature = models.CharField(max_length=128)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        indexes = [
            models.Index(
                PayloadText(key),
                name=reference_index_name(key),
            )
            for key in REFERENCE_KEYS
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"

    @property
    def description(self) -> str:
        event_type = codes.BY_CODE.get(self.code)
        return event_type.description if event_type else ""


class HaltQuerySet(AppendOnlyQuerySet):
    def active(self):
        # the clears as a subquery: one query where there were two (every page that shows
        # the halts asks); a clear always names its halt (NULL would empty a NOT IN)
        cleared = (
            GovernanceEvent.objects.filter(code=codes.code_of(codes.FORCE_HALT_CLEAR))
            .annotate(halt=Cast(KT("payload__halt_seq"), models.BigIntegerField()))
            .filter(halt__isnull=False)
            .values("halt")
        )
        return self.exclude(seq__in=cleared)


class HaltManager(models.Manager.from_queryset(HaltQuerySet)):  # type: ignore[misc]
    def get_queryset(self):
        return super().get_queryset().filter(code=codes.code_of(codes.FORCE_HALT_REPLAY))


#: what a halt may name: one stored file (by its sha256), every copy of a trace id, or a
#: snapshot id (every trace that needs it)
HALT_BLOB = "blob"
HALT_TRACE = "trace"
HALT_SNAPSHOT = "snapshot"
HALT_TARGET_KINDS = (HALT_BLOB, HALT_TRACE, HALT_SNAPSHOT)


class Halt(GovernanceEvent):
    """A ``FORCE_HALT_REPLAY`` event, seen as a halt on one file, trace id or snapshot."""

    objects: ClassVar[HaltManager] = HaltManager()  # type: ignore[misc]  # a proxy's own

    class Meta:
        proxy = True
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"halt #{self.seq} on {self.target_kind} {self.target_id}"

    @property
    def target_kind(self) -> str:
        return str(self.payload.get("target_kind", ""))

    @property
    def target_id(self) -> str:
        return str(self.payload.get("target_id", ""))

    @property
    def reason(self) -> str:
        return str(self.payload.get("reason", ""))

    @property
    def label(self) -> str:
        """How a refusal names the halt: its seq and target."""
        return f"halt {self.seq} on {self.target_kind} {self.target_id}"


class SigningKey(models.Model):
    """A server Ed25519 signing key; the private half is Fernet-encrypted at rest.

    Effective from ``valid_from`` to ``valid_until`` (set when rotated: the rotation event is
    its last signature) unless revoked at ``revoked_at``. Rows are never deleted, so every
    event the key signed keeps verifying.
    """

    key_id = models.CharField(max_length=128, unique=True)
    public_key = models.CharField(max_length=64)  # raw 32 bytes, hex
    fingerprint = models.CharField(max_length=71, unique=True)
    encrypted_private_key = models.BinaryField()
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revocation_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["valid_from", "id"]

    def __str__(self) -> str:
        return f"server key {self.key_id}"

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("server signing keys are kept forever to verify old events")


class MemberKey(models.Model):
    """An admin's or council member's Ed25519 public key (the private key never comes here).

    Registered by its owner, usable once an admin (not the owner) confirmed it, revocable by
    its owner or an admin; approvals recorded before revocation keep counting. The ledger's
    KEY_ADDED, KEY_CONFIRMED and KEY_REVOKED events are the key's state: signing checks read
    them (``governance.ledger.member_key_states``), and ``governance verify`` names a row
    whose columns differ from them.
    """

    key_id = models.CharField(max_length=128, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="governance_keys"
    )
    public_key = models.CharField(max_length=64)  # raw 32 bytes, hex
    fingerprint = models.CharField(max_length=71, unique=True)
    label = models.CharField(max_length=200, blank=True)
    registered_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    revocation_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["registered_at", "id"]

    def __str__(self) -> str:
        return f"member key {self.key_id} of {self.user}"

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("member keys are kept forever to verify old approvals")


class ApiToken(models.Model):
    """A person's API token, kept as its SHA-256 only; the token is shown once, at creation.

    `prefix` (the first characters of the token) lets its owner tell tokens apart in a list.
    Creation and revocation are ledger events (API_TOKEN_CREATED, API_TOKEN_REVOKED); a
    revoked token is kept, so the ledger's token ids keep pointing at a row.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)  # hex SHA-256 of the whole token
    created_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"API token {self.prefix}… of {self.user}"


#: the kinds of governed request (``governance.requests`` registry names) that have a row
KIND_FORCE_CONTINUE = "force-continue"
KIND_PRODUCTION_REPLAY = "production-replay"
KIND_ROLE_GRANT = "role-grant"
KIND_HALT_CLEAR = "halt-clear"


class GovernedRequest(models.Model):
    """One governed request of any kind: what is asked (``payload``, exactly what its filing
    event signed), of what ``subject`` (a run id, trace pk, user id, halt seq or legal request
    id, as text), who filed it, until when, and how it was decided (the ledger events of the
    request and of the decision). Kind-specific columns that need referential integrity live
    in the per-kind tables joined 1:1 (``ForceContinueRequest`` ...).

    Halt clears and the approvals of a legal request (release, erasure) have a row too,
    created when the first vote is recorded (the halt's or the legal request's event is its
    ``request_event``; nobody filed a halt). The database allows only the transitions the
    ledger records (pending to approved or rejected) and no delete (migration 0010)."""

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=64)
    subject = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField()
    request_event = models.ForeignKey(GovernanceEvent, on_delete=models.PROTECT, related_name="+")
    decision_event = models.OneToOneField(
        GovernanceEvent, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    #: the kind a per-kind model's rows are (set by each subclass)
    KIND = ""

    class Meta:
        db_table = "governance_request"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "request_event"], name="governance_request_one_per_filing"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.state})"

    def subject_key(self) -> str:
        """The subject of a per-kind row, as the ``subject`` column spells it."""
        return self.subject

    def filer_name(self) -> str:
        """Who filed it. Only a halt clear's and a legal approval's rows have no filer (they
        are made with the first vote), and those kinds never ask."""
        if self.requested_by is None:
            raise ValueError(f"{self.kind} request {self.id} has no filer")
        return self.requested_by.get_username()

    def expiry(self) -> datetime:
        """Until when it takes votes; as :meth:`filer_name`, every filed kind has one."""
        if self.expires_at is None:
            raise ValueError(f"{self.kind} request {self.id} has no expiry")
        return self.expires_at


#: the council's requests were rows of this name before they became governed requests
CouncilRequest = GovernedRequest


class ForceContinueRequest(GovernedRequest):
    """Continue one diverged run past the step where it diverged (one admin and a council
    quorum); on quorum the resumed run is queued, non-authoritative."""

    KIND = KIND_FORCE_CONTINUE

    run = models.ForeignKey(
        "replay.ReplayRun", on_delete=models.PROTECT, related_name="force_continue_requests"
    )
    step = models.IntegerField()  # seq of the diverged step to continue past
    divergence_digest = models.CharField(max_length=71)
    resumed_run = models.OneToOneField(
        "replay.ReplayRun",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="force_continue_origin",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"force-continue {self.id} ({self.state})"

    def subject_key(self) -> str:
        return str(self.run_id)


class ProductionReplayRequest(GovernedRequest):
    """A request that a council quorum approve one production replay of one stored trace.

    Production replay needs the auditor and admin roles held together; anyone holding one of
    them may instead ask the council. On quorum the run is queued for the requester at once
    (``run``), so an approval authorises exactly one run of exactly these bytes.
    """

    KIND = KIND_PRODUCTION_REPLAY

    trace = models.ForeignKey(
        "replay.Trace", on_delete=models.PROTECT, related_name="production_requests"
    )
    run = models.OneToOneField(
        "replay.ReplayRun",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="production_approval",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"production replay {self.id} ({self.state})"

    def subject_key(self) -> str:
        return str(self.trace_id)


class RoleGrantRequest(GovernedRequest):
    """An admin's request that ``user`` be granted admin or council (``roles``): it takes
    effect only once a council quorum signed it (a ROLE_GRANT_APPROVED event)."""

    KIND = KIND_ROLE_GRANT

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="role_grants"
    )
    roles = models.JSONField()  # the roles to add, sorted

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"role grant {self.id} ({self.state})"

    def subject_key(self) -> str:
        return str(self.user_id)


class Vote(AppendOnlyModel):
    """One signed decision on one governed request, of any kind (force-continue, production
    replay, role grant, halt clear, a legal request's release or erasure approval).

    A mirror of its ledger ``event``: tallies and decisions count the signed vote events
    (``governance.selectors.force_continue_ballots`` ...), and ``governance verify`` names a
    row that differs from its event. Append-only in the database (migration 0010)."""

    class Decision(models.TextChoices):
        APPROVE = "approve", "approve"
        DENY = "deny", "deny"

    request = models.ForeignKey(GovernedRequest, on_delete=models.PROTECT, related_name="approvals")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="governance_approvals"
    )
    role = models.CharField(max_length=16)
    key = models.ForeignKey(MemberKey, on_delete=models.PROTECT, related_name="approvals")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField(blank=True)
    payload = models.JSONField()  # exactly what was signed
    signature = models.CharField(max_length=128)
    event = models.OneToOneField(GovernanceEvent, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        db_table = "governance_vote"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "approver"], name="governance_vote_once_per_person"
            ),
            models.UniqueConstraint(fields=["request", "key"], name="governance_vote_once_per_key"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} by {self.approver} ({self.role})"


class VerificationMark(AppendOnlyModel):
    """ "The chain verified from seq 1 through ``through_seq``": a signed, append-only row.

    The signature (by a server key, over ``signing.verification_mark_body``) is checked every
    time a mark is read, so a row edited or inserted by hand is not believed; the newest
    mark that verifies is where the next verification starts.
    """

    through_seq = models.BigIntegerField()
    head_hash = models.CharField(max_length=71)
    genesis_hash = models.CharField(max_length=71)
    verified_at = models.DateTimeField()
    key_id = models.CharField(max_length=128)
    signature = models.CharField(max_length=128)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"verified through seq {self.through_seq}"


class LedgerVerification(models.Model):
    """One verification of the ledger run in the background: of the events after the newest
    mark (``scope="new"``) or of the whole chain (``scope="full"``). At most one is active at
    a time (the constraint): asking again while one runs joins it."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        ABANDONED = "abandoned"  # queued or running without progress past the stale limit

    SCOPE_NEW = "new"
    SCOPE_FULL = "full"

    scope = models.CharField(max_length=8)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    # constant; with the constraint below, at most one unfinished verification at a time
    lane = models.CharField(max_length=8, default="ledger", editable=False)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    from_seq = models.BigIntegerField(default=0)  # the mark it started after (0: the start)
    checked = models.BigIntegerField(default=0)  # events checked so far
    total = models.BigIntegerField(default=0)  # events it has to check
    result = models.JSONField(default=dict, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)  # when ``checked`` last moved

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["lane"],
                condition=models.Q(finished_at__isnull=True),
                name="one_unfinished_ledger_verification",
            )
        ]

    def __str__(self) -> str:
        return f"ledger verification {self.id} ({self.scope}, {self.state})"

    @property
    def active(self) -> bool:
        return self.finished_at is None

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.checked * 100 // self.total)


class MerkleNode(AppendOnlyModel):
    """A node of the ledger's RFC 9162 Merkle tree (``governance.transparency``): the hash of
    the perfect subtree over leaves ``[index * 2**level, (index + 1) * 2**level)``, leaf ``i``
    being the event ``seq = i + 1``. Written once, when its last leaf is appended
    (``tlog.merkle.append_leaf``), never changed: proofs read O(log n) of them."""

    level = models.PositiveSmallIntegerField()
    index = models.BigIntegerField()
    hash = models.BinaryField(max_length=32)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["level", "index"], name="governance_merklenode_at")
        ]

    def __str__(self) -> str:
        return f"merkle node {self.level}/{self.index}"


class TreeCheckpoint(AppendOnlyModel):
    """A C2SP checkpoint of the ledger's Merkle tree signed by a server key as a C2SP signed
    note: ``note`` is the whole signed note, byte for byte as it is handed out."""

    size = models.BigIntegerField()
    root_hash = models.BinaryField(max_length=32)
    note = models.TextField()
    key_id = models.CharField(max_length=128)
    created_at = models.DateTimeField()
    #: the running digest of the server signatures of events 1..size
    #: (``core.ledger.chain.signatures_digest``), each checked when the checkpoint was signed,
    #: and the same key's signature of ``chain.signatures_message``: full verification then
    #: needs no Ed25519 check per covered event. Null and empty on checkpoints without it.
    signatures_digest = models.BinaryField(max_length=32, null=True)
    signatures_signature = models.CharField(max_length=128, blank=True, default="")

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-size", "-id"]
        indexes = [models.Index(fields=["size"], name="governance_treecp_size")]

    def __str__(self) -> str:
        return f"checkpoint at size {self.size}"


class WitnessCosignature(AppendOnlyModel):
    """A witness's cosignature/v1 of one of the ledger's checkpoints, verified with the
    witness's configured vkey (``GOVERNANCE_WITNESSES``) before it was stored: ``line`` is the
    note signature line as the witness returned it (``— <name> <base64>``)."""

    witness = models.CharField(max_length=255)
    key_id = models.CharField(max_length=8)
    tree_size = models.BigIntegerField()
    root_hash = models.BinaryField(max_length=32)
    timestamp = models.BigIntegerField()
    line = models.TextField()
    created_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-tree_size", "-id"]
        indexes = [models.Index(fields=["tree_size"], name="governance_wcosig_size")]

    def __str__(self) -> str:
        return f"cosignature of {self.witness} at size {self.tree_size}"


class WitnessAlert(models.Model):
    """A witness refused the ledger's history (422 inconsistent, or 409 holding a size larger
    than the tree): one per (witness, size), with the SECURITY_INCIDENT recorded for it; shown
    to admins and council on every page until an admin acknowledges it."""

    witness = models.CharField(max_length=255)
    size = models.BigIntegerField()
    status = models.PositiveSmallIntegerField()
    reason = models.TextField()
    incident_seq = models.BigIntegerField()
    created_at = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=("witness", "size"), name="governance_walert_once")
        ]

    def __str__(self) -> str:
        return f"witness {self.witness} refused size {self.size}"
