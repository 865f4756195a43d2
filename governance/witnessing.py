"""Witnesses of the ledger (docs/transparency.md): every new checkpoint is pushed to each
C2SP tlog-witness in ``GOVERNANCE_WITNESSES`` (``POST <url>/add-checkpoint``, ``old <size>``
and the consistency proof from the size that witness last cosigned), each returned
cosignature/v1 line is verified with the witness's vkey before it is stored
(:class:`~governance.models.WitnessCosignature`), and a witness refusing the ledger's history
(422 inconsistent, or 409 holding a size larger than the tree) is recorded once per
(witness, size) as a ``SECURITY_INCIDENT`` with a :class:`~governance.models.WitnessAlert`
shown to admins and council until an admin acknowledges it.

Pushes run in the background (``governance.tasks.witness_push`` through
``replay.background.enqueue``), on the periodic schedule (``witness-push``), from the ledger
page's button and from ``manage.py governance witness-push``.
"""

from __future__ import annotations

import base64
import contextvars
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from governance import conf, transparency
from governance.models import TreeCheckpoint, WitnessAlert, WitnessCosignature
from tlog import note as notes

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 10
MAX_RESPONSE = 64 * 1024
INCIDENT_REASON = "witness {name} refused the ledger's history: {why}"
WHY_AHEAD = "it holds a checkpoint of size {held}, the ledger's tree has {size} leaves"
WHY_INCONSISTENT = "the checkpoint of size {size} does not extend the one it cosigned ({body})"


@dataclass(frozen=True)
class Outcome:
    witness: str
    outcome: str  # cosigned | refused | incident | unreachable | invalid
    size: int
    detail: str = ""


@dataclass(frozen=True)
class Configured:
    url: str
    verifier: notes.Verifier

    @property
    def name(self) -> str:
        return self.verifier.name

    @property
    def key_id(self) -> str:
        return f"{self.verifier.key_id:08x}"


def configured() -> list[Configured]:
    """The witnesses of ``GOVERNANCE_WITNESSES`` with their cosignature verifiers."""
    out = []
    for entry in conf.witnesses():
        verifier = notes.parse_verifier(entry["vkey"])
        if verifier.alg != notes.ALG_COSIGNATURE_V1:
            verifier = verifier.as_cosigner()
        out.append(Configured(entry["url"], verifier))
    return out


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url}")
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
        url + "/add-checkpoint", data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return response.status, response.read(MAX_RESPONSE)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_RESPONSE)


def _text_of(note: str) -> bytes:
    raw = note.encode("utf-8")
    return raw[: raw.rfind(b"\n\n") + 1]


def last_size(witness: Configured) -> int:
    found = (
        WitnessCosignature.objects.filter(witness=witness.name, key_id=witness.key_id)
        .order_by("-tree_size")
        .values_list("tree_size", flat=True)
        .first()
    )
    return int(found or 0)


def _request(cp: TreeCheckpoint, old: int) -> bytes:
    proof = transparency.consistency(old, cp.size).proof if 0 < old < cp.size else []
    lines = "".join(base64.b64encode(h).decode() + "\n" for h in proof)
    return f"old {old}\n{lines}\n{cp.note}".encode()


def _store(witness: Configured, cp: TreeCheckpoint, body: bytes) -> Outcome:
    text = _text_of(cp.note)
    try:
        opened = notes.open_note(text + b"\n" + body, [witness.verifier])
    except (notes.NoteError, UnicodeDecodeError) as exc:
        return Outcome(witness.name, "invalid", cp.size, f"cosignature refused: {exc}")
    sig = opened.sigs[0]
    WitnessCosignature.objects.create(
        witness=witness.name,
        key_id=witness.key_id,
        tree_size=cp.size,
        root_hash=bytes(cp.root_hash),
        timestamp=notes.cosignature_timestamp(sig),
        line=sig.line.rstrip("\n"),
        created_at=timezone.now(),
    )
    return Outcome(witness.name, "cosigned", cp.size)


def _incident(witness: Configured, size: int, status: int, why: str) -> Outcome:
    """Record the refusal once per (witness, size): a SECURITY_INCIDENT naming no target
    (nothing is halted) and the alert admins and council see."""
    from governance.services.halts import security_incident_record

    if WitnessAlert.objects.filter(witness=witness.name, size=size).exists():
        return Outcome(witness.name, "incident", size, why)
    reason = INCIDENT_REASON.format(name=witness.name, why=why)
    incident = security_incident_record(actor=None, targets=[], reason=reason)
    try:
        with transaction.atomic():
            WitnessAlert.objects.create(
                witness=witness.name,
                size=size,
                status=status,
                reason=reason,
                incident_seq=incident.seq,
                created_at=timezone.now(),
            )
    except IntegrityError:  # another push recorded it at the same moment
        pass
    log.error("witness incident", extra={"witness": witness.name, "size": size, "why": why})
    return Outcome(witness.name, "incident", size, why)


def push(witness: Configured, cp: TreeCheckpoint) -> Outcome:
    """Push ``cp`` to one witness; a 409 names the size it holds: retried once from there."""
    old = last_size(witness)
    if old > cp.size:  # the tree shrank under what it cosigned: let the witness say so
        old = 0
    for _attempt in range(3):
        try:
            status, body = _post(witness.url, _request(cp, old))
        except (OSError, ValueError) as exc:
            return Outcome(witness.name, "unreachable", cp.size, str(exc))
        if status == 200:
            return _store(witness, cp, body)
        if status == 409:
            try:
                held = int(body.decode("ascii").strip())
            except (UnicodeDecodeError, ValueError):
                return Outcome(witness.name, "refused", cp.size, f"409 {body[:200]!r}")
            if held > cp.size:
                why = WHY_AHEAD.format(held=held, size=cp.size)
                return _incident(witness, held, status, why)
            if held == old:
                break
            old = held
            continue
        if status == 422:
            detail = body[:200].decode("utf-8", "replace").strip()
            why = WHY_INCONSISTENT.format(size=cp.size, body=detail)
            return _incident(witness, cp.size, status, why)
        detail = body[:200].decode("utf-8", "replace").strip()
        return Outcome(witness.name, "refused", cp.size, f"{status} {detail}")
    return Outcome(witness.name, "refused", cp.size, f"409 again from size {old}")


_pushing: contextvars.ContextVar[bool] = contextvars.ContextVar("witness_pushing", default=False)


def push_all() -> list[Outcome]:
    """Sign (or reuse) the checkpoint of the whole tree and push it to every witness."""
    witnesses = configured()
    if not witnesses:
        return []
    token = _pushing.set(True)  # the checkpoint signed here is pushed here, not queued again
    try:
        cp = transparency.checkpoint()
    finally:
        _pushing.reset(token)
    return [push(w, cp) for w in witnesses]


def enqueue_push() -> None:
    """Queue a push through the project's one background runner."""
    from governance.tasks import witness_push
    from replay.background import enqueue

    enqueue(witness_push)


def on_checkpoint_stored(
    sender: Any, instance: TreeCheckpoint, created: bool = False, raw: bool = False, **_: Any
) -> None:
    """``post_save`` of :class:`TreeCheckpoint`: each newly signed checkpoint (a page, the API,
    an export or a push asked for one the tree had grown to) is pushed to the witnesses in the
    background when its transaction commits, not only on the ``witness-push`` schedule. The
    push sends the checkpoint of the whole tree (one a push signs itself is not queued again)."""
    if created and not raw and not _pushing.get() and conf.witnesses():
        enqueue_push()


# --- what the pages and the API show -----------------------------------------------------------


def latest_per_witness() -> list[dict[str, Any]]:
    """Each configured witness with the largest size it cosigned (None if none)."""
    out = []
    for w in configured():
        cos = (
            WitnessCosignature.objects.filter(witness=w.name, key_id=w.key_id)
            .order_by("-tree_size", "-id")
            .first()
        )
        out.append(
            {
                "name": w.name,
                "url": w.url,
                "key_id": w.key_id,
                "size": cos.tree_size if cos else None,
                "timestamp": cos.timestamp if cos else None,
            }
        )
    return out


def witnessed_size(latest: list[dict[str, Any]] | None = None) -> int | None:
    """The largest size at least ``GOVERNANCE_WITNESS_QUORUM`` witnesses cosigned (a
    cosignature of a size vouches for every size before it): None below the quorum."""
    rows = latest_per_witness() if latest is None else latest
    sizes = sorted((r["size"] for r in rows if r["size"] is not None), reverse=True)
    k = conf.witness_quorum()
    return sizes[k - 1] if len(sizes) >= k else None


def summary() -> dict[str, Any]:
    latest = latest_per_witness()
    return {
        "quorum": conf.witness_quorum(),
        "configured": len(latest),
        "witnessed_size": witnessed_size(latest),
        "witnesses": latest,
    }


def cosignatures(size: int, root_hash: bytes) -> list[WitnessCosignature]:
    """The stored cosignatures of exactly this checkpoint (size and root)."""
    return [
        c
        for c in WitnessCosignature.objects.filter(tree_size=size).order_by("witness", "id")
        if bytes(c.root_hash) == bytes(root_hash)
    ]


def cosigned_note(cp: TreeCheckpoint) -> str:
    """The checkpoint note with each witness's cosignature as an extra signature line."""
    lines = []
    seen = set()
    for c in cosignatures(cp.size, bytes(cp.root_hash)):
        if (c.witness, c.key_id) not in seen:
            seen.add((c.witness, c.key_id))
            lines.append(c.line + "\n")
    return cp.note + "".join(lines)


def quorum_checkpoint(min_size: int) -> TreeCheckpoint | None:
    """The largest stored checkpoint of at least ``min_size`` leaves that a quorum
    (``GOVERNANCE_WITNESS_QUORUM``) of the configured witnesses cosigned exactly (same size and
    root), or None: what an export cites so that an auditor can ask for that quorum offline."""
    witnesses = {(w.name, w.key_id) for w in configured()}
    if not witnesses:
        return None
    k = conf.witness_quorum()
    signers: dict[tuple[int, bytes], set[tuple[str, str]]] = {}
    rows = WitnessCosignature.objects.filter(tree_size__gte=max(min_size, 1)).values_list(
        "witness", "key_id", "tree_size", "root_hash"
    )
    for name, key_id, size, root_hash in rows:
        if (name, key_id) in witnesses:
            signers.setdefault((size, bytes(root_hash)), set()).add((name, key_id))
    for size, root_hash in sorted(signers, reverse=True):
        if len(signers[(size, root_hash)]) < k:
            continue
        cp = transparency.checkpoint(size)
        if bytes(cp.root_hash) == root_hash:
            return cp
    return None


def open_alerts() -> list[WitnessAlert]:
    return list(WitnessAlert.objects.filter(acknowledged_at__isnull=True).order_by("-id")[:20])


def alert_acknowledge(*, alert_id: int, by: str) -> int:
    """Mark an alert (or every open one when ``alert_id`` is 0) acknowledged; the count."""
    qs = WitnessAlert.objects.filter(acknowledged_at__isnull=True)
    if alert_id:
        qs = qs.filter(id=alert_id)
    return qs.update(acknowledged_at=timezone.now(), acknowledged_by=by)
