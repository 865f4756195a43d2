"""The whole DSR flow over real traces, the privacy store and the bundle: a subject found in
every trace, replayed in audit mode, a bundle that verifies offline (and fails when a byte
changes), legal staff seeing redacted values only, one PII_REVEALED per admin release, the
four-eyes gates on the download and the erasure, the erasure receipt, and what is left."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from core import bundle
from core.canonical import jcs
from core.ledger import codes, signing
from dsr import access, services
from dsr.models import DsrRelease, LegalRequest
from governance import ledger, transparency
from governance.models import GovernanceEvent, TreeCheckpoint, Vote
from privacy import subjects
from tests.console.personas import client_for, persona
from tlog import note as notes

pytestmark = pytest.mark.django_db

ADA = "ada.lovelace@example.org"
ADA_NAME = "Ada Lovelace"


@pytest.fixture
def traces(ingest, signers):
    return [ingest("ok"), ingest("diverged")]


def opened(identifier: str = ADA, kind: str = "both") -> LegalRequest:
    legal = services.legal_request_open(
        actor=persona("lena"), identifiers=[identifier], kind=kind, legal_basis="GDPR Art. 15"
    )
    return services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )


def approve(legal: LegalRequest, purpose: str, member_key) -> None:
    key, private = member_key("adam")
    payload = services.approval_payload_for(request=legal, purpose=purpose)
    services.legal_request_approve(
        request=legal,
        purpose=purpose,
        approver=persona("adam"),
        document={
            "payload": payload,
            "key_id": key.key_id,
            "signature": signing.sign(private, jcs(payload)),
        },
    )


def built(legal: LegalRequest, capture) -> LegalRequest:
    with capture(execute=True):
        response = client_for("lena").post(reverse("dsr-bundle", args=[legal.id]))
    assert response.status_code == 303
    legal.refresh_from_db()
    assert legal.bundle_state == access.DONE, legal.bundle_error
    return legal


def verify_cli(path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("dsr", "verify-bundle", str(path), stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue() + err.getvalue()
    return 0, out.getvalue()


def test_the_subject_is_found_in_every_trace_replayed_in_audit_mode_and_the_bundle_verifies(
    traces, django_capture_on_commit_callbacks, tmp_path
):
    legal = built(opened(), django_capture_on_commit_callbacks)
    assert (legal.bundle_done, legal.bundle_total) == (2, 2)
    asked = GovernanceEvent.objects.filter(type=codes.REPLAY_REQUEST).order_by("seq")
    assert [(e.payload["trace_sha256"], e.payload["mode"], e.actor_label) for e in asked] == [
        (t.blob.sha256, "audit", access.DSR_ACTOR) for t in traces
    ]
    data = access.bundle_path(legal).read_bytes()
    assert ADA.encode() not in data
    assert ADA_NAME.encode() not in data
    check = bundle.verify_bundle(data)
    assert check.ok, check
    assert (check.request_ref, list(check.subject_refs)) == (str(legal.id), legal.subject_refs)
    members = bundle.read_members(data)
    files = {t.blob.sha256 for t in traces}
    assert {name.split("/")[1] for name in members if name.startswith("traces/")} == files
    for sha in files:
        values = members[f"traces/{sha}/data.json"]["subject_values"]
        assert values
        assert {v["value"] for v in values} == {"[redacted]"}
        assert members[f"traces/{sha}/report.json"]["mode"] == "audit"
    exported = GovernanceEvent.objects.get(seq=legal.export_event_id)
    assert exported.type == codes.DSR_EXPORTED
    import hashlib

    assert exported.payload["bundle_sha256"] == hashlib.sha256(data).hexdigest()
    # offline: the file verifies; any changed byte fails and is named
    good = tmp_path / "bundle.json"
    good.write_bytes(data)
    assert verify_cli(good)[0] == 0
    for position in (0, len(data) // 3, len(data) // 2, len(data) - 2):
        changed = bytearray(data)
        changed[position] ^= 0x01
        bad = tmp_path / f"bad-{position}.json"
        bad.write_bytes(bytes(changed))
        status, text = verify_cli(bad)
        assert status == 1, (position, text)
        assert "BUNDLE_" in text
    assert ledger.verify().ok


def test_the_bundle_proves_each_event_in_a_signed_checkpoint_extending_a_kept_one(
    traces, django_capture_on_commit_callbacks, tmp_path
):
    kept = transparency.checkpoint()  # what an auditor fetched before the request
    legal = built(opened(), django_capture_on_commit_callbacks)
    data = access.bundle_path(legal).read_bytes()
    vkeys = transparency.verifier_keys()

    check = bundle.verify_bundle(data, vkeys=vkeys, older_checkpoint=kept.note)
    assert check.ok, check
    assert check.tlog_trust == "vkey"
    assert check.proven == check.events > 0
    assert check.extends == kept.size
    newest = TreeCheckpoint.objects.order_by("-size").first()
    assert newest is not None
    assert check.tlog_size == newest.size > kept.size
    tlog = bundle.read_members(data)["ledger/tlog.json"]
    assert tlog["checkpoint"] == newest.note
    assert tlog["vkeys"] == vkeys
    # offline, by the command an auditor runs: the key given, the kept checkpoint extended
    path, older = tmp_path / "bundle.json", tmp_path / "kept.note"
    path.write_bytes(data)
    older.write_text(kept.note)
    out = io.StringIO()
    call_command(
        "dsr", "verify-bundle", str(path), "--vkey", vkeys[0],
        "--older-checkpoint", str(older), stdout=out,
    )  # fmt: skip
    assert f"{check.proven} event(s) proven in it\n" in out.getvalue()
    assert f"it extends the older checkpoint (size {kept.size})\n" in out.getvalue()
    # no witness is configured here: a quorum asked for offline is not met, and says who
    witness = notes.Signer.from_seed("witness.test/w1", bytes(32)).as_cosigner().verifier
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command(
            "dsr", "verify-bundle", str(path), "--vkey", vkeys[0],
            "--witness", witness.vkey, "--quorum", "1", stdout=out,
        )  # fmt: skip
    assert exited.value.code == 1
    assert (
        f"FAIL BUNDLE_WITNESS_QUORUM at ledger/tlog.json: checkpoint: checkpoint of size "
        f"{newest.size}: 0 of the 1 witness cosignatures required; signed: none; not signed: "
        f"witness.test/w1+{witness.key_id:08x}\n"
    ) in out.getvalue()


def test_legal_sees_redacted_values_and_an_admin_release_is_one_pii_revealed_event(
    traces, django_capture_on_commit_callbacks, member_key
):
    legal = opened()
    lena_page = client_for("lena").get(reverse("dsr-detail", args=[legal.id])).content.decode()
    assert "[redacted]" in lena_page
    assert ADA not in lena_page
    assert ADA_NAME not in lena_page
    hit = next(h for h, _v in access.subjects_port.subject_values(legal.subject_refs, reveal=False))
    form = {
        "subject_ref": hit.subject_ref,
        "trace_pk": hit.trace_pk,
        "location": hit.location,
        "path": hit.path,
        "reason": "the subject asked for their name as recorded",
    }
    assert client_for("lena").post(reverse("dsr-release", args=[legal.id]), form).status_code == 403
    before = GovernanceEvent.objects.filter(type=codes.PII_REVEALED).count()
    assert client_for("adam").post(reverse("dsr-release", args=[legal.id]), form).status_code == 303
    revealed = GovernanceEvent.objects.filter(type=codes.PII_REVEALED)
    assert revealed.count() == before + 1
    event = revealed.order_by("-seq").first()
    assert event.payload["request_id"] == str(legal.id)
    assert event.payload["context"] == f"legal request {legal.id}"
    assert event.payload["fields"] == [f"{hit.location} {hit.path}"]
    assert ADA not in json.dumps(event.payload)
    assert ADA_NAME not in json.dumps(event.payload)
    twice = client_for("adam").post(reverse("dsr-release", args=[legal.id]), form)
    assert twice.status_code == 409
    assert revealed.count() == before + 1
    assert DsrRelease.objects.count() == 1
    # the bundle carries the released value, the rest redacted; the page still shows none
    legal = built(legal, django_capture_on_commit_callbacks)
    data = access.bundle_path(legal).read_bytes()
    values = [
        v
        for name, member in bundle.read_members(data).items()
        if name.endswith("/data.json")
        for v in member["subject_values"]
    ]
    released = [v for v in values if v["released"]]
    assert len(released) == 1
    assert released[0]["value"] in (ADA, ADA_NAME)
    assert all(v["value"] == "[redacted]" for v in values if not v["released"])
    page = client_for("lena").get(reverse("dsr-detail", args=[legal.id])).content.decode()
    assert ADA not in page
    assert ADA_NAME not in page
    # the download waits for the release's four-eyes approval
    download = reverse("dsr-bundle-download", args=[legal.id])
    refused = client_for("lena").get(download)
    assert refused.status_code == 409
    assert codes.DSR_STATE in refused.content.decode()
    approve(legal, signing.DSR_RELEASE, member_key)
    fetched = client_for("lena").get(download)
    assert fetched.status_code == 200
    assert fetched.content == data
    pdf = client_for("lena").get(reverse("dsr-bundle-pdf", args=[legal.id]))
    assert pdf.status_code == 200
    assert pdf.content.startswith(b"%PDF")
    api = client_for("lena").get(reverse("api-legal-request-bundle-file", args=[legal.id]))
    assert api.status_code == 200
    assert api.content == data


def test_an_approved_erasure_shreds_once_and_leaves_a_receipt_without_personal_data(
    traces, django_capture_on_commit_callbacks, member_key
):
    legal = opened(kind="erasure")
    lena = client_for("lena")
    early = lena.post(reverse("dsr-erase", args=[legal.id]))
    assert early.status_code == 409
    assert codes.DSR_STATE in early.content.decode()
    plan_page = client_for("adam").get(reverse("request-detail", args=["legal-erasure", legal.id]))
    text = plan_page.content.decode()
    assert 'id="erasure-plan"' in text
    for trace in traces:
        assert trace.blob.sha256 in text
    assert ADA not in text
    # the plan reads as JSON (a tree to fold), not as a Python dict's repr
    plan = text[text.index('id="erasure-plan"') :]
    assert '<div class="json-tree">' in plan
    assert "{&#x27;" not in plan
    assert "': " not in plan
    approve(legal, signing.DSR_ERASURE, member_key)
    other = opened(kind="erasure")  # the same subject, in a second request opened meanwhile
    assert other.subject_refs == legal.subject_refs
    with django_capture_on_commit_callbacks(execute=True):
        assert lena.post(reverse("dsr-erase", args=[legal.id])).status_code == 303
    legal.refresh_from_db()
    receipt = GovernanceEvent.objects.get(seq=legal.erasure_event_id)
    assert receipt.type == codes.DSR_ERASED
    body = jcs(receipt.payload).decode()
    assert ADA not in body
    assert ADA_NAME not in body
    assert receipt.payload["first_time"] is True
    assert receipt.payload["receipt"]["keys_destroyed"] == 1
    assert {t["file_sha256"] for t in receipt.payload["receipt"]["traces"]} == {
        t.blob.sha256 for t in traces
    }
    assert receipt.payload["approval_seqs"] == [
        Vote.objects.get(request__subject=str(legal.id)).event_id
    ]
    page = lena.get(reverse("dsr-detail", args=[legal.id])).content.decode()
    assert 'id="erasure-receipt"' in page
    receipt_html = page[page.index('id="erasure-receipt"') :]
    assert '<span class="jt-key">"first_time"</span>: <span class="jt-bool">true</span>' in (
        receipt_html
    )
    assert "&#x27;first_time&#x27;" not in page
    assert "[erased]" in page
    assert ADA not in page
    assert ADA_NAME not in page
    assert subjects.identifier(legal.subject_refs[0]) is None
    # a second erasure of the same request: the same receipt
    again = access.legal_request_erase(request=legal, actor=persona("lena"))
    assert again.seq == receipt.seq
    # the same subject in another request: the first receipt, nothing destroyed twice
    approve(other, signing.DSR_ERASURE, member_key)
    second = access.legal_request_erase(request=other, actor=persona("lena"))
    assert second.payload["first_time"] is False
    assert second.payload["first_receipt_seq"] == receipt.seq
    assert second.payload["receipt"]["receipt"] == receipt.payload["receipt"]["receipt"]
    assert ledger.verify().ok
    out = io.StringIO()
    call_command("governance", "verify", stdout=out)
    api = lena.get(reverse("api-legal-request-erasure", args=[legal.id])).json()
    assert api["receipt_seq"] == receipt.seq
    # no page, API answer, dsr row or ledger payload yields the value
    answers = [
        lena.get(reverse("api-legal-request-detail", args=[legal.id])).content.decode(),
        lena.get(reverse("api-legal-request-list")).content.decode(),
        json.dumps(api),
        client_for("adam").get(reverse("dsr-detail", args=[legal.id])).content.decode(),
        str(list(LegalRequest.objects.values())),
        str(list(DsrRelease.objects.values())),
        json.dumps([e.payload for e in GovernanceEvent.objects.all()]),
    ]
    for text in answers:
        assert ADA not in text
        assert ADA_NAME not in text
    # fulfilment now closes it
    services.legal_request_start(request=legal, actor=persona("lena"))
    done = services.legal_request_fulfil(request=legal, actor=persona("lena"))
    assert done.state == LegalRequest.State.FULFILLED


def test_an_unknown_subject_gets_an_empty_signed_nothing_held_bundle(
    traces, django_capture_on_commit_callbacks
):
    legal = built(opened("nobody@example.org", kind="access"), django_capture_on_commit_callbacks)
    data = access.bundle_path(legal).read_bytes()
    check = bundle.verify_bundle(data)
    assert check.ok
    assert check.nothing_held is True
    assert legal.bundle_total == 0
    page = client_for("lena").get(reverse("dsr-detail", args=[legal.id])).content.decode()
    assert 'id="nothing-held"' in page
    exported = GovernanceEvent.objects.get(seq=legal.export_event_id)
    assert exported.payload["nothing_held"] is True


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "cora", "nora"])
def test_roles_without_dsr_cannot_build_download_release_or_erase(name, traces):
    legal = opened()
    client = client_for(name)
    for url, method in (
        (reverse("dsr-bundle", args=[legal.id]), "post"),
        (reverse("dsr-bundle-download", args=[legal.id]), "get"),
        (reverse("dsr-bundle-pdf", args=[legal.id]), "get"),
        (reverse("dsr-release", args=[legal.id]), "post"),
        (reverse("dsr-erase", args=[legal.id]), "post"),
        (reverse("api-legal-request-bundle", args=[legal.id]), "post"),
        (reverse("api-legal-request-erasure", args=[legal.id]), "post"),
        (reverse("api-legal-request-release", args=[legal.id]), "post"),
        (reverse("api-legal-request-bundle", args=[legal.id]), "get"),
        (reverse("api-legal-request-bundle-file", args=[legal.id]), "get"),
        (reverse("api-legal-request-erasure", args=[legal.id]), "get"),
    ):
        assert getattr(client, method)(url).status_code == 403, url


@pytest.mark.parametrize("name", ["lena", "adam"])
def test_legal_and_admin_read_the_bundle_status_and_the_erasure_plan(name, traces):
    legal = opened()
    client = client_for(name)
    status = client.get(reverse("api-legal-request-bundle", args=[legal.id]))
    assert status.status_code == 200
    assert status.json()["state"] == ""
    plan = client.get(reverse("api-legal-request-erasure", args=[legal.id])).json()
    assert plan["receipt"] is None
    assert plan["plan"]["subjects"] == legal.subject_refs
    assert {t["file_sha256"] for t in plan["plan"]["traces"]} == {t.blob.sha256 for t in traces}
    assert ADA not in json.dumps(plan)
    release = client.post(
        reverse("api-legal-request-release", args=[legal.id]),
        {
            "subject_ref": legal.subject_refs[0],
            "trace_pk": 0,
            "location": "x",
            "path": "",
            "reason": "r",
        },
        content_type="application/json",
    )
    if name == "lena":
        assert release.status_code == 403
    else:
        assert (release.status_code, release.json()["error_code"]) == (400, codes.DSR_INVALID)


def test_a_bundle_built_after_the_erasure_says_erased_and_still_verifies(
    traces, django_capture_on_commit_callbacks, member_key
):
    legal = opened(kind="both")
    approve(legal, signing.DSR_ERASURE, member_key)
    access.legal_request_erase(request=legal, actor=persona("lena"))
    legal = built(legal, django_capture_on_commit_callbacks)
    data = access.bundle_path(legal).read_bytes()
    assert bundle.verify_bundle(data).ok
    members = bundle.read_members(data)
    values = [
        v["value"]
        for name, member in members.items()
        if name.endswith("/data.json")
        for v in member["subject_values"]
    ]
    assert values
    assert set(values) == {"[erased]"}
    reports = [m for name, m in members.items() if name.endswith("/report.json")]
    assert len(reports) == len(traces)
    assert {r["mode"] for r in reports} == {"audit"}
    assert ADA.encode() not in data
    assert ADA_NAME.encode() not in data


def test_retention_never_expires_a_trace_under_an_open_legal_request(traces):
    from dsr import holds
    from governance import retention

    assert holds.open_legal_requests in retention._holds()
    assert holds.open_legal_requests(traces) == {}
    legal = opened()
    why = holds.HOLD_MESSAGE.format(request=legal.id)
    assert holds.open_legal_requests(traces) == {t.pk: why for t in traces}
    services.legal_request_refuse(request=legal, actor=persona("lena"), reason="withdrawn")
    assert holds.open_legal_requests(traces) == {}
