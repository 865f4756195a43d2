"""Seed 003 REPLAY-06, end to end through the command line: on divergence, continuing without
admin + council is refused; with signed approvals in the ledger the replay proceeds past the
divergence and its result is non-authoritative."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from core import errors
from core.ledger import codes
from governance import services
from governance.models import ForceContinueRequest, GovernanceEvent
from replay.models import ReplayRun
from tests.governance.conftest import trace_file
from tests.governance.factories import person

pytestmark = [pytest.mark.django_db]


def manage(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_REPLAY_06_force_continue_requires_governance(stored_traces):
    tmp = stored_traces
    for name in ("alice", "bob", "grace", "carol", "dave"):
        person(name)

    # an audit replay of a trace whose recorded router output was changed: it diverges
    code, out, _ = manage("replay", str(trace_file(tmp, "diverged")), "--json")
    assert code == 1
    diverged = json.loads(out)
    assert (diverged["status"], diverged["error_code"]) == ("diverged", errors.REPLAY_DIVERGENCE)
    step = diverged["divergences"][0]["step"]
    run = ReplayRun.objects.get()
    trace_id = run.trace.trace_id

    # continuing without admin + council: refused, and the attempt is on the record
    code, out, _ = manage("replay", trace_id, "--resume", str(run.id), "--json")
    assert code == 1
    refused = json.loads(out)
    assert (refused["status"], refused["error_code"]) == ("refused", "FORCE_CONTINUE_REQUIRED")
    assert refused["authoritative"] is False
    assert (refused["trace_id"], refused["format"], refused["mode"]) == (
        trace_id,
        "replay-trace",
        "audit",
    )
    assert refused["message"] == services.FORCE_CONTINUE_REQUIRED_MESSAGE.format(
        run=run.id, step=step, quorum=2
    )
    assert GovernanceEvent.objects.filter(type=codes.FORCE_CONTINUE_REFUSED).count() == 1

    # each signer makes a key offline and registers its public half; an admin confirms it
    keys = {}
    for name in ("bob", "carol", "dave"):
        key_file = tmp / f"{name}.pem"
        code, out, _ = manage("governance", "keygen", "--out", str(key_file))
        assert code == 0
        assert "PRIVATE" not in out  # the private key stays in the file
        code, key_id, _ = manage(
            "governance", "register-key", "--user", name, "--public-key", str(key_file)
        )
        keys[name] = (key_file, key_id.strip())
        admin = "grace"
        assert manage("governance", "confirm-key", key_id.strip(), "--admin", admin)[0] == 0

    # alice files the request; bob (admin) and carol (council) sign: no quorum yet
    code, request_id, _ = manage(
        "governance", "request-continue", str(run.id), "--user", "alice", "--reason", "hotfix"
    )
    assert code == 0
    request_id = request_id.strip()

    def sign_and_record(name: str, role: str) -> str:
        signed = tmp / f"{name}.approval.json"
        key_file, _ = keys[name]
        assert (
            manage(
                "governance",
                "sign",
                "--key",
                str(key_file),
                "--request",
                request_id,
                "--role",
                role,
                "--out",
                str(signed),
            )[0]
            == 0
        )
        code, out, err = manage("governance", "record-approval", str(signed), "--user", name)
        assert code == 0, err
        return out

    sign_and_record("bob", "admin")
    assert "is pending" in sign_and_record("carol", "council")
    code, out, _ = manage("replay", trace_id, "--resume", str(run.id), "--json")
    assert (code, json.loads(out)["error_code"]) == (1, "FORCE_CONTINUE_REQUIRED")

    # dave's signature makes the quorum: FORCE_CONTINUE_APPROVED, the replay resumes
    assert "is approved" in sign_and_record("dave", "council")
    request = ForceContinueRequest.objects.get(id=request_id)
    assert request.decision_event.type == codes.FORCE_CONTINUE_APPROVED
    code, out, err = manage("replay", trace_id, "--resume", str(run.id), "--json")
    resumed = json.loads(out)
    assert (code, resumed["status"], resumed["error_code"]) == (0, "ok", None), err
    assert resumed["authoritative"] is False
    assert resumed["force_continued"] is True
    assert resumed["divergences"][0]["step"] == step
    assert resumed["divergences"][0]["force_continued"] is True

    result = GovernanceEvent.objects.filter(type=codes.REPLAY_RESULT).order_by("-seq").first()
    assert result.payload["run_id"] == str(request.resumed_run_id)
    assert result.payload["authoritative"] is False
    assert result.payload["force_continued"] is True
    assert result.payload["resumed_from"] == str(run.id)

    # the whole story verifies, actor signatures included
    code, out, _ = manage("governance", "verify", "--json")
    assert (code, json.loads(out)["ok"]) == (0, True)
