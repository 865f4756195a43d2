"""Governance pages: filing a force-continue, the ledger, halts, keys, users and roles (the
request list and approval pages are console/views/requests.py). Signing happens in the browser
(static/js/sign.js); the server only ever sees public keys and signatures."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import roles
from console.api.errors import INVALID_INPUT
from console.refusals import governance_status
from console.tables import ledger_rows_html
from console.views.common import partial_or_page, signed_in
from core.canonical import jcs
from core.ledger import codes, signing
from core.ledger.codes import GovernanceError
from governance import conf, ledger, membership, transparency, witnessing
from governance import selectors as gov
from governance import services as gov_services
from governance.models import (
    GovernanceEvent,
    Halt,
    RoleGrantRequest,
    SigningKey,
)
from governance.verification import ledger_verification_start, ledger_verification_state
from replay.keys import KeyRegistryError, key_add_ed25519, key_add_hmac, key_revoke
from replay.models import VerificationKey

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MESSAGE_NO_DOCUMENT = "Sign the payload in this browser, or paste a signed approval document."
MESSAGE_BAD_DOCUMENT = "The signed approval document is not JSON: {problem}"
EXPIRY_CHOICES = (4, 24, 72, 168)
LEDGER_PAGE = 50
MESSAGE_VERIFICATION_JOINED = "A verification is already running; you joined it."


def expiry_asked(request: HttpRequest) -> datetime:
    """The expiry a request form asks for (its `hours` choice); nonsense is in the past, so
    the service refuses it with its REQUEST_INVALID message."""
    try:
        hours = int(request.POST.get("hours", conf.force_continue_hours()))
    except ValueError:
        hours = -1
    return timezone.now() + timedelta(hours=hours)


def refused(request: HttpRequest, exc: GovernanceError, template: str, context: dict[str, Any]):
    context = {**context, "error_code": exc.code, "error_message": exc.message}
    return render(request, template, context, status=governance_status(exc.code))


# --- force-continue ------------------------------------------------------------------------


@signed_in
@require_http_methods(["GET", "POST"])
def force_continue_request_view(request: HttpRequest, run_id: str) -> HttpResponse:
    run = roles.access_run_by_id(request.user, run_id, roles.FORCE_CONTINUE_REQUEST)
    context: dict[str, Any] = {
        "run": run,
        "trace": run.trace,
        "report": run.report or {},
        "expiry_choices": EXPIRY_CHOICES,
        "default_hours": conf.force_continue_hours(),
        "reason": "",
        "standing": gov.force_continue_standing(run_id=run.id),
    }
    if request.method == "POST":
        reason = request.POST.get("reason", "")
        context["reason"] = reason
        try:
            filed = gov_services.force_continue_request_file(
                run=run, actor=request.user, reason=reason, expires_at=expiry_asked(request)
            )
        except GovernanceError as exc:
            return refused(request, exc, "console/forcecontinue_request.html", context)
        messages.success(request, "Force-continue requested. Approvers can now sign it.")
        return HttpResponseRedirect(
            reverse("request-detail", args=["force-continue", filed.id]), status=303
        )
    return render(request, "console/forcecontinue_request.html", context)


def payload_text(payload: dict[str, Any]) -> str:
    return jcs(payload).decode("utf-8")


def signed_document(request: HttpRequest) -> dict[str, Any]:
    """The signed approval a form carries: pasted whole, or as the fields sign.js fills in."""
    pasted = request.POST.get("document", "").strip()
    if pasted:
        try:
            document = json.loads(pasted)
        except ValueError as exc:
            raise GovernanceError(
                codes.APPROVAL_MALFORMED, MESSAGE_BAD_DOCUMENT.format(problem=exc)
            ) from None
        return document if isinstance(document, dict) else {"payload": document}
    signature = request.POST.get("signature", "").strip()
    if not signature:
        raise GovernanceError(codes.APPROVAL_MALFORMED, MESSAGE_NO_DOCUMENT)
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError as exc:
        raise GovernanceError(
            codes.APPROVAL_MALFORMED, MESSAGE_BAD_DOCUMENT.format(problem=exc)
        ) from None
    return {
        "payload": payload,
        "key_id": request.POST.get("key_id", ""),
        "alg": signing.ALG,
        "signature": signature,
    }


# --- the ledger ----------------------------------------------------------------------------


#: the request kind (its page) of an event that names a request_id, by the prefix of its type
REQUEST_PAGES = (
    ("FORCE_CONTINUE_", "force-continue"),
    ("PRODUCTION_REPLAY_", "production-replay"),
    ("ROLE_GRANT_", "role-grant"),
)


def _event_links(event: GovernanceEvent) -> list[tuple[str, str]]:
    """(label, url) of each run, request, key and halt an event's payload names. A payload
    rewritten underneath may name anything: what names no page gets no link (the page still
    shows, and verification says the event is broken)."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    links: list[tuple[str, str]] = []

    def link(label: str, name: str, arg: Any, anchor: str = "", kind: str = "") -> None:
        args = [arg] if arg is not None else []
        try:
            url = reverse(name, args=[kind, *args] if kind else args)
        except NoReverseMatch:
            return
        links.append((label, url + anchor))

    run_id = payload.get("run_id")
    if isinstance(run_id, str) and run_id:
        link(f"run {run_id}", "run-detail", run_id)
    request_id = payload.get("request_id")
    if isinstance(request_id, str) and request_id:
        for prefix, kind in REQUEST_PAGES:
            if event.type.startswith(prefix):
                link(f"request {request_id}", "request-detail", request_id, kind=kind)
                break
    key_id = payload.get("key_id")
    if isinstance(key_id, str) and key_id and event.type.startswith("KEY_"):
        if event.type == codes.KEY_ROTATED or payload.get("registry") == "server":
            link(f"server key {key_id}", "key-list", None, "#server-keys")
        else:
            link(f"key {key_id}", "key-list", None, f"#key-{key_id}")
    halt_seq = event.seq if event.type == codes.FORCE_HALT_REPLAY else payload.get("halt_seq")
    if isinstance(halt_seq, int) and not isinstance(halt_seq, bool):
        link(f"halt {halt_seq}", "request-detail", halt_seq, kind="halt-clear")
    return links


def payload_pretty(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, indent=2, ensure_ascii=False, default=str)


def _ledger_rows(events: list[GovernanceEvent], state: Any) -> list[dict[str, Any]]:
    """Each event's status as the newest believable mark and the newest run say."""
    run = state.run
    result = run.result if run is not None and run.state == "done" else {}
    broken = result.get("broke_at")
    rows = []
    for event in events:
        if broken is not None and event.seq == broken:
            status = "broken"
        elif broken is not None and event.seq > broken:
            status = "after the break"
        elif event.seq <= state.through_seq:
            status = "verified"
        else:
            status = "not yet verified"
        rows.append(
            {
                "event": event,
                "status": status,
                "payload": payload_pretty(event.payload),
                "links": _event_links(event),
            }
        )
    return rows


def _verification_context(request: HttpRequest, state: Any) -> dict[str, Any]:
    return {
        "state": state,
        "run": state.run,
        "can_verify_full": roles.can(request.user, roles.LEDGER_VERIFY_FULL),
    }


@require_GET
@signed_in
def ledger_view(request: HttpRequest) -> HttpResponse:
    """The ledger's events and, at once, how far the chain is verified: nothing is verified
    here (a verification is a background run, started by a POST to ``ledger-verify``)."""
    roles.require(request.user, roles.BROWSE)
    try:
        code_range = int(request.GET["range"]) if request.GET.get("range") else None
        before = int(request.GET["before"]) if request.GET.get("before") else None
    except ValueError:
        code_range, before = None, None
    events_qs = gov.events(code_range=code_range if code_range in codes.RANGES else None)
    if before is not None:
        events_qs = events_qs.filter(seq__lt=before)
    events = list(events_qs.select_related("actor")[: LEDGER_PAGE + 1])
    older = events[LEDGER_PAGE - 1].seq if len(events) > LEDGER_PAGE else None
    events = events[:LEDGER_PAGE]
    state = ledger_verification_state()
    rows = _ledger_rows(events, state)
    query = {k: str(v) for k, v in request.GET.items() if k in ("range",) and v}
    context = {
        **_verification_context(request, state),
        "rows": rows,
        "ledger_rows_html": ledger_rows_html(rows),  # in Python (console.tables)
        "ranges": sorted(codes.RANGES.items()),
        "code_range": code_range,
        "older": older,
        "query": query,
        "older_url": "?" + _qs({**query, "before": str(older)}) if older else None,
        "filtered": code_range is not None or before is not None,
        "tlog": {
            "origin": transparency.origin(),
            "vkeys": transparency.verifier_keys(),
            "tree_size": transparency.tree_size(),
            "witnessed": witnessing.summary(),
        },
    }
    return partial_or_page(request, "console/ledger_browse.html", "ledger-table", context)


MESSAGE_WITNESS_PUSH_QUEUED = "The checkpoint is being pushed to the witnesses."
MESSAGE_WITNESS_ACK = "Witness alert acknowledged."


@signed_in
@require_POST
def witness_push_view(request: HttpRequest) -> HttpResponse:
    """Queue a push of the newest checkpoint to every witness (admins)."""
    roles.require(request.user, roles.MANAGE)
    witnessing.enqueue_push()
    messages.info(request, MESSAGE_WITNESS_PUSH_QUEUED)
    return HttpResponseRedirect(reverse("ledger"), status=303)


@signed_in
@require_POST
def witness_alert_ack_view(request: HttpRequest, alert_id: int) -> HttpResponse:
    """An admin acknowledges a witness alert: the banner stops showing it."""
    roles.require(request.user, roles.MANAGE)
    witnessing.alert_acknowledge(alert_id=alert_id, by=request.user.get_username())
    messages.info(request, MESSAGE_WITNESS_ACK)
    return HttpResponseRedirect(reverse("ledger"), status=303)


@require_GET
@signed_in
def ledger_verification_view(request: HttpRequest) -> HttpResponse:
    """The verification banner alone: what the ledger page polls while a run is active."""
    roles.require(request.user, roles.BROWSE)
    context = _verification_context(request, ledger_verification_state())
    return partial_or_page(request, "console/ledger_browse.html", "ledger-verification", context)


@signed_in
@require_POST
def ledger_verify_view(request: HttpRequest) -> HttpResponse:
    """Start a background verification (``scope=new``: the events after the newest mark,
    anyone who may browse; ``scope=full``: from seq 1, ``roles.LEDGER_VERIFY_FULL``), or join
    the one that is active. Answers with the banner (htmx) or a redirect to the ledger."""
    roles.require(request.user, roles.BROWSE)
    scope = request.POST.get("scope", "new")
    if scope not in ("new", "full"):
        scope = "new"
    if scope == "full":
        roles.require(request.user, roles.LEDGER_VERIFY_FULL)
    _run, created = ledger_verification_start(actor=request.user, scope=scope)
    if getattr(request, "htmx", False):
        context = {
            **_verification_context(request, ledger_verification_state()),
            "joined": MESSAGE_VERIFICATION_JOINED if not created else "",
        }
        return partial_or_page(
            request, "console/ledger_browse.html", "ledger-verification", context
        )
    if not created:
        messages.info(request, MESSAGE_VERIFICATION_JOINED)
    return HttpResponseRedirect(reverse("ledger"), status=303)


def _qs(params: dict[str, str]) -> str:
    return urlencode({k: v for k, v in params.items() if v})


@require_GET
@signed_in
def checkpoint_export_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    try:
        document = gov.checkpoint_export_verified(actor=request.user)
    except GovernanceError as exc:
        context = {"title": "No checkpoint", "message": exc.message, "code": exc.code}
        return render(request, "console/error_page.html", context, status=409)
    response = JsonResponse(document, json_dumps_params={"indent": 2})
    size = document["checkpoint"]["size"]
    response["Content-Disposition"] = f'attachment; filename="ledger-checkpoint-{size}.json"'
    return response


@signed_in
@require_POST
def checkpoint_check_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    upload = request.FILES.get("checkpoint")
    raw = upload.read(1024 * 1024) if upload else request.POST.get("checkpoint_text", "")
    try:
        document = json.loads(raw)
    except ValueError:
        document = None
    verdict = gov.checkpoint_check(document=document, actor=request.user, from_mark=True)
    context = {"verdict": verdict}
    return render(
        request, "console/checkpoint_check.html", context, status=200 if verdict.ok else 409
    )


# --- halts ---------------------------------------------------------------------------------


INCIDENT_KINDS = ("trace", "snapshot")


def _halts_context(request: HttpRequest) -> dict[str, Any]:
    active = {h.seq for h in gov.halts_active()}
    halts = list(Halt.objects.order_by("-seq")[:200])
    counts = gov.halt_signature_counts(halt_seqs=[h.seq for h in halts])
    rows = [
        {"halt": h, "active": h.seq in active, "signatures": counts.get(h.seq, 0)} for h in halts
    ]
    return {
        "rows": rows,
        "quorum": conf.council_quorum(),
        "can_declare": roles.can(request.user, roles.INCIDENT_DECLARE),
        "incident_kinds": INCIDENT_KINDS,
        "incident": {"kind": "trace", "target": "", "reason": ""},
    }


@require_GET
@signed_in
def halt_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    return render(request, "console/halts_manage.html", _halts_context(request))


@signed_in
@require_POST
def incident_declare_view(request: HttpRequest) -> HttpResponse:
    """An admin declares a SECURITY_INCIDENT: the form on the halts page."""
    roles.require(request.user, roles.INCIDENT_DECLARE)
    kind = request.POST.get("kind", "")
    target = request.POST.get("target", "")
    reason = request.POST.get("reason", "")
    try:
        if kind not in INCIDENT_KINDS:
            raise GovernanceError(codes.REQUEST_INVALID, gov_services.INCIDENT_TARGET_MESSAGE)
        _incident, halt = gov_services.security_incident_declare(
            actor=request.user,
            reason=reason,
            trace=target if kind == "trace" else None,
            snapshot=target if kind == "snapshot" else None,
        )
    except GovernanceError as exc:
        context = _halts_context(request)
        context["incident"] = {"kind": kind, "target": target, "reason": reason}
        return refused(request, exc, "console/halts_manage.html", context)
    messages.success(request, "Security incident recorded: replays of its target are halted.")
    return HttpResponseRedirect(
        reverse("request-detail", args=["halt-clear", halt.seq]), status=303
    )


# --- keys ----------------------------------------------------------------------------------


def _keys_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "my_keys": gov.member_key_list(user=request.user),  # states as the ledger says
        "member_keys": gov.member_key_list(),
        "server_keys": list(SigningKey.objects.all()),
        "verification_keys": list(VerificationKey.objects.all()),
        "current_server_key": ledger.server_key_current(),
    }


@require_GET
@signed_in
def key_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    return render(request, "console/keys_manage.html", _keys_context(request))


def _key_action(request: HttpRequest, action: Any) -> HttpResponse:
    try:
        action()
    except GovernanceError as exc:
        context = {**_keys_context(request), "error_code": exc.code, "error_message": exc.message}
        return render(
            request, "console/keys_manage.html", context, status=governance_status(exc.code)
        )
    return HttpResponseRedirect(reverse("key-list"), status=303)


@signed_in
@require_POST
def key_register_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.SIGNING_KEY_REGISTER)

    def register() -> None:
        gov_services.member_key_register(
            user=request.user,
            public_key=request.POST.get("public_key", ""),
            label=request.POST.get("label", "")[:200],
        )
        messages.success(request, "Key registered. An admin must confirm it before you sign.")

    return _key_action(request, register)


@signed_in
@require_POST
def key_confirm_view(request: HttpRequest, key_id: str) -> HttpResponse:
    key = roles.access_member_key_by_id(request.user, key_id, roles.MANAGE)

    def confirm() -> None:
        gov_services.member_key_confirm(key=key, admin=request.user)
        messages.success(request, f"Key {key.key_id} of {key.user.get_username()} confirmed.")

    return _key_action(request, confirm)


@signed_in
@require_POST
def key_revoke_view(request: HttpRequest, key_id: str) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    from governance.models import MemberKey

    key = MemberKey.objects.filter(key_id=key_id, user=cast("User", request.user)).first()
    if key is None:  # not one's own: only an admin may revoke it
        key = roles.access_member_key_by_id(request.user, key_id, roles.MANAGE)

    def revoke() -> None:
        gov_services.member_key_revoke(
            key=key, actor=request.user, reason=request.POST.get("reason", "")[:500]
        )
        messages.success(request, f"Key {key.key_id} revoked.")

    return _key_action(request, revoke)


#: a trace verification key's id as a person types it: what the CLI accepts, without blanks
VERIFICATION_KEY_ID = re.compile(r"[!-~]{1,128}")
VERIFICATION_KEY_ID_MESSAGE = (
    "a key id is 1 to 128 printable ASCII characters without spaces, as the trace names it"
)


def _verification_key_action(request: HttpRequest, action: Any) -> HttpResponse:
    """An admin's change to the trace verification keys, as ``manage.py keys`` makes it (the
    same replay.keys functions and messages); a refusal is shown on the keys page."""
    try:
        action()
    except KeyRegistryError as exc:
        context = {
            **_keys_context(request),
            "error_code": INVALID_INPUT,
            "error_message": str(exc),
            "verification_key_id": request.POST.get("key_id", "")[:128],
        }
        return render(request, "console/keys_manage.html", context, status=400)
    return HttpResponseRedirect(reverse("key-list") + "#verification-keys", status=303)


@signed_in
@require_POST
def verification_key_add_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.MANAGE)
    key_id = request.POST.get("key_id", "").strip()
    alg = request.POST.get("alg", "")

    def add() -> None:
        if not VERIFICATION_KEY_ID.fullmatch(key_id):
            raise KeyRegistryError(VERIFICATION_KEY_ID_MESSAGE)
        if alg == "hmac-sha256":
            # typed or pasted: a trailing line ending is not part of the secret (as the CLI
            # strips it from a secret file)
            secret = request.POST.get("secret", "").encode().rstrip(b"\r\n")
            key = key_add_hmac(key_id=key_id, secret=secret)
        elif alg == "ed25519":
            key = key_add_ed25519(
                key_id=key_id, public_key=request.POST.get("public_key", "").encode()
            )
        else:
            raise KeyRegistryError("choose the key's algorithm: hmac-sha256 or ed25519")
        messages.success(request, f"Added {key.alg} key {key.key_id}.")

    return _verification_key_action(request, add)


@signed_in
@require_POST
def verification_key_revoke_view(request: HttpRequest, key_id: str) -> HttpResponse:
    roles.require(request.user, roles.MANAGE)

    def revoke() -> None:
        key = key_revoke(key_id=key_id)
        messages.success(
            request, f"Key {key.key_id} retired: it verifies nothing signed after now."
        )

    return _verification_key_action(request, revoke)


@signed_in
@require_POST
def server_key_rotate_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.MANAGE)

    def rotate() -> None:
        new = gov_services.signing_key_rotate(actor=request.user)
        messages.success(request, f"The server now signs with {new.key_id}.")

    return _key_action(request, rotate)


# --- users and roles -----------------------------------------------------------------------


def _user_rows() -> list[dict[str, Any]]:
    users = list(get_user_model().objects.order_by("username")[:500])
    pending = {
        g.user_id: g
        for g in gov.role_grants()
        .filter(state=RoleGrantRequest.State.PENDING)
        .order_by("created_at")
    }
    return [
        {"user": u, "roles": membership.roles_held(u), "grant": pending.get(u.pk)} for u in users
    ]


@signed_in
@require_http_methods(["GET", "POST"])
def user_list_view(request: HttpRequest) -> HttpResponse:
    """Admins set other people's roles: the others at once (a signed ROLES_CHANGED event),
    admin and council through the council (a role grant that a quorum signs)."""
    roles.require(request.user, roles.MANAGE)
    template = "console/users_manage.html"
    if request.method == "POST":
        target = roles.access_user_by_id(
            request.user, request.POST.get("user_id", ""), roles.MANAGE
        )
        try:
            change = gov_services.user_roles_change(
                actor=request.user,
                user=target,
                roles=request.POST.getlist("roles"),
                reason=request.POST.get("reason", "")[:5000],
            )
        except GovernanceError as exc:
            return refused(request, exc, template, {"rows": _user_rows(), "all_roles": roles.ROLES})
        membership.forget(target)
        now = ", ".join(sorted(membership.roles_held(target))) or "none"
        note = f"Roles of {target.get_username()}: {now}."
        if change.grant is not None:
            note += (
                f" The grant of {', '.join(change.grant.roles)} awaits a council quorum's "
                "signatures."
            )
        messages.success(request, note)
        return HttpResponseRedirect(reverse("user-list"), status=303)
    context = {"rows": _user_rows(), "all_roles": roles.ROLES}
    return render(request, template, context)
