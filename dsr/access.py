"""The access and erasure halves of a legal request (issue 14 items 3 and 5, orchestration).

* :func:`bundle_request` queues the evidence bundle; :func:`bundle_build` (the background
  task) finds every trace that concerns the subjects in the subject index, replays each in
  AUDIT mode only (:func:`dsr_replay` refuses any other mode with ``DSR_REPLAY_MODE``), and
  builds the signed bundle with ``core.bundle`` (redacted values, except the fields an admin
  released), then appends DSR_EXPORTED. Progress is kept on the request's row.
* :func:`field_release`: an admin releases one field into the bundle; exactly one
  PII_REVEALED event, naming the request.
* :func:`legal_request_erase`: after its four-eyes approval, crypto-shreds the subjects
  (``privacy.erasure.shred``) and appends a server-signed DSR_ERASED receipt with no personal
  data; a second erasure returns the first receipt and destroys nothing.

No personal value is written to a ledger payload, a log line or a row here.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import bundle
from core.bundle import scope
from core.ledger import chain, codes, signing
from dsr import services, signed, subjects_port
from dsr.evidence import server_sign, tlog_evidence
from dsr.models import DsrRelease, LegalRequest
from governance import ledger
from governance import services as gov_services
from governance.models import GovernanceEvent
from replay.models import ReplayRun, Trace

logger = logging.getLogger(__name__)

AUDIT = "audit"
DSR_ACTOR = "system:dsr"
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"

REPLAY_MODE_MESSAGE = "a data subject request replays in audit mode only, not {mode!r}"
NO_ACCESS_MESSAGE = "legal request {request} is an erasure request: it has no bundle"
NO_ERASURE_MESSAGE = "legal request {request} is an access request: it erases nothing"
PRIVACY_MESSAGE = "the privacy store (subject index and keys) is not installed here"
FIELD_UNKNOWN_MESSAGE = "legal request {request} has no indexed field {field} of {subject}"
RELEASED_TWICE_MESSAGE = "{field} of {subject} is already released for legal request {request}"
RELEASE_REASON_MESSAGE = "releasing a field needs a reason"
NOT_BUILT_MESSAGE = "the bundle of legal request {request} is not built"
NOT_COVERED_MESSAGE = (
    "{value} is not among the {count} value(s) the signed release approval of legal request "
    "{request} covers (DSR_APPROVAL seq {seqs}): releasing it needs a new legal request and "
    "its approval"
)
PLAN_CHANGED_MESSAGE = (
    "the erasure plan of legal request {request} changed since its approval (DSR_APPROVAL seq "
    "{seq}) was signed: {changes}; a new approval is needed"
)


def _privacy_error() -> codes.GovernanceError:
    return codes.GovernanceError(codes.DSR_STATE, PRIVACY_MESSAGE)


def bundle_dir() -> Path:
    path = Path(settings.VAR_DIR) / "dsr-bundles"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def bundle_path(request: LegalRequest) -> Path:
    return bundle_dir() / f"{request.id}.json"


# --- replays ----------------------------------------------------------------------------------


def dsr_replay(*, trace: Trace, mode: str) -> ReplayRun:
    """Replay one trace for a data subject request: audit mode, or a DSR_REPLAY_MODE refusal
    (sandbox and production replays never run for a DSR). Governed like any replay (halts,
    REPLAY_REQUEST/REPLAY_RESULT), requested by the system on the request's behalf."""
    if mode != AUDIT:
        raise codes.GovernanceError(codes.DSR_REPLAY_MODE, REPLAY_MODE_MESSAGE.format(mode=mode))
    run = gov_services.replay_request(
        trace=trace, mode=AUDIT, actor=None, actor_label=DSR_ACTOR, enqueue=False
    )
    return gov_services.replay_run_govern(run_id=run.id)


# --- the bundle -------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def bundle_request(*, request: LegalRequest, actor: Any, enqueue: bool = True) -> LegalRequest:
    """Queue the bundle's build (a background task); joins one already queued or running.
    ``enqueue=False`` leaves the build to the caller (``manage.py dsr bundle`` runs it)."""
    ledger.lock()
    request = LegalRequest.objects.select_for_update().get(pk=request.pk)
    if request.is_closed:
        raise services._state_error(request, "build a bundle")
    if not request.wants_access:
        raise codes.GovernanceError(codes.DSR_INVALID, NO_ACCESS_MESSAGE.format(request=request.id))
    if not subjects_port.privacy_installed():
        raise _privacy_error()
    if request.bundle_state in (QUEUED, RUNNING):
        return request
    request.bundle_state, request.bundle_done, request.bundle_total = QUEUED, 0, 0
    request.bundle_error = ""
    request.save(update_fields=["bundle_state", "bundle_done", "bundle_total", "bundle_error"])
    if enqueue:
        from dsr.tasks import legal_request_bundle
        from replay.background import enqueue as enqueue_task

        enqueue_task(legal_request_bundle, str(request.id))
    return request


def _progress(request: LegalRequest, **fields: Any) -> None:
    LegalRequest.objects.filter(pk=request.pk).update(**fields)
    for name, value in fields.items():
        setattr(request, name, value)


def _key(hit: Any) -> tuple[str, int, str, str]:
    return (hit.subject_ref, hit.trace_pk, hit.location, hit.path)


def _events(request: LegalRequest, traces: list[Trace]) -> list[tuple[Any, ...]]:
    """The ledger events concerning these traces (by file hash or trace id) and this request."""
    shas = [t.blob.sha256 for t in traces]
    ids = [t.trace_id for t in traces]
    found = Q(payload__request_id=str(request.id))
    if traces:
        found |= Q(payload__trace_sha256__in=shas) | Q(payload__trace_id__in=ids)
    return list(GovernanceEvent.objects.filter(found).order_by("seq").values_list(*chain.FIELDS))


def bundle_build(*, request_id: Any) -> LegalRequest:
    """Build the bundle (what the task runs): audit replays, then the signed file and its
    DSR_EXPORTED event. A failure is kept on the row (never half a file)."""
    request = LegalRequest.objects.select_related("requested_by").get(pk=request_id)
    _progress(request, bundle_state=RUNNING, bundle_done=0, bundle_error="")
    try:
        refs = list(request.subject_refs)
        hits = subjects_port.find(refs)
        order = list(dict.fromkeys(h.trace_pk for h in hits))
        rows = Trace.objects.select_related("blob").in_bulk(order)
        traces = [rows[pk] for pk in order if pk in rows]
        _progress(request, bundle_total=len(traces))
        released = revealable(request)
        revealed: dict[tuple[str, int, str, str], str] = {}
        if released:
            for hit, value in subjects_port.subject_values(refs, reveal=True):
                if _key(hit) in released and value != "[erased]":
                    revealed[_key(hit)] = value
        values: dict[int, list[dict[str, Any]]] = {}
        for hit, value in subjects_port.subject_values(refs, reveal=False):
            key = _key(hit)
            values.setdefault(hit.trace_pk, []).append(
                {
                    "subject_ref": hit.subject_ref,
                    "location": hit.location,
                    "path": hit.path,
                    "value": revealed.get(key, value),
                    "released": key in revealed,
                }
            )
        evidence = []
        for done, trace in enumerate(traces, start=1):
            run = dsr_replay(trace=trace, mode=AUDIT)
            evidence.append(
                bundle.TraceEvidence(
                    trace_id=trace.trace_id,
                    file_sha256="sha256:" + trace.blob.sha256,
                    format=trace.format,
                    values=values.get(trace.pk, []),
                    report=run.report or None,
                    verdict=run.status or None,
                )
            )
            _progress(request, bundle_done=done)
        rows_ = _events(request, traces)
        used_server = {r[chain.FIELDS.index("server_key_id")] for r in rows_}
        used_member = {r[chain.FIELDS.index("actor_key_id")] for r in rows_} - {None}
        server_keys = [
            bundle.server_key_record(k)
            for key_id, k in sorted(ledger.server_keys().items())
            if key_id in used_server
        ]
        member_keys = {k: v.hex() for k, v in ledger.actor_keys().items() if k in used_member}
        data = bundle.build_bundle(
            bundle.BundleInputs(
                request_ref=str(request.id),
                subject_refs=refs,
                created_at=signing.format_time(timezone.now()),
                traces=evidence,
                events=[bundle.event_record(r) for r in rows_],
                server_keys=server_keys,
                member_keys=member_keys,
                tlog=tlog_evidence(rows_),
            ),
            server_sign,
        )
    except Exception as exc:
        logger.exception("the bundle of legal request %s failed", request.id)
        _progress(request, bundle_state=FAILED, bundle_error=type(exc).__name__)
        raise
    path = bundle_path(request)
    partial = path.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(path)
    digest = hashlib.sha256(data).hexdigest()
    return _exported(
        request=request,
        digest=digest,
        name=path.name,
        traces=len(evidence),
        fields=sum(len(e.values) for e in evidence),
        released=len(revealed),
    )


@transaction.atomic(durable=True)
def _exported(
    *, request: LegalRequest, digest: str, name: str, traces: int, fields: int, released: int
) -> LegalRequest:
    event = ledger.append(
        event_type=codes.DSR_EXPORTED,
        payload={
            "request_id": str(request.id),
            "subjects": list(request.subject_refs),
            "bundle_sha256": digest,
            "traces": traces,
            "fields": fields,
            "released": released,
            "nothing_held": traces == 0,
        },
        actor_label=DSR_ACTOR,
    )
    _progress(
        request,
        bundle_state=DONE,
        bundle_sha256=digest,
        bundle_name=name,
        export_event=event,
    )
    return request


def revealable(request: LegalRequest) -> set[tuple[str, int, str, str]]:
    """The fields (subject, trace pk, location, path) whose values a bundle build reveals: the
    releases the ledger backs and, once a release approval counts, only those it covers."""
    backed = signed.releases(request)
    _approvals, cover = signed.covered(request)
    keys = None if cover is None else {scope.value_key(v) for v in cover}
    return {
        (r.value["subject"], r.trace_pk, r.value["location"], r.value["path"])
        for r in backed
        if keys is None or scope.value_key(r.value) in keys
    }


def _not_covered(
    request: LegalRequest, value: dict[str, Any], cover: list[dict[str, Any]], seqs: list[int]
) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.DSR_RELEASE_NOT_APPROVED,
        NOT_COVERED_MESSAGE.format(
            value=scope.value_label(value),
            count=len(cover),
            request=request.id,
            seqs=", ".join(str(s) for s in seqs),
        ),
    )


def bundle_bytes(*, request: LegalRequest) -> bytes:
    """The built bundle's bytes; the caller checks the release approval first."""
    path = bundle_path(request)
    if request.bundle_state != DONE or not path.exists():
        raise codes.GovernanceError(codes.DSR_STATE, NOT_BUILT_MESSAGE.format(request=request.id))
    return path.read_bytes()


def released_bundle(*, request: LegalRequest) -> bytes:
    """The bundle as it may be handed over: its release approved per the signed ledger, and
    every value it reveals among those the approval signed (else DSR_RELEASE_NOT_APPROVED
    naming the first that is not)."""
    services.require_approved(request=request, purpose=signing.DSR_RELEASE)
    found, cover = signed.covered(request)
    data = bundle_bytes(request=request)
    keys = {scope.value_key(v) for v in cover or []}
    for name, member in sorted(bundle.read_members(data).items()):
        if not name.endswith("/data.json") or not isinstance(member, dict):
            continue
        for entry in member.get("subject_values") or []:
            if not entry.get("released"):
                continue
            value = scope.release_value(
                subject=str(entry.get("subject_ref")),
                trace_id=str(member.get("trace_id")),
                file_sha256=str(member.get("file_sha256")).removeprefix("sha256:"),
                location=str(entry.get("location")),
                path=str(entry.get("path")),
            )
            if scope.value_key(value) not in keys:
                raise _not_covered(request, value, cover or [], found.seqs)
    return data


# --- an admin releases one field ----------------------------------------------------------------


@transaction.atomic(durable=True)
def field_release(
    *,
    request: LegalRequest,
    actor: Any,
    subject_ref: str,
    trace_pk: int,
    location: str,
    path: str,
    reason: str,
) -> DsrRelease:
    """Release one field's value into this request's bundle: one PII_REVEALED event naming
    the request (the value itself is never in the payload)."""
    ledger.lock()
    request = LegalRequest.objects.select_for_update().get(pk=request.pk)
    if request.is_closed:
        raise services._state_error(request, "release a field")
    reason = (reason or "").strip()
    if not reason:
        raise codes.GovernanceError(codes.DSR_INVALID, RELEASE_REASON_MESSAGE)
    if not subjects_port.privacy_installed():
        raise _privacy_error()
    field = f"{location} {path}"
    wanted = (subject_ref, int(trace_pk), location, path)
    hit = next(
        (h for h in subjects_port.find(list(request.subject_refs)) if _key(h) == wanted), None
    )
    if subject_ref not in request.subject_refs or hit is None:
        raise codes.GovernanceError(
            codes.DSR_INVALID,
            FIELD_UNKNOWN_MESSAGE.format(request=request.id, field=field, subject=subject_ref),
        )
    found, cover = signed.covered(request)
    value = scope.release_value(
        subject=subject_ref,
        trace_id=hit.trace_id,
        file_sha256=hit.file_sha256,
        location=location,
        path=path,
    )
    if cover is not None and scope.value_key(value) not in {scope.value_key(v) for v in cover}:
        raise _not_covered(request, value, cover, found.seqs)
    if DsrRelease.objects.filter(
        request=request, subject_ref=subject_ref, trace_pk=trace_pk, location=location, path=path
    ).exists():
        raise codes.GovernanceError(
            codes.DSR_STATE,
            RELEASED_TWICE_MESSAGE.format(field=field, subject=subject_ref, request=request.id),
        )
    event = ledger.append(
        event_type=codes.PII_REVEALED,
        payload={
            "trace_id": hit.trace_id,
            "fields": [field],
            "reason": reason,
            "context": f"legal request {request.id}",
            "request_id": str(request.id),
            "subject": subject_ref,
            "file_sha256": hit.file_sha256,
        },
        actor=actor,
    )
    return DsrRelease.objects.create(
        request=request,
        subject_ref=subject_ref,
        trace_pk=trace_pk,
        location=location,
        path=path,
        released_by=actor,
        event=event,
        created_at=event.created_at,
    )


# --- erasure ----------------------------------------------------------------------------------


def erasure_receipt(request: LegalRequest) -> dict[str, Any] | None:
    """The DSR_ERASED event's payload (the receipt), or None before the erasure."""
    if request.erasure_event_id is None:
        return None
    return GovernanceEvent.objects.get(seq=request.erasure_event_id).payload


def _first_receipt_seq(receipt_id: Any) -> int | None:
    for seq, payload in (
        GovernanceEvent.objects.filter(code=codes.code_of(codes.DSR_ERASED))
        .order_by("seq")
        .values_list("seq", "payload")
    ):
        if (payload.get("receipt") or {}).get("receipt") == receipt_id:
            return seq
    return None


def _drop_bundles(refs: list[str]) -> None:
    """Every stored bundle of a request naming one of these subjects is deleted (a bundle may
    hold released values); the rows say so and a new build shows the fields as erased."""
    for other in LegalRequest.objects.exclude(bundle_name=""):
        if set(other.subject_refs) & set(refs):
            path = bundle_path(other)
            transaction.on_commit(functools.partial(path.unlink, missing_ok=True))
            LegalRequest.objects.filter(pk=other.pk).update(
                bundle_state="", bundle_name="", bundle_sha256="", bundle_done=0
            )


@transaction.atomic(durable=True)
def legal_request_erase(*, request: LegalRequest, actor: Any) -> GovernanceEvent:
    """Execute an approved erasure: shred the subjects' keys and append the DSR_ERASED receipt
    (refs, traces, fields, keys destroyed, the approvals' seqs; no personal data). Once per
    request: a second call returns the same receipt; a subject erased by an earlier request is
    not destroyed twice (the receipt names the first)."""
    ledger.lock()
    request = LegalRequest.objects.select_for_update().get(pk=request.pk)
    if request.erasure_event_id is not None:
        return GovernanceEvent.objects.get(seq=request.erasure_event_id)
    if request.is_closed:
        raise services._state_error(request, "erase")
    if not request.wants_erasure:
        raise codes.GovernanceError(
            codes.DSR_INVALID, NO_ERASURE_MESSAGE.format(request=request.id)
        )
    approved = services.require_approved(request=request, purpose=signing.DSR_ERASURE)
    if not subjects_port.privacy_installed():
        raise _privacy_error()
    filed = signed.filing(request)
    refs = list(filed.terms.get("subjects") or []) if filed is not None else []
    plan = scope.signed_plan(subjects_port.erasure_plan(refs))
    for approval in approved.counted:
        changes = [] if approval.plan is None else scope.plan_changes(approval.plan, plan)
        if changes:
            raise codes.GovernanceError(
                codes.DSR_PLAN_CHANGED,
                PLAN_CHANGED_MESSAGE.format(
                    request=request.id, seq=approval.seq, changes="; ".join(changes)
                ),
            )
    outcome = subjects_port.shred(refs)
    receipt = outcome.as_dict()
    event = ledger.append(
        event_type=codes.DSR_ERASED,
        payload={
            "request_id": str(request.id),
            "subjects": refs,
            "approval_seqs": approved.seqs,
            "first_time": bool(outcome.first_time),
            "first_receipt_seq": None
            if outcome.first_time
            else _first_receipt_seq(receipt.get("receipt")),
            "receipt": receipt,
        },
        actor=actor,
        idempotency_key=f"dsr-erased:{request.id}",
    )
    request.erasure_event = event
    request.save(update_fields=["erasure_event"])
    _drop_bundles(refs)
    return event
