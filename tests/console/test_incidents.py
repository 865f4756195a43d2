"""Declaring a SECURITY_INCIDENT on the halts page and over the API: adam the admin (second
factor verified) may; everyone else gets 403 and nothing is appended. The halt it sets refuses
replays with FORCE_HALT_ACTIVE naming the incident."""

from __future__ import annotations

import pytest
from django.test import Client

from core.ledger import codes
from governance import services as gov_services
from governance.models import GovernanceEvent, Halt
from tests.console.personas import EVERYONE, persona

pytestmark = pytest.mark.django_db

NOT_ADMINS = [name for name in EVERYONE if name != "adam"]


@pytest.fixture
def trace(ingest):
    return ingest("ok")


class TestThePage:
    def _declare(self, client: Client, **fields: str):
        return client.post("/governance/halts/incident/", fields)

    def test_adam_declares_one_against_a_trace_id(self, as_persona, trace):
        response = self._declare(
            as_persona("adam"), kind="trace", target=trace.trace_id, reason="runtime key leaked"
        )
        halt = Halt.objects.active().get()
        assert response.status_code == 303
        assert response["Location"] == f"/requests/halt-clear/{halt.seq}/"
        incident = GovernanceEvent.objects.get(seq=halt.payload["cause_seq"])
        assert (incident.type, incident.actor_label) == (codes.SECURITY_INCIDENT, "adam")
        assert (halt.target_kind, halt.target_id) == ("trace", trace.trace_id)
        assert halt.reason == (
            f"SECURITY_INCIDENT {incident.seq} declared by adam: runtime key leaked"
        )

    def test_adam_declares_one_against_a_snapshot(self, as_persona, trace):
        privacy = trace.required_snapshot_ids[3]["snapshot_id"]
        response = self._declare(
            as_persona("adam"), kind="snapshot", target=privacy, reason="disclosed"
        )
        assert response.status_code == 303
        assert (Halt.objects.get().target_kind, Halt.objects.get().target_id) == (
            "snapshot",
            privacy,
        )

    @pytest.mark.parametrize("name", NOT_ADMINS)
    def test_it_refuses_everyone_else(self, as_persona, trace, name):
        client = as_persona(name)  # creating the persona records its roles in the ledger
        before = GovernanceEvent.objects.count()
        response = self._declare(client, kind="trace", target=trace.trace_id, reason="r")
        assert response.status_code == 403
        assert GovernanceEvent.objects.count() == before

    def test_it_refuses_adam_without_the_second_factor(self, trace):
        from tests.console.personas import sign_in

        client = sign_in(Client(), persona("adam"), verified=False)
        response = self._declare(client, kind="trace", target=trace.trace_id, reason="r")
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/2fa/verify/")
        assert not Halt.objects.exists()

    def test_the_form_is_shown_to_admins_only(self, as_persona, trace):
        assert 'id="incident-form"' in as_persona("adam").get("/governance/halts/").content.decode()
        for name in ("vera", "cora"):
            body = as_persona(name).get("/governance/halts/").content.decode()
            assert 'id="incident-form"' not in body

    @pytest.mark.parametrize(
        ("fields", "refusal"),
        [
            (
                {"kind": "trace", "target": "0" * 32, "reason": "r"},
                (
                    404,
                    codes.INCIDENT_TARGET_UNKNOWN,
                    gov_services.INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"trace {'0' * 32}"),
                ),
            ),
            (
                {"kind": "trace", "target": "TRACE", "reason": ""},
                (400, codes.REQUEST_INVALID, gov_services.INCIDENT_REASON_MESSAGE),
            ),
            (
                {"kind": "nonsense", "target": "x", "reason": "r"},
                (400, codes.REQUEST_INVALID, gov_services.INCIDENT_TARGET_MESSAGE),
            ),
        ],
    )
    def test_it_refuses_bad_input_precisely(self, as_persona, trace, fields, refusal):
        status, code, message = refusal
        fields = {k: (trace.trace_id if v == "TRACE" else v) for k, v in fields.items()}
        response = self._declare(as_persona("adam"), **fields)
        assert response.status_code == status
        body = response.content.decode()
        assert f'<code class="code">{code}</code> {message}' in body
        assert not Halt.objects.exists()

    def test_a_replay_is_then_refused_naming_the_incident(self, as_persona, trace):
        self._declare(as_persona("adam"), kind="trace", target=trace.trace_id, reason="leak")
        halt = Halt.objects.get()
        run = gov_services.replay_request(
            trace=trace, mode="audit", actor=persona("alice"), enqueue=False
        )
        run = gov_services.replay_run_govern(run_id=run.id)
        assert run.error_code == "FORCE_HALT_ACTIVE"
        assert run.report["message"] == (
            "replay is halted until a council FORCE_HALT_CLEAR: "
            f"halt {halt.seq} on trace {trace.trace_id}: {halt.reason}"
        )


class TestTheApi:
    URL = "/api/halts/incidents/"

    def test_adam_declares_one_against_a_stored_file(self, as_persona, trace):
        response = as_persona("adam").post(
            self.URL,
            {"trace": trace.blob.sha256, "reason": "uploaded by mistake"},
            content_type="application/json",
        )
        assert response.status_code == 201
        halt = Halt.objects.active().get()
        assert response.json() == {
            "incident_seq": halt.payload["cause_seq"],
            "halt_seq": halt.seq,
            "target_kind": "blob",
            "target_id": trace.blob.sha256,
            "reason": "uploaded by mistake",
            "halt_reason": halt.reason,
        }

    @pytest.mark.parametrize("name", NOT_ADMINS)
    def test_it_refuses_everyone_else(self, as_persona, trace, name):
        response = as_persona(name).post(
            self.URL, {"trace": trace.trace_id, "reason": "r"}, content_type="application/json"
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"
        assert not Halt.objects.exists()

    def test_a_token_carries_no_admin_role(self, trace):
        from governance.services import api_token_create

        _row, token = api_token_create(user=persona("adam"))
        response = Client().post(
            self.URL,
            {"trace": trace.trace_id, "reason": "r"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {token}",
        )
        assert response.status_code == 403
        assert not Halt.objects.exists()

    def test_an_unknown_snapshot_is_404_with_its_code(self, as_persona, trace):
        missing = "sha256:" + "e" * 64
        response = as_persona("adam").post(
            self.URL, {"snapshot": missing, "reason": "r"}, content_type="application/json"
        )
        assert response.status_code == 404
        assert response.json() == {
            "error_code": codes.INCIDENT_TARGET_UNKNOWN,
            "message": gov_services.INCIDENT_TARGET_UNKNOWN_MESSAGE.format(
                what=f"snapshot {missing}"
            ),
        }

    def test_two_targets_are_refused(self, as_persona, trace):
        response = as_persona("adam").post(
            self.URL,
            {"trace": trace.trace_id, "snapshot": "sha256:x", "reason": "r"},
            content_type="application/json",
        )
        assert response.status_code == 400
        assert response.json() == {
            "error_code": codes.REQUEST_INVALID,
            "message": gov_services.INCIDENT_TARGET_MESSAGE,
        }

    def test_the_schema_lists_it(self, as_persona):
        schema = as_persona("vera").get("/api/schema/?format=json").json()
        operation = schema["paths"]["/api/halts/incidents/"]["post"]
        assert operation["operationId"] == "halts_incident_declare"
