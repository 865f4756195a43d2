"""``manage.py dsr <action>``: legal requests (Data Subject Requests) from the shell, through
the same service as the pages and the API (``dsr.services``).

Exit codes: 0 done, 1 refused (``CODE: message`` on stderr), 2 usage (unknown user, request).

Acting for a person (``--user``): the roles matrix decides with the roles the ledger records
for them, as for ``manage.py governance``. Identifiers are read from ``--identifier`` or, to
keep them out of the shell's history and the process list, one a line from
``--identifiers-file`` (``-`` for standard input); they become opaque subject refs at once.

Offline four-eyes approval: ``dsr payload ID --purpose erasure > p.json``, then on the
approver's machine ``governance sign --key KEY --payload p.json --out signed.json``, then
``dsr approve ID signed.json --purpose erasure --user APPROVER``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.canonical import jcs
from core.ledger import codes, roles, signing
from dsr import services
from dsr.models import LegalRequest
from governance.cli import ActionCommand, is_uuid, user_named

REQUEST_UNKNOWN_MESSAGE = "no legal request {request}"


def _summary(legal: LegalRequest) -> dict[str, Any]:
    return {
        "id": str(legal.id),
        "subjects": list(legal.subject_refs),
        "kind": legal.kind,
        "legal_basis": legal.legal_basis,
        "due_date": legal.due_date.isoformat(),
        "days_left": legal.days_left(),
        "state": legal.state,
        "refusal_reason": legal.refusal_reason,
        "requested_by": legal.requested_by.get_username(),
        "identity": (
            {
                "method": legal.identity_method,
                "verified_by": legal.identity_verified_by.get_username(),
                "seq": legal.identity_event_id,
            }
            if legal.identity_verified_by is not None
            else None
        ),
        "approvals": {
            p: {
                "have": s.have,
                "needed": s.needed,
                "role": s.role,
                "approvers": list(s.approvers),
            }
            for p in services.purposes_of(legal)
            for s in [services.approval_status(request=legal, purpose=p)]
        },
    }


class Command(ActionCommand):
    help = (
        "Legal requests: open, list, show, verify-identity, start, refuse, fulfil, payload, "
        "approve, bundle, export, release, erase, verify-bundle."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)

        p = sub.add_parser("open", help="open a legal request")
        p.add_argument("--user", required=True)
        p.add_argument("--identifier", action="append", default=[], dest="identifiers")
        p.add_argument("--identifiers-file", default=None, help="one a line; - for stdin")
        p.add_argument("--kind", required=True, choices=LegalRequest.Kind.values)
        p.add_argument("--basis", required=True, help="the legal basis")
        p.add_argument("--due", default=None, help="YYYY-MM-DD (default: one month from today)")

        p = sub.add_parser("list", help="every legal request, soonest due first")
        p.add_argument("--state", choices=LegalRequest.State.values, default=None)

        p = sub.add_parser("show", help="one legal request as JSON")
        p.add_argument("request")

        p = sub.add_parser("verify-identity", help="record how the identity was verified")
        p.add_argument("request")
        p.add_argument("--user", required=True)
        p.add_argument("--method", required=True)

        for name, text in (
            ("start", "open -> in progress"),
            ("fulfil", "in progress -> fulfilled"),
        ):
            p = sub.add_parser(name, help=text)
            p.add_argument("request")
            p.add_argument("--user", required=True)

        p = sub.add_parser("refuse", help="refuse a request, with a reason")
        p.add_argument("request")
        p.add_argument("--user", required=True)
        p.add_argument("--reason", required=True)

        p = sub.add_parser("payload", help="the exact payload an approval signs (JSON)")
        p.add_argument("request")
        p.add_argument("--purpose", required=True, choices=signing.DSR_PURPOSES)
        p.add_argument("--reason", default="")
        p.add_argument("--out", default=None)

        p = sub.add_parser("bundle", help="build the evidence bundle now (audit replays)")
        p.add_argument("request")
        p.add_argument("--user", required=True)

        p = sub.add_parser("export", help="write the built bundle (and its PDF), once released")
        p.add_argument("request")
        p.add_argument("--user", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--pdf", default=None, help="also write the PDF summary here")

        p = sub.add_parser("release", help="an admin releases one field into the bundle")
        p.add_argument("request")
        p.add_argument("--user", required=True)
        p.add_argument("--subject", required=True, help="the subject ref")
        p.add_argument("--trace-pk", required=True, type=int)
        p.add_argument("--location", required=True)
        p.add_argument("--path", required=True)
        p.add_argument("--reason", required=True)

        p = sub.add_parser("erase", help="execute the approved erasure; prints the receipt")
        p.add_argument("request")
        p.add_argument("--user", required=True)

        p = sub.add_parser("verify-bundle", help="check a bundle offline; names the first failure")
        p.add_argument("file")
        p.add_argument("--trust-key", action="append", default=[])
        p.add_argument("--checkpoint", default=None)
        p.add_argument("--vkey", action="append", default=[])
        p.add_argument("--older-checkpoint", default=None, dest="older_checkpoint")
        p.add_argument("--consistency", default=None)
        p.add_argument("--witness", action="append", default=[], metavar="VKEY")
        p.add_argument("--quorum", type=int, default=None, metavar="K")
        p.add_argument("--json", action="store_true", dest="as_json")

        p = sub.add_parser("approve", help="record a signed approval document for a user")
        p.add_argument("request")
        p.add_argument("file", help="the signed document from `governance sign`, or -")
        p.add_argument("--purpose", required=True, choices=signing.DSR_PURPOSES)
        p.add_argument("--user", required=True)

    # --- helpers -------------------------------------------------------------------------------

    def _request(self, ref: str) -> LegalRequest:
        found = (
            LegalRequest.objects.select_related("requested_by", "identity_verified_by")
            .filter(id=ref)
            .first()
            if is_uuid(ref)
            else None
        )
        if found is None:
            raise CommandError(REQUEST_UNKNOWN_MESSAGE.format(request=ref), returncode=2)
        return found

    def _read(self, name: str) -> str:
        return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")

    def _show(self, legal: LegalRequest) -> None:
        self.stdout.write(json.dumps(_summary(legal), indent=2, sort_keys=True))

    # --- actions -------------------------------------------------------------------------------

    def do_open(
        self,
        *,
        user: str,
        identifiers: list[str],
        identifiers_file: str | None,
        kind: str,
        basis: str,
        due: str | None,
        **_: Any,
    ) -> None:
        actor = user_named(user, action=roles.DSR)
        wanted = list(identifiers)
        if identifiers_file:
            wanted += self._read(identifiers_file).splitlines()
        legal = services.legal_request_open(
            actor=actor, identifiers=wanted, kind=kind, legal_basis=basis, due_date=due
        )
        self.stdout.write(
            f"legal request {legal.id} opened (seq {legal.opened_event_id}); "
            f"{len(legal.subject_refs)} subject(s): {', '.join(legal.subject_refs)}; "
            f"due {legal.due_date.isoformat()}"
        )

    def do_list(self, *, state: str | None, **_: Any) -> None:
        found = LegalRequest.objects.select_related("requested_by")
        if state:
            found = found.filter(state=state)
        for legal in found:
            self.stdout.write(
                f"{legal.id}  {legal.kind:<8} {legal.state:<12} due {legal.due_date} "
                f"({legal.days_left()} day(s) left)  by {legal.requested_by.get_username()}"
            )

    def do_show(self, *, request: str, **_: Any) -> None:
        self._show(self._request(request))

    def do_verify_identity(self, *, request: str, user: str, method: str, **_: Any) -> None:
        actor = user_named(user, action=roles.DSR)
        legal = services.legal_request_identity_verify(
            request=self._request(request), actor=actor, method=method
        )
        self.stdout.write(f"identity verified (seq {legal.identity_event_id}): {method}")

    def do_start(self, *, request: str, user: str, **_: Any) -> None:
        actor = user_named(user, action=roles.DSR)
        legal = services.legal_request_start(request=self._request(request), actor=actor)
        self.stdout.write(f"legal request {legal.id}: {legal.state}")

    def do_fulfil(self, *, request: str, user: str, **_: Any) -> None:
        actor = user_named(user, action=roles.DSR)
        legal = services.legal_request_fulfil(request=self._request(request), actor=actor)
        self.stdout.write(f"legal request {legal.id}: {legal.state}")

    def do_refuse(self, *, request: str, user: str, reason: str, **_: Any) -> None:
        actor = user_named(user, action=roles.DSR)
        legal = services.legal_request_refuse(
            request=self._request(request), actor=actor, reason=reason
        )
        self.stdout.write(f"legal request {legal.id}: {legal.state} ({legal.refusal_reason})")

    def do_payload(
        self, *, request: str, purpose: str, reason: str, out: str | None, **_: Any
    ) -> None:
        payload = services.approval_payload_for(
            request=self._request(request), purpose=purpose, reason=reason
        )
        text = jcs(payload).decode()
        if out:
            Path(out).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text)

    def do_approve(self, *, request: str, file: str, purpose: str, user: str, **_: Any) -> None:
        approver = user_named(user, action=roles.DSR_APPROVE)
        legal = self._request(request)
        try:
            document = json.loads(self._read(file))
        except ValueError as exc:
            raise codes.GovernanceError(
                codes.APPROVAL_MALFORMED, f"the signed approval document is not JSON: {exc}"
            ) from None
        approval = services.legal_request_approve(
            request=legal, purpose=purpose, approver=approver, document=document
        )
        self.stdout.write(
            f"{purpose} of legal request {legal.id} signed by {user} (seq {approval.event_id})"
        )

    def do_bundle(self, *, request: str, user: str, **_: Any) -> None:
        from dsr import access

        actor = user_named(user, action=roles.DSR)
        legal = access.bundle_request(request=self._request(request), actor=actor, enqueue=False)
        legal = access.bundle_build(request_id=legal.id)
        self.stdout.write(
            f"bundle of legal request {legal.id}: {legal.bundle_total} trace(s) replayed in "
            f"audit mode, sha256:{legal.bundle_sha256} (seq {legal.export_event_id})"
        )

    def do_export(self, *, request: str, user: str, out: str, pdf: str | None, **_: Any) -> None:
        from dsr import access

        user_named(user, action=roles.DSR)
        legal = self._request(request)
        data = access.released_bundle(request=legal)
        Path(out).write_bytes(data)
        if pdf:
            from core import bundle
            from core.bundle import pdf as pdf_summary

            Path(pdf).write_bytes(pdf_summary.render_summary(bundle.pdf_summary(data)))
        self.stdout.write(f"wrote {out} (sha256:{legal.bundle_sha256})")

    def do_release(
        self,
        *,
        request: str,
        user: str,
        subject: str,
        trace_pk: int,
        location: str,
        path: str,
        reason: str,
        **_: Any,
    ) -> None:
        from dsr import access

        actor = user_named(user, action=roles.PII_REVEAL)
        release = access.field_release(
            request=self._request(request),
            actor=actor,
            subject_ref=subject,
            trace_pk=trace_pk,
            location=location,
            path=path,
            reason=reason,
        )
        self.stdout.write(f"released {location} {path} (PII_REVEALED seq {release.event_id})")

    def do_erase(self, *, request: str, user: str, **_: Any) -> None:
        from dsr import access

        actor = user_named(user, action=roles.DSR)
        event = access.legal_request_erase(request=self._request(request), actor=actor)
        self.stdout.write(json.dumps({"seq": event.seq, **event.payload}, indent=2, sort_keys=True))

    def do_verify_bundle(
        self,
        *,
        file: str,
        trust_key: list[str],
        checkpoint: str | None,
        as_json: bool,
        vkey: list[str] | None = None,
        older_checkpoint: str | None = None,
        consistency: str | None = None,
        witness: list[str] | None = None,
        quorum: int | None = None,
        **_: Any,
    ) -> None:
        from core.bundle.cli import verify_bundle_file

        status = verify_bundle_file(
            file,
            self.stdout,
            trust_keys=trust_key,
            checkpoint_path=checkpoint,
            as_json=as_json,
            vkeys=vkey or (),
            older_path=older_checkpoint,
            consistency_path=consistency,
            err=self.stderr,
            witnesses=witness or (),
            quorum=quorum,
        )
        if status:
            sys.exit(status)
