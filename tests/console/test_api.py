"""The REST API: every endpoint for every role, exact error codes, session and token auth."""

from __future__ import annotations

import io

import pytest
from django.test import Client

from core.canonical import jcs
from core.ledger.signing import sign
from governance import services as gov_services
from governance.models import ForceContinueRequest, Vote
from replay.models import ReplayRun, Trace
from tests.console.conftest import trace_bytes
from tests.console.personas import BY_ROLE, PERSONAS, persona

pytestmark = pytest.mark.django_db

V, AU, OP, AD, CO, LE = "viewer", "auditor", "operator", "admin", "council", "legal"
ANYONE = {V, AU, OP, AD, CO, LE}
MISSING_UUID = "7b0b7a0e-0000-4000-8000-000000000000"


@pytest.fixture
def world(replayed):
    from governance.models import Halt

    production = gov_services.production_replay_request_file(
        trace=replayed("ok").trace, actor=persona("alice"), reason="drill"
    )
    diverged = replayed("diverged")
    replayed("broken_chain")
    fc = gov_services.force_continue_request_file(
        run=diverged, actor=persona("alice"), reason="known"
    )
    return {
        "production": str(production.id),
        "sha": diverged.trace.blob.sha256,
        "run": str(diverged.id),
        "fc": str(fc.id),
        "halt": Halt.objects.order_by("seq").first().seq,
    }


READS = [
    ("traces", lambda w: "/api/traces/", None, ANYONE),
    ("trace", lambda w: f"/api/traces/{w['sha']}/", f"/api/traces/{'f' * 64}/", ANYONE),
    ("replay", lambda w: f"/api/replays/{w['run']}/", f"/api/replays/{MISSING_UUID}/", ANYONE),
    (
        "report",
        lambda w: f"/api/replays/{w['run']}/report/",
        f"/api/replays/{MISSING_UUID}/report/",
        ANYONE,
    ),
    ("force-continue list", lambda w: "/api/force-continue/", None, ANYONE),
    (
        "force-continue",
        lambda w: f"/api/force-continue/{w['fc']}/",
        f"/api/force-continue/{MISSING_UUID}/",
        ANYONE,
    ),
    ("production list", lambda w: "/api/production-requests/", None, ANYONE),
    (
        "production request",
        lambda w: f"/api/production-requests/{w['production']}/",
        f"/api/production-requests/{MISSING_UUID}/",
        ANYONE,
    ),
    ("halts", lambda w: "/api/halts/", None, ANYONE),
    ("keys", lambda w: "/api/keys/", None, ANYONE),
    ("events", lambda w: "/api/governance/events/", None, ANYONE),
    ("verification", lambda w: "/api/governance/verification/", None, ANYONE),
    ("inbox", lambda w: "/api/inbox/", None, ANYONE),
]


@pytest.mark.parametrize("name", [*BY_ROLE.values(), "nora"])
def test_every_read_endpoint_for_every_role(world, as_persona, name):
    client = as_persona(name)
    held = set(PERSONAS[name])
    for endpoint, url, missing, allowed_roles in READS:
        allowed = bool(held & allowed_roles)
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = client.get(url(world), **headers)
            where = f"{endpoint} as {name}"
            assert response.status_code == (200 if allowed else 403), where
            assert response["Content-Type"] == "application/json", where
            if not allowed:
                assert response.json()["error_code"] == "PERMISSION_DENIED", where
            if missing is not None:
                gone = client.get(missing, **headers)
                assert gone.status_code == (404 if allowed else 403), f"missing {where}"
                if not allowed:
                    assert gone.json() == response.json(), where
                else:
                    assert gone.json()["error_code"] == "NOT_FOUND"


def test_an_anonymous_client_gets_401_with_the_token_scheme(client, world):
    response = client.get("/api/traces/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "error_code": "NOT_AUTHENTICATED",
        "message": "Authentication credentials were not provided.",
    }


def token_for(name: str) -> str:
    return gov_services.api_token_create(user=persona(name))[1]


class TestTokenAuth:
    def test_a_token_works_for_alice(self, world):
        token = token_for("alice")
        response = Client().get("/api/traces/", HTTP_AUTHORIZATION=f"Token {token}")
        assert response.status_code == 200

    def test_a_token_does_not_carry_strong_roles_without_a_second_factor(self, world):
        token = token_for("adam")
        response = Client().get("/api/traces/", HTTP_AUTHORIZATION=f"Token {token}")
        assert response.status_code == 403
        sam = token_for("sam")  # auditor + admin
        ok = Client().get("/api/traces/", HTTP_AUTHORIZATION=f"Token {sam}")
        assert ok.status_code == 200
        production = Client().post(
            "/api/replays/",
            {"trace": world["sha"], "mode": "production"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {sam}",
        )
        assert production.status_code == 403
        assert production.json() == {
            "error_code": "PERMISSION_DENIED",
            "message": "your roles do not allow a production replay",
        }

    def test_a_bad_token_is_401(self):
        response = Client().get("/api/traces/", HTTP_AUTHORIZATION="Token nope")
        assert response.status_code == 401
        assert response.json()["error_code"] == "NOT_AUTHENTICATED"


class TestTraces:
    def test_upload_multipart(self, as_persona, trace_key):
        nothing = as_persona("alice").post("/api/traces/upload/", {"note": "no file"})
        assert nothing.status_code == 400
        assert nothing.json()["fields"] == {"file": ["No file was submitted."]}
        named = io.BytesIO(trace_bytes("ok"))
        named.name = "ok.trace.json"
        response = as_persona("alice").post("/api/traces/upload/", {"file": named})
        body = response.json()
        assert response.status_code == 201
        assert body["verdict"] == "ok"
        assert body["created"] is True
        assert body["replayable"] is True
        assert body["report"]["status"] == "ok"
        again = io.BytesIO(trace_bytes("ok"))
        again.name = "ok.trace.json"
        assert as_persona("alice").post("/api/traces/upload/", {"file": again}).status_code == 200

    def test_upload_raw_body_with_filename(self, as_persona, trace_key):
        response = as_persona("oscar").post(
            "/api/traces/upload/?filename=diverged.trace.json",
            trace_bytes("diverged"),
            content_type="application/octet-stream",
        )
        assert response.status_code == 201
        assert response.json()["verdict"] == "diverged"
        assert Trace.objects.get().filename == "diverged.trace.json"

    def test_raw_body_needs_a_filename(self, as_persona):
        response = as_persona("oscar").post(
            "/api/traces/upload/", b"{}", content_type="application/octet-stream"
        )
        assert response.status_code == 400
        assert response.json() == {
            "error_code": "INVALID_INPUT",
            "message": "invalid input: filename: Name the file (?filename=...).",
            "fields": {"filename": ["Name the file (?filename=...)."]},
        }

    def test_a_malformed_trace_is_refused_with_its_exact_code_and_nothing_stored(
        self, as_persona, trace_key
    ):
        response = as_persona("alice").post(
            "/api/traces/upload/?filename=x.trace.json",
            b"[1, 2",
            content_type="application/octet-stream",
        )
        assert response.status_code == 400
        assert response.json()["error_code"] == "MALFORMED_TRACE"
        assert not Trace.objects.exists()

    def test_an_unsupported_media_type_is_415(self, as_persona):
        response = as_persona("alice").post("/api/traces/upload/", "x", content_type="text/plain")
        assert response.status_code == 415
        assert response.json()["error_code"] == "UNSUPPORTED_MEDIA_TYPE"

    def test_an_oversized_upload_is_413_with_the_limit(self, as_persona, settings):
        settings.REPLAY_MAX_UPLOAD_BYTES = 1000
        response = as_persona("alice").post(
            "/api/traces/upload/?filename=big.trace.json",
            b" " * 100_000,
            content_type="application/octet-stream",
        )
        assert response.status_code == 413
        assert response.json() == {
            "error_code": "UPLOAD_TOO_LARGE",
            "message": "The upload is larger than the limit of 1000 bytes.",
            "limit": 1000,
        }

    def test_a_session_write_without_csrf_is_403(self, trace_key):
        from tests.console.personas import sign_in

        client = sign_in(Client(enforce_csrf_checks=True), persona("alice"))
        response = client.post(
            "/api/traces/upload/?filename=ok.trace.json",
            trace_bytes("ok"),
            content_type="application/octet-stream",
        )
        assert response.status_code == 403
        assert response.json() == {
            "error_code": "CSRF_FAILED",
            "message": "CSRF Failed: CSRF cookie not set.",
        }

    @pytest.mark.parametrize("name", ["vera", "cora", "lena", "nora"])
    def test_upload_is_refused_to_roles_without_it(self, as_persona, trace_key, name):
        response = as_persona(name).post(
            "/api/traces/upload/?filename=ok.trace.json",
            trace_bytes("ok"),
            content_type="application/octet-stream",
        )
        assert response.status_code == 403
        assert not Trace.objects.exists()

    def test_list_filters_and_pages_with_a_cursor(self, as_persona, ingest):
        ingest("ok")
        ingest("diverged")
        ingest("broken_chain")
        client = as_persona("vera")
        first = client.get("/api/traces/?limit=2").json()
        assert len(first["results"]) == 2
        second = client.get(first["next"]).json()
        assert len(second["results"]) == 1
        assert second["next"] is None
        seen = {t["sha256"] for t in first["results"] + second["results"]}
        assert len(seen) == 3
        diverged = client.get("/api/traces/?verdict=diverged").json()["results"]
        assert [t["filename"] for t in diverged] == ["diverged.trace.json"]

    def test_list_refuses_bad_filters_with_their_fields(self, as_persona):
        response = as_persona("vera").get("/api/traces/?verdict=great&limit=0")
        assert response.status_code == 400
        body = response.json()
        assert body["error_code"] == "INVALID_INPUT"
        assert set(body["fields"]) == {"verdict", "limit"}

    def test_a_forged_cursor_is_a_400(self, as_persona):
        response = as_persona("vera").get("/api/traces/?cursor=AAAA")
        assert response.status_code == 400
        assert response.json()["fields"] == {"cursor": ["invalid"]}

    def test_detail_names_what_is_missing_and_the_runs(self, as_persona, replayed):
        run = replayed("unpersisted")
        body = as_persona("vera").get(f"/api/traces/{run.trace.blob.sha256}/").json()
        assert body["missing"]
        assert body["replayable"] is False
        assert [r["id"] for r in body["runs"]] == [str(run.id)]


class TestVerifyWithoutStoring:
    def test_an_ahd_sidecar_is_verified_against_the_servers_checkout(self, as_persona, settings):
        from pathlib import Path

        from django.core.files.uploadedfile import SimpleUploadedFile

        root = Path(settings.BASE_DIR) / "replay" / "demo_ahd"
        settings.REPLAY_AHD_ROOT = str(root)
        name = "2026-04-21-swiss.replay.json"
        upload = SimpleUploadedFile(name, (root / "docs" / "evals" / name).read_bytes())
        response = as_persona("alice").post("/api/traces/verify/", {"file": upload})
        assert response.status_code == 200
        body = response.json()
        assert (body["format"], body["stored"], body["report"]["status"]) == (
            "ahd-replay",
            False,
            "ok",
        )
        assert [c["name"] for c in body["report"]["checks"]] == ["format", "root", "token", "brief"]
        assert str(root) not in response.content.decode()

    def test_a_native_trace_gets_its_report_and_nothing_is_stored(self, as_persona, trace_key):
        response = as_persona("alice").post(
            "/api/traces/verify/?filename=diverged.trace.json",
            trace_bytes("diverged"),
            content_type="application/octet-stream",
        )
        assert response.status_code == 200
        report = response.json()["report"]
        assert (report["status"], report["error_code"]) == ("diverged", "REPLAY_DIVERGENCE")
        assert not Trace.objects.exists()

    def test_a_corrupt_file_is_a_report_of_its_refusal(self, as_persona):
        response = as_persona("alice").post(
            "/api/traces/verify/?filename=x.trace.json",
            b'{"format": "replay-trace",',
            content_type="application/octet-stream",
        )
        assert response.status_code == 200
        report = response.json()["report"]
        assert (report["status"], report["error_code"]) == ("refused", "MALFORMED_TRACE")

    def test_an_oversized_file_is_413(self, as_persona, settings):
        settings.REPLAY_MAX_UPLOAD_BYTES = 1000
        response = as_persona("alice").post(
            "/api/traces/verify/?filename=big.trace.json",
            b" " * 100_000,
            content_type="application/octet-stream",
        )
        assert response.status_code == 413
        assert response.json()["error_code"] == "UPLOAD_TOO_LARGE"

    @pytest.mark.parametrize("name", ["vera", "cora", "lena", "nora"])
    def test_roles_without_upload_get_403(self, as_persona, trace_key, name):
        response = as_persona(name).post(
            "/api/traces/verify/?filename=ok.trace.json",
            trace_bytes("ok"),
            content_type="application/octet-stream",
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"


class TestReplays:
    def test_create_poll_and_read_the_report(
        self, as_persona, ingest, django_capture_on_commit_callbacks
    ):
        trace = ingest("diverged")
        client = as_persona("alice")
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                "/api/replays/",
                {"trace": trace.blob.sha256, "mode": "audit"},
                content_type="application/json",
            )
        assert response.status_code == 202
        run_id = response.json()["id"]
        status = client.get(f"/api/replays/{run_id}/").json()
        assert status["state"] == "done"
        assert status["error_code"] == "REPLAY_DIVERGENCE"
        report = client.get(f"/api/replays/{run_id}/report/").json()
        assert report == ReplayRun.objects.get(id=run_id).report
        assert report["divergences"][0]["path"].startswith("/")

    def test_the_report_of_a_queued_replay_is_409(self, as_persona, ingest):
        from governance.services import replay_request

        run = replay_request(trace=ingest("ok"), mode="audit", actor=None, enqueue=False)
        response = as_persona("vera").get(f"/api/replays/{run.id}/report/")
        assert response.status_code == 409
        assert response.json() == {
            "error_code": "REPORT_NOT_READY",
            "message": f"replay {run.id} is queued",
        }

    @pytest.mark.parametrize(
        ("name", "mode", "status"),
        [
            ("alice", "audit", 202),
            ("oscar", "sandbox", 202),
            ("alice", "production", 403),
            ("sam", "production", 202),
            ("adam", "audit", 202),
            ("vera", "audit", 403),
            ("cora", "audit", 403),
            ("lena", "audit", 403),
            ("nora", "audit", 403),
        ],
    )
    def test_modes_by_role(self, as_persona, ingest, name, mode, status):
        trace = ingest("ok")
        response = as_persona(name).post(
            "/api/replays/",
            {"trace": trace.blob.sha256, "mode": mode},
            content_type="application/json",
        )
        assert response.status_code == status

    def test_an_unknown_trace_is_404_for_alice_and_403_for_vera(self, as_persona):
        body = {"trace": "0" * 64, "mode": "audit"}
        assert (
            as_persona("alice")
            .post("/api/replays/", body, content_type="application/json")
            .status_code
            == 404
        )
        assert (
            as_persona("vera")
            .post("/api/replays/", body, content_type="application/json")
            .status_code
            == 403
        )

    def test_a_body_that_is_not_json_is_malformed(self, as_persona):
        response = as_persona("alice").post(
            "/api/replays/", "{nope", content_type="application/json"
        )
        assert response.status_code == 400
        assert response.json()["error_code"] == "MALFORMED_REQUEST"


class TestForceContinue:
    def test_alice_files_and_council_signs_over_the_api(self, as_persona, replayed, member_key):
        run = replayed("diverged")
        created = as_persona("alice").post(
            f"/api/replays/{run.id}/force-continue/",
            {"reason": "known drift"},
            content_type="application/json",
        )
        assert created.status_code == 201
        fc_id = created.json()["id"]
        assert created.json()["remaining"] == "1 admin approval(s) and 2 council approval(s)"
        detail = (
            as_persona("cora")
            .get(f"/api/force-continue/{fc_id}/?decision=approve&role=council")
            .json()
        )
        assert detail["payload_jcs"] == jcs(detail["payload"]).decode()
        key, private = member_key("cora")
        document = {
            "payload": detail["payload"],
            "key_id": key.key_id,
            "alg": "ed25519",
            "signature": sign(private, detail["payload_jcs"].encode()),
        }
        signed = as_persona("cora").post(
            f"/api/force-continue/{fc_id}/approvals/", document, content_type="application/json"
        )
        assert signed.status_code == 201
        assert signed.json()["approver"] == "cora"
        assert Vote.objects.count() == 1

    def test_a_forged_signature_is_refused_with_its_code(self, as_persona, replayed, member_key):
        run = replayed("diverged")
        fc = gov_services.force_continue_request_file(run=run, actor=persona("alice"), reason="x")
        key, _ = member_key("cora")
        payload = gov_services.force_continue_payload_for(
            request=fc, decision="approve", role="council"
        )
        response = as_persona("cora").post(
            f"/api/force-continue/{fc.id}/approvals/",
            {"payload": payload, "key_id": key.key_id, "signature": "00" * 64},
            content_type="application/json",
        )
        assert response.status_code == 400
        assert response.json() == {
            "error_code": "APPROVAL_BAD_SIGNATURE",
            "message": gov_services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=key.key_id),
        }

    def test_a_request_for_a_replay_that_did_not_diverge_is_409(self, as_persona, replayed):
        run = replayed("ok")
        response = as_persona("alice").post(
            f"/api/replays/{run.id}/force-continue/",
            {"reason": "x"},
            content_type="application/json",
        )
        assert response.status_code == 409
        assert response.json()["error_code"] == "REQUEST_NOT_DIVERGED"
        assert not ForceContinueRequest.objects.exists()

    def test_a_second_request_while_one_is_open_is_409_request_pending(self, as_persona, world):
        response = as_persona("alice").post(
            f"/api/replays/{world['run']}/force-continue/",
            {"reason": "again"},
            content_type="application/json",
        )
        assert response.status_code == 409
        assert response.json() == {
            "error_code": "REQUEST_PENDING",
            "message": gov_services.REQUEST_PENDING_MESSAGE.format(
                request=world["fc"], run=world["run"]
            ),
        }
        assert ForceContinueRequest.objects.count() == 1

    def test_it_refuses_a_request_for_a_replay_whose_request_was_approved(
        self, as_persona, replayed, member_key, django_capture_on_commit_callbacks
    ):
        from tests.console.test_force_continue_pages import approved_by_quorum

        run = replayed("diverged")
        fc = gov_services.force_continue_request_file(run=run, actor=persona("alice"), reason="x")
        with django_capture_on_commit_callbacks(execute=True):
            fc = approved_by_quorum(fc, member_key)
        response = as_persona("alice").post(
            f"/api/replays/{run.id}/force-continue/",
            {"reason": "once more"},
            content_type="application/json",
        )
        assert response.status_code == 409
        assert response.json() == {
            "error_code": "REQUEST_ALREADY_APPROVED",
            "message": gov_services.REQUEST_ALREADY_APPROVED_MESSAGE.format(
                request=fc.id, run=run.id, resumed=fc.resumed_run_id
            ),
        }
        assert ForceContinueRequest.objects.count() == 1

    @pytest.mark.parametrize("name", ["vera", "alice", "oscar", "lena", "nora"])
    def test_approvals_are_refused_to_roles_that_cannot_sign(self, as_persona, world, name):
        response = as_persona(name).post(
            f"/api/force-continue/{world['fc']}/approvals/",
            {"payload": {}, "key_id": "k", "signature": "s"},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"


class TestProductionReplay:
    def test_alice_asks_two_council_members_sign_and_her_run_is_queued(
        self, as_persona, ingest, member_key, django_capture_on_commit_callbacks
    ):
        trace = ingest("ok")
        created = as_persona("alice").post(
            f"/api/traces/{trace.blob.sha256}/production-requests/",
            {"reason": "restore job 7", "expires_in_hours": 4},
            content_type="application/json",
        )
        assert created.status_code == 201
        asked = created.json()
        assert (asked["state"], asked["remaining"], asked["run"]) == (
            "pending",
            "2 council approval(s)",
            None,
        )
        assert (asked["trace_sha256"], asked["requested_by"]) == (trace.blob.sha256, "alice")
        for name in ("cora", "colin"):
            detail = as_persona(name).get(
                f"/api/production-requests/{asked['id']}/?decision=approve"
            )
            payload = detail.json()["payload"]
            assert detail.json()["payload_jcs"] == jcs(payload).decode()
            key, private = member_key(name)
            with django_capture_on_commit_callbacks(execute=True):
                signed = as_persona(name).post(
                    f"/api/production-requests/{asked['id']}/approvals/",
                    {
                        "payload": payload,
                        "key_id": key.key_id,
                        "signature": sign(private, jcs(payload)),
                    },
                    content_type="application/json",
                )
            assert signed.status_code == 201, signed.json()
            assert (signed.json()["approver"], signed.json()["role"]) == (name, "council")
        done = as_persona("vera").get(f"/api/production-requests/{asked['id']}/").json()
        assert done["state"] == "approved"
        run = as_persona("alice").get(f"/api/replays/{done['run']}/").json()
        assert (run["mode"], run["state"], run["status"]) == ("production", "done", "ok")

    def test_a_trace_missing_an_output_is_409_with_its_code(self, as_persona, ingest):
        trace = ingest("missing_output")
        response = as_persona("alice").post(
            f"/api/traces/{trace.blob.sha256}/production-requests/",
            {"reason": "x"},
            content_type="application/json",
        )
        assert response.status_code == 409
        assert response.json()["error_code"] == "REQUEST_NOT_REPLAYABLE"

    @pytest.mark.parametrize("name", ["vera", "oscar", "cora", "lena", "nora"])
    def test_asking_is_for_auditors_and_admins(self, as_persona, world, name):
        response = as_persona(name).post(
            f"/api/traces/{world['sha']}/production-requests/",
            {"reason": "x"},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"

    @pytest.mark.parametrize("name", ["vera", "alice", "oscar", "adam", "lena", "nora"])
    def test_signing_is_for_the_council(self, as_persona, world, name):
        response = as_persona(name).post(
            f"/api/production-requests/{world['production']}/approvals/",
            {"payload": {}, "key_id": "k", "signature": "s"},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"

    def test_a_replayed_force_continue_signature_is_refused(self, as_persona, world, member_key):
        key, private = member_key("cora")
        fc = ForceContinueRequest.objects.get(id=world["fc"])
        payload = gov_services.force_continue_payload_for(
            request=fc, decision="approve", role="council"
        )
        response = as_persona("cora").post(
            f"/api/production-requests/{world['production']}/approvals/",
            {"payload": payload, "key_id": key.key_id, "signature": sign(private, jcs(payload))},
            content_type="application/json",
        )
        assert response.status_code == 400
        assert response.json()["error_code"] == "APPROVAL_OTHER_REQUEST"


class TestKeysHaltsLedger:
    def test_cora_registers_a_key_and_adam_confirms_it(self, as_persona):
        from core.ledger.signing import public_key_of
        from governance import keystore

        public = public_key_of(keystore.generate_private_key()).hex()
        created = as_persona("cora").post(
            "/api/keys/register/", {"public_key": public}, content_type="application/json"
        )
        assert created.status_code == 201
        key_id = created.json()["key_id"]
        assert as_persona("cora").post(f"/api/keys/{key_id}/confirm/").status_code == 403
        confirmed = as_persona("adam").post(f"/api/keys/{key_id}/confirm/")
        assert confirmed.status_code == 200
        assert confirmed.json()["confirmed_by"] == "adam"

    def test_a_key_that_is_not_ed25519_is_refused(self, as_persona):
        response = as_persona("cora").post(
            "/api/keys/register/", {"public_key": "abc"}, content_type="application/json"
        )
        assert response.status_code == 400
        assert response.json()["error_code"] == "KEY_INVALID"

    @pytest.mark.parametrize("name", ["vera", "alice", "oscar", "lena", "nora"])
    def test_key_registration_is_for_admins_and_council(self, as_persona, name):
        response = as_persona(name).post(
            "/api/keys/register/", {"public_key": "00" * 32}, content_type="application/json"
        )
        assert response.status_code == 403

    def test_the_ledger_lists_events_newest_first_and_verifies(self, as_persona, world):
        client = as_persona("vera")
        page = client.get("/api/governance/events/?limit=3").json()
        seqs = [e["seq"] for e in page["results"]]
        assert seqs == sorted(seqs, reverse=True)
        assert page["next_before"] == seqs[-1]
        older = client.get(f"/api/governance/events/?before={seqs[-1]}&limit=3").json()
        assert all(e["seq"] < seqs[-1] for e in older["results"])
        verification = client.get("/api/governance/verification/").json()
        assert verification["ok"] is True
        assert verification["broke_at"] is None

    def test_halts_list_their_clear_payload(self, as_persona, world):
        halts = as_persona("vera").get("/api/halts/").json()
        assert halts[0]["active"] is True
        assert halts[0]["clear_payload"]["halt_seq"] == halts[0]["seq"]

    @pytest.mark.parametrize("name", ["vera", "alice", "adam", "lena", "nora"])
    def test_halt_clearing_is_for_the_council(self, as_persona, world, name):
        response = as_persona(name).post(
            f"/api/halts/{world['halt']}/approvals/",
            {"payload": {}, "key_id": "k", "signature": "s"},
            content_type="application/json",
        )
        assert response.status_code == 403


def test_the_schema_is_served_and_lists_every_operation(as_persona):
    response = as_persona("vera").get("/api/schema/?format=json")
    assert response.status_code == 200
    operations = {
        op["operationId"]
        for methods in response.json()["paths"].values()
        for op in methods.values()
    }
    assert {
        "traces_upload",
        "traces_verify",
        "traces_list",
        "traces_retrieve",
        "replays_create",
        "replays_retrieve",
        "replays_report",
        "force_continue_create",
        "force_continue_list",
        "force_continue_retrieve",
        "force_continue_approve",
        "production_request_create",
        "production_request_list",
        "production_request_retrieve",
        "production_request_approve",
        "halts_list",
        "halts_clear_approve",
        "halts_incident_declare",
        "keys_list",
        "keys_register",
        "keys_confirm",
        "governance_events_list",
        "governance_verification",
    } <= operations


def test_the_docs_page_renders_every_operation_locally(as_persona):
    body = as_persona("vera").get("/api/docs/").content.decode()
    assert "<code>POST /api/traces/upload/</code>" in body
    assert "cdn" not in body.lower()
