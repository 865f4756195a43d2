"""``manage.py governance <action>``: verify the ledger, checkpoints, keys, offline signing,
roles.

Exit codes: 0 done / verified, 1 verification failed or the action was refused, 2 usage.

Offline signing: ``keygen`` writes a member's private key to a file (mode 0600) and prints
only the public key; ``sign`` reads that file and writes the signed approval JSON document
(``{"payload", "key_id", "alg", "signature"}``) that the console and API accept. ``sign`` never
sends anything anywhere and never records anything: the private key stays on the member's
machine. It builds the payload from the database (``--request``/``--halt``/``--production``,
when run where
the database is reachable) or from the payload JSON the console page shows (``--payload``),
so it works on an offline machine too. On the server, ``record-approval FILE --user U``
records such a document for user U through the same service as the API (the signature is
still checked against U's registered, confirmed key).

Acting for a person (``--user``, ``--admin``): the roles matrix (``core.ledger.roles``) decides,
with the roles the ledger records for that person, exactly as for the pages and the API; a
refusal prints ``CODE: message`` (``REQUEST_ROLE``, ``APPROVAL_ROLE``, ``ROLE_SELF`` ...) on
stderr and exits 1. The shell has no second factor, and needs none: access to the server's
shell is a stronger credential than a browser session, and what counts is that the ledger
records the role. Without a person (``rotate-key``, ``install-roles``) the command acts as the
system and the ledger names it so (``system:cli``, ``system:installation``).

Roles: ``install-roles --admin A --council C ...`` records the installation's first admins and
council members (once: the ledger's first role events); after that ``set-roles NAME ROLE...
--user ADMIN`` changes someone else's roles (a grant of admin or council waits for a council
quorum, signed with ``sign --role-grant ID`` and recorded with ``record-approval``).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from core.errors import ReplayError
from core.ledger import roles, signing
from governance import keystore, membership, selectors, services, transparency
from governance.cli import ActionCommand, is_uuid, user_named
from governance.models import (
    ForceContinueRequest,
    Halt,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
)
from replay.models import ReplayRun
from replay.selectors import trace_to_replay

REQUEST_UNKNOWN_MESSAGE = "no force-continue request {request}"
PRODUCTION_UNKNOWN_MESSAGE = "no production replay request {request}"
TRACE_UNKNOWN_MESSAGE = "no stored trace {trace}"
RUN_UNKNOWN_MESSAGE = "no replay run {run}"
HALT_UNKNOWN_MESSAGE = "no halt {halt}"
KEY_UNKNOWN_MESSAGE = "no member key {key_id}"
ROLE_GRANT_UNKNOWN_MESSAGE = "no role grant request {request}"


class Command(ActionCommand):
    help = "The governance ledger: verify, checkpoints, keys and offline signing."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, parser_class=CommandParser)

        p = sub.add_parser(
            "verify",
            help="verify the whole ledger, then the tables against it; exit 1 naming what broke",
        )
        p.add_argument("--json", action="store_true", dest="as_json")
        p.add_argument("--workers", type=int, default=None)

        p = sub.add_parser("checkpoint", help="print (or --out) a signed checkpoint of the head")
        p.add_argument("--out", default=None)
        p.add_argument("--workers", type=int, default=None)

        sub.add_parser("tlog-vkey", help="print the verifier keys of the ledger's checkpoints")
        sub.add_parser(
            "witness-push", help="push the newest checkpoint to every GOVERNANCE_WITNESSES witness"
        )

        p = sub.add_parser(
            "tlog-checkpoint", help="print (or --out) the C2SP signed checkpoint of the tree"
        )
        p.add_argument("--size", type=int, default=None, help="a past tree size (default: all)")
        p.add_argument("--out", default=None)
        p.add_argument(
            "--vouch-all",
            action="store_true",
            help="check every server signature no checkpoint vouches for yet, however many"
            " (a large ledger's first vouching checkpoint; docs/transparency.md)",
        )

        p = sub.add_parser(
            "proof", help="an inclusion or consistency proof document (python -m tlog checks it)"
        )
        p.add_argument("kind", choices=["inclusion", "consistency"])
        p.add_argument("--seq", type=int, default=None, help="inclusion: the event")
        p.add_argument("--old", type=int, default=None, help="consistency: the older size")
        p.add_argument("--size", type=int, default=None, help="the checkpoint's size (newest)")
        p.add_argument("--out", default=None)

        p = sub.add_parser("check-checkpoint", help="prove the ledger extends a checkpoint")
        p.add_argument("file")
        p.add_argument("--json", action="store_true", dest="as_json")
        p.add_argument("--workers", type=int, default=None)

        p = sub.add_parser("keygen", help="write a new member Ed25519 private key to a file")
        p.add_argument("--out", required=True)
        p.add_argument("--force", action="store_true", help="overwrite an existing file")

        p = sub.add_parser("sign", help="sign an approval with a private key file (offline)")
        p.add_argument("--key", required=True, help="the private key file from keygen")
        what = p.add_mutually_exclusive_group(required=True)
        what.add_argument("--request", help="a force-continue request id (reads the database)")
        what.add_argument("--halt", type=int, help="a halt's seq, to sign its clearing")
        what.add_argument("--production", help="a production replay request id (reads the db)")
        what.add_argument("--role-grant", help="a role grant request id (reads the database)")
        what.add_argument("--payload", help="a payload JSON file as the console shows it")
        p.add_argument("--deny", action="store_true", help="sign a denial")
        p.add_argument("--reason", default=None)
        p.add_argument("--role", choices=signing.SIGNING_ROLES, default=None)
        p.add_argument("--out", default=None, help="write here instead of stdout")

        p = sub.add_parser("record-approval", help="record a signed approval for a user")
        p.add_argument("file")
        p.add_argument("--user", required=True)

        p = sub.add_parser("request-continue", help="file a force-continue request")
        p.add_argument("run")
        p.add_argument("--user", required=True)
        p.add_argument("--reason", required=True)
        p.add_argument("--hours", type=int, default=None)

        p = sub.add_parser(
            "request-production", help="ask the council to approve a production replay"
        )
        p.add_argument("trace", help="a stored trace's sha256 or trace id (its newest copy)")
        p.add_argument("--user", required=True)
        p.add_argument("--reason", required=True)
        p.add_argument("--hours", type=int, default=None)

        p = sub.add_parser("register-key", help="register a member's public key")
        p.add_argument("--user", required=True)
        p.add_argument("--public-key", required=True, help="PEM/hex/base64 file, or keygen's")
        p.add_argument("--label", default="")

        p = sub.add_parser("confirm-key", help="an admin confirms a member key")
        p.add_argument("key_id")
        p.add_argument("--admin", required=True)

        p = sub.add_parser("revoke-key", help="revoke a member key (owner or admin)")
        p.add_argument("key_id")
        p.add_argument("--user", required=True)
        p.add_argument("--reason", required=True)

        p = sub.add_parser("rotate-key", help="rotate the server signing key")
        p.add_argument("--json", action="store_true", dest="as_json")

        p = sub.add_parser("revoke-server-key", help="revoke a retired server signing key")
        p.add_argument("key_id")
        p.add_argument("--reason", required=True)

        sub.add_parser("halts", help="list active halts")

        p = sub.add_parser(
            "incident", help="declare a security incident (an admin): halts its target"
        )
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument(
            "--trace", help="a trace id (every stored copy) or a stored file's sha256"
        )
        target.add_argument("--snapshot", help="a snapshot id (every trace using it)")
        p.add_argument("--reason", required=True)
        p.add_argument("--user", required=True, help="the admin declaring it")

        p = sub.add_parser(
            "install-roles",
            help="record the installation's first admins and council members (once)",
        )
        p.add_argument("--admin", action="append", default=[], metavar="NAME")
        p.add_argument("--council", action="append", default=[], metavar="NAME")
        p.add_argument(
            "--from-groups",
            action="store_true",
            help="an upgrade: record every active user's role groups as they are now",
        )

        p = sub.add_parser("set-roles", help="an admin sets someone else's roles")
        p.add_argument("username")
        p.add_argument("roles", nargs="*", help="the roles the person should hold (none: revoke)")
        p.add_argument("--user", required=True, help="the admin who changes them")
        p.add_argument("--reason", default="")

    # --- helpers -------------------------------------------------------------------------------

    def _production(self, request_id: str) -> ProductionReplayRequest:
        found = (
            ProductionReplayRequest.objects.select_related("trace__blob", "requested_by")
            .filter(id=request_id)
            .first()
            if is_uuid(request_id)
            else None
        )
        if found is None:
            raise CommandError(PRODUCTION_UNKNOWN_MESSAGE.format(request=request_id), returncode=2)
        return found

    def _role_grant(self, request_id: str) -> RoleGrantRequest:
        found = (
            RoleGrantRequest.objects.select_related("user", "requested_by")
            .filter(id=request_id)
            .first()
            if is_uuid(request_id)
            else None
        )
        if found is None:
            raise CommandError(ROLE_GRANT_UNKNOWN_MESSAGE.format(request=request_id), returncode=2)
        return found

    def _read_json(self, path: str) -> Any:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"{path}: {exc}", returncode=2) from None

    def _write(self, text: str, out: str | None) -> None:
        if out:
            Path(out).write_text(text + "\n", encoding="utf-8")
        else:
            self.stdout.write(text)

    # --- actions -------------------------------------------------------------------------------

    def do_verify(self, *, as_json: bool, workers: int | None, **_: Any) -> None:
        result = selectors.ledger_verify(workers=workers)
        if as_json:
            self.stdout.write(json.dumps(result.as_dict()))
        elif result.ok:
            self.stdout.write(f"ok: {result.size} events verify; head {result.head_hash}")
        else:
            b = result.broken
            if b is not None:
                self.stdout.write(f"BROKEN at seq {b.seq} ({b.code}): {b.reason}")
                if b.expected is not None or b.observed is not None:
                    self.stdout.write(f"  expected: {b.expected}\n  observed: {b.observed}")
            else:
                self.stdout.write(
                    f"the chain verifies ({result.size} events), but "
                    f"{len(result.mismatches)} table row(s) disagree with it:"
                )
            for mismatch in result.mismatches:
                self.stdout.write(f"{mismatch.code}: {mismatch.message}")
        if not result.ok:
            sys.exit(1)

    def do_checkpoint(self, *, out: str | None, workers: int | None, **_: Any) -> None:
        document = selectors.checkpoint_export(workers=workers)
        self._write(json.dumps(document, indent=2, sort_keys=True), out)

    def do_tlog_vkey(self, **_: Any) -> None:
        for vkey in transparency.verifier_keys():
            self.stdout.write(vkey)

    def do_witness_push(self, **_: Any) -> None:
        from governance import witnessing

        outcomes = witnessing.push_all()
        if not outcomes:
            raise CommandError("no witness configured (GOVERNANCE_WITNESSES)")
        for o in outcomes:
            self.stdout.write(
                f"{o.witness}: {o.outcome} at size {o.size}"
                + (f" ({o.detail})" if o.detail else "")
            )

    def do_tlog_checkpoint(
        self, *, size: int | None, out: str | None, vouch_all: bool = False, **_: Any
    ) -> None:
        from governance import witnessing

        limit = None if vouch_all else transparency.VOUCH_MAX_NEW
        note = witnessing.cosigned_note(transparency.checkpoint(size, vouch_limit=limit))
        if out:
            Path(out).write_text(note, encoding="utf-8")
        else:
            self.stdout.write(note, ending="")

    def do_proof(
        self,
        *,
        kind: str,
        seq: int | None,
        old: int | None,
        size: int | None,
        out: str | None,
        **_: Any,
    ) -> None:
        needed = "--seq" if kind == "inclusion" else "--old"
        if (seq if kind == "inclusion" else old) is None:
            raise CommandError(f"proof {kind} needs {needed}", returncode=2)
        if seq is not None and kind == "inclusion":
            document = transparency.inclusion_document(seq, size)
        elif old is not None:
            document = transparency.consistency_document(old, size)
        self._write(json.dumps(document, indent=2, sort_keys=True), out)

    def do_check_checkpoint(
        self, *, file: str, as_json: bool, workers: int | None, **_: Any
    ) -> None:
        verdict = selectors.checkpoint_check(document=self._read_json(file), workers=workers)
        if as_json:
            self.stdout.write(json.dumps(verdict.as_dict()))
        else:
            self.stdout.write(
                ("ok: " if verdict.ok else f"FAILED ({verdict.code}): ") + verdict.message
            )
        if not verdict.ok:
            sys.exit(1)

    def do_keygen(self, *, out: str, force: bool, **_: Any) -> None:
        path = Path(out)
        if path.exists() and not force:
            raise CommandError(f"{out} exists (use --force to overwrite)", returncode=2)
        private = keystore.generate_private_key()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(signing.private_key_to_pem(private))
        public = signing.public_key_of(private)
        self.stdout.write(
            f"private key written to {out} (keep it there)\n"
            f"key id:      {signing.key_id_for(public, 'member')}\n"
            f"fingerprint: {signing.fingerprint(public)}\n"
            f"public key:  {public.hex()}\n" + signing.public_key_to_pem(public).rstrip()
        )

    def do_sign(
        self,
        *,
        key: str,
        request: str | None,
        halt: int | None,
        production: str | None,
        role_grant: str | None,
        payload: str | None,
        deny: bool,
        reason: str | None,
        role: str | None,
        out: str | None,
        **_: Any,
    ) -> None:
        try:
            private = signing.private_key_from_text(Path(key).read_text(encoding="utf-8"))
        except (OSError, signing.KeyFormatError) as exc:
            raise CommandError(f"{key}: {exc}", returncode=2) from None
        decision = signing.DENY if deny else signing.APPROVE
        if request is not None:
            found = (
                ForceContinueRequest.objects.select_related("run__trace").filter(id=request).first()
                if is_uuid(request)
                else None
            )
            if found is None:
                raise CommandError(REQUEST_UNKNOWN_MESSAGE.format(request=request), returncode=2)
            body = services.force_continue_payload_for(
                request=found,
                decision=decision,
                role=role or signing.ROLE_COUNCIL,
                reason=reason or "",
            )
        elif halt is not None:
            found_halt = Halt.objects.filter(seq=halt).first()
            if found_halt is None:
                raise CommandError(HALT_UNKNOWN_MESSAGE.format(halt=halt), returncode=2)
            body = services.halt_clear_payload_for(halt=found_halt, reason=reason or "")
        elif production is not None:
            body = services.production_replay_payload_for(
                request=self._production(production), decision=decision, reason=reason or ""
            )
        elif role_grant is not None:
            body = services.role_grant_payload_for(
                request=self._role_grant(role_grant), decision=decision, reason=reason or ""
            )
        else:
            assert payload is not None
            body = self._read_json(payload)
            if not isinstance(body, dict):
                raise CommandError(f"{payload}: not a JSON object", returncode=2)
            if body.get("type") in (
                signing.FORCE_CONTINUE_APPROVAL_TYPE,
                signing.PRODUCTION_REPLAY_APPROVAL_TYPE,
                signing.ROLE_GRANT_APPROVAL_TYPE,
            ):
                body["decision"] = decision
            if role is not None:
                body["role"] = role
            if reason is not None:
                body["reason"] = reason
        public = signing.public_key_of(private)
        document = signing.signed_document(
            payload=body, key_id=signing.key_id_for(public, "member"), private_raw=private
        )
        self._write(json.dumps(document, indent=2, sort_keys=True), out)

    def do_record_approval(self, *, file: str, user: str, **_: Any) -> None:
        document = self._read_json(file)
        approver = user_named(user)
        payload = document.get("payload") if isinstance(document, dict) else None
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind == signing.HALT_CLEAR_APPROVAL_TYPE:
            halt_seq = payload.get("halt_seq") if isinstance(payload, dict) else None
            services.halt_clear_approval_record(
                halt_seq=int(halt_seq or 0), approver=approver, document=document
            )
            self.stdout.write(f"recorded {user}'s signature on halt {halt_seq}")
            return
        if kind == signing.PRODUCTION_REPLAY_APPROVAL_TYPE:
            asked = self._production(str(payload.get("request_id")))  # type: ignore[union-attr]
            approval = services.production_replay_approval_record(
                request=asked, approver=approver, document=document
            )
            asked.refresh_from_db()
            self.stdout.write(
                f"recorded {approval.decision} by {user}; production replay request {asked.id} "
                f"is {asked.state}"
                + (f"; production replay {asked.run_id}" if asked.run_id else "")
            )
            return
        if kind == signing.ROLE_GRANT_APPROVAL_TYPE:
            grant = self._role_grant(str(payload.get("request_id")))  # type: ignore[union-attr]
            approval = services.role_grant_approval_record(
                request=grant, approver=approver, document=document
            )
            grant.refresh_from_db()
            self.stdout.write(
                f"recorded {approval.decision} by {user}; role grant {grant.id} is {grant.state}"
            )
            return
        request_id = str(payload.get("request_id")) if isinstance(payload, dict) else ""
        found = (
            ForceContinueRequest.objects.filter(id=request_id).first()
            if is_uuid(request_id)
            else None
        )
        if found is None:
            raise CommandError(REQUEST_UNKNOWN_MESSAGE.format(request=request_id), returncode=2)
        approval = services.approval_record(request=found, approver=approver, document=document)
        found.refresh_from_db()
        self.stdout.write(
            f"recorded {approval.decision} by {user} as {approval.role}; request {found.id} "
            f"is {found.state}"
            + (f"; resumed replay {found.resumed_run_id}" if found.resumed_run_id else "")
        )

    def do_request_continue(
        self, *, run: str, user: str, reason: str, hours: int | None, **_: Any
    ) -> None:
        found = ReplayRun.objects.filter(id=run).first() if is_uuid(run) else None
        if found is None:
            raise CommandError(RUN_UNKNOWN_MESSAGE.format(run=run), returncode=2)
        expires_at = timezone.now() + timedelta(hours=hours) if hours else None
        request = services.force_continue_request_file(
            run=found, actor=user_named(user), reason=reason, expires_at=expires_at
        )
        self.stdout.write(str(request.id))

    def do_request_production(
        self, *, trace: str, user: str, reason: str, hours: int | None, **_: Any
    ) -> None:
        try:
            found = trace_to_replay(trace)
        except ReplayError as exc:  # AMBIGUOUS_TRACE_ID: the caller must pick a copy
            raise CommandError(f"{exc.code}: {exc.message}", returncode=2) from None
        if found is None:
            raise CommandError(TRACE_UNKNOWN_MESSAGE.format(trace=trace), returncode=2)
        expires_at = timezone.now() + timedelta(hours=hours) if hours else None
        asked = services.production_replay_request_file(
            trace=found, actor=user_named(user), reason=reason, expires_at=expires_at
        )
        self.stdout.write(str(asked.id))

    def do_register_key(self, *, user: str, public_key: str, label: str, **_: Any) -> None:
        text = Path(public_key).read_text(encoding="utf-8")
        if "PRIVATE KEY" in text:  # a keygen file: register its public half, send nothing else
            text = signing.public_key_of(signing.private_key_from_text(text)).hex()
        owner = user_named(user, action=roles.SIGNING_KEY_REGISTER)
        key = services.member_key_register(user=owner, public_key=text, label=label)
        self.stdout.write(key.key_id)

    def do_confirm_key(self, *, key_id: str, admin: str, **_: Any) -> None:
        key = MemberKey.objects.filter(key_id=key_id).first()
        if key is None:
            raise CommandError(KEY_UNKNOWN_MESSAGE.format(key_id=key_id), returncode=2)
        services.member_key_confirm(key=key, admin=user_named(admin))
        self.stdout.write(f"confirmed {key_id}")

    def do_revoke_key(self, *, key_id: str, user: str, reason: str, **_: Any) -> None:
        key = MemberKey.objects.filter(key_id=key_id).first()
        if key is None:
            raise CommandError(KEY_UNKNOWN_MESSAGE.format(key_id=key_id), returncode=2)
        services.member_key_revoke(key=key, actor=user_named(user), reason=reason)
        self.stdout.write(f"revoked {key_id}")

    def do_rotate_key(self, *, as_json: bool, **_: Any) -> None:
        key = services.signing_key_rotate(actor_label=services.CLI_SYSTEM_ACTOR)
        if as_json:
            self.stdout.write(json.dumps({"key_id": key.key_id, "fingerprint": key.fingerprint}))
        else:
            self.stdout.write(f"now signing with {key.key_id} ({key.fingerprint})")

    def do_revoke_server_key(self, *, key_id: str, reason: str, **_: Any) -> None:
        services.signing_key_revoke(
            key_id=key_id, reason=reason, actor_label=services.CLI_SYSTEM_ACTOR
        )
        self.stdout.write(f"revoked {key_id}")

    def do_incident(
        self, *, trace: str | None, snapshot: str | None, reason: str, user: str, **_: Any
    ) -> None:
        incident, halt = services.security_incident_declare(
            actor=user_named(user), trace=trace, snapshot=snapshot, reason=reason
        )
        self.stdout.write(
            f"SECURITY_INCIDENT {incident.seq} recorded; halt {halt.seq} on "
            f"{halt.payload['target_kind']} {halt.payload['target_id']}"
        )

    def do_install_roles(
        self, *, admin: list[str], council: list[str], from_groups: bool, **_: Any
    ) -> None:
        admins = [user_named(name) for name in admin]
        members = [user_named(name) for name in council]
        others = []
        if from_groups:
            for user in get_user_model().objects.filter(is_active=True).order_by("username"):
                held = set(user.groups.filter(name__in=roles.ROLES).values_list("name", flat=True))
                admins += [user] if roles.ADMIN in held else []
                members += [user] if roles.COUNCIL in held else []
                others.append((user, held - roles.STRONG_ROLES))
        events = services.roles_install(admins=admins, council=members, others=others)
        for event in events:
            after = ", ".join(event.payload["roles_after"])
            self.stdout.write(f"{event.payload['username']}: {after} (seq {event.seq})")

    def do_set_roles(
        self, *, username: str, roles: list[str], user: str, reason: str, **_: Any
    ) -> None:
        subject = user_named(username)
        change = services.user_roles_change(
            actor=user_named(user), user=subject, roles=roles, reason=reason
        )
        now = sorted(membership.roles_held(get_user_model().objects.get(pk=subject.pk)))
        line = f"{username}: {', '.join(now) or 'no roles'}"
        if change.grant is not None:
            line += (
                f"; grant of {', '.join(change.grant.roles)} awaits the council "
                f"(request {change.grant.id})"
            )
        self.stdout.write(line)

    def do_halts(self, **_: Any) -> None:
        for halt in selectors.halts_active():
            self.stdout.write(f"{halt.seq}\t{halt.target_kind}\t{halt.target_id}\t{halt.reason}")
