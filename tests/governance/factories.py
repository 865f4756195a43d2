"""Governance personas and rows.

alice the auditor files requests; bob and grace are admins; carol, dave and erin sit on the
council; sam is both admin and council; frank only views; oscar the operator uploads and
replays. Every signer enrols a key that another admin confirms, and keeps the private half
here (as a member keeps the file that ``governance keygen`` wrote).
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from core.errors import REPLAY_DIVERGENCE
from core.ledger import codes, signing
from governance import keystore, ledger, membership, services
from governance.models import ForceContinueRequest, MemberKey
from replay.models import Blob, ReplayRun, Trace

PERSONAS: dict[str, tuple[str, ...]] = {
    "alice": ("auditor",),
    "bob": ("admin",),
    "grace": ("admin",),
    "carol": ("council",),
    "dave": ("council",),
    "erin": ("council",),
    "sam": ("admin", "council"),
    "frank": ("viewer",),
    "oscar": ("operator",),
}

_counter = itertools.count(1)


@dataclass
class Signer:
    user: User
    key: MemberKey
    private: bytes

    def sign(self, payload: dict[str, Any], *, private: bytes | None = None) -> dict[str, Any]:
        return signing.signed_document(
            payload=payload, key_id=self.key.key_id, private_raw=private or self.private
        )


def roles_installed_for(user: User, *role_names: str) -> User:
    """Give ``user`` these roles as an installation would: a ROLES_INSTALLED event in the
    ledger (what every role check reads), mirrored to the groups."""
    if role_names:
        with transaction.atomic():
            ledger.append(
                event_type=codes.ROLES_INSTALLED,
                payload={
                    "user_id": user.pk,
                    "username": user.get_username(),
                    "roles_before": [],
                    "roles_after": sorted(set(role_names)),
                    "acting_as": "system",
                },
                actor_label=services.INSTALL_ACTOR,
            )
            membership.groups_mirror(user, role_names)
    return user


def person(name: str) -> User:
    user = User.objects.filter(username=name).first()
    if user is not None:
        return user
    user = User.objects.create_user(name, f"{name}@example.com", "pw")
    return roles_installed_for(user, *PERSONAS[name])


def enrol(name: str, *, confirm: bool = True) -> Signer:
    """A new confirmed key for ``name`` (confirmed by grace, or by bob for grace's own)."""
    user = person(name)
    private = keystore.generate_private_key()
    key = services.member_key_register(
        user=user, public_key=signing.public_key_of(private).hex(), label=f"{name}'s laptop"
    )
    if confirm:
        admin = person("bob" if name == "grace" else "grace")
        key = services.member_key_confirm(key=key, admin=admin)
    return Signer(user, key, private)


def trace_row(trace_id: str | None = None) -> Trace:
    n = next(_counter)
    digest = hashlib.sha256(f"governance blob {n}".encode()).hexdigest()
    blob = Blob.objects.create(sha256=digest, size=10, storage_name=f"{digest[:2]}/{digest}")
    return Trace.objects.create(
        trace_id=trace_id or hashlib.sha256(f"trace {n}".encode()).hexdigest()[:32],
        format="replay-trace",
        schema_version=1,
        blob=blob,
        filename=f"t{n}.trace.json",
        encoding="json",
        job_id=f"job-{n}",
    )


DIVERGENCES = [
    {"step": 3, "step_id": "route-1", "path": "/choice", "before": "b", "after": "a"},
]


def diverged_run(*, trace: Trace | None = None, requested_by: User | None = None) -> ReplayRun:
    """A finished audit run that stopped at a divergence at step 3 (no engine needed)."""
    trace = trace or trace_row()
    report = {
        "trace_id": trace.trace_id,
        "format": "replay-trace",
        "mode": "audit",
        "status": "diverged",
        "error_code": REPLAY_DIVERGENCE,
        "authoritative": True,
        "checks": [{"name": "steps", "ok": False, "detail": "step 3 diverged"}],
        "divergences": DIVERGENCES,
        "broke_at": 3,
        "expected": None,
        "observed": None,
        "force_continued": False,
    }
    return ReplayRun.objects.create(
        trace=trace,
        mode="audit",
        state=ReplayRun.State.DONE,
        status="diverged",
        error_code=REPLAY_DIVERGENCE,
        report=report,
        requested_by=requested_by,
    )


def filed_request(*, run: ReplayRun | None = None, by: str = "alice") -> ForceContinueRequest:
    return services.force_continue_request_file(
        run=run or diverged_run(), actor=person(by), reason="the router table was hot-fixed"
    )


def approve(
    signer: Signer,
    request: ForceContinueRequest,
    *,
    role: str = signing.ROLE_COUNCIL,
    decision: str = signing.APPROVE,
) -> dict[str, Any]:
    """The signed document ``signer`` would submit for ``request``."""
    payload = services.force_continue_payload_for(request=request, decision=decision, role=role)
    return signer.sign(payload)


def lift_request_guard() -> None:
    """Drop the database guard on ``governance_request`` (as the database owner could), for a
    test that rewrites a request row by hand, e.g. to move its expiry into the past."""
    from django.db import connection

    from replay.dbguards import drop_append_only_sql

    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_request"):
            cur.execute(sql)
