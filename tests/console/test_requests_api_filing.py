"""Filing a governed request through the API: the per-kind endpoints (pinned: status, every
field of the body, each refusal's exact body) and the shared ``POST /api/requests/<kind>/``
for the kinds that file by API (force-continue, production replay), which answers the same
codes and files the same rows."""

from __future__ import annotations

import pytest

from core.ledger import codes
from governance.models import ForceContinueRequest, ProductionReplayRequest

pytestmark = pytest.mark.django_db

OLD_FORCE_CONTINUE_KEYS = [
    "created_at",
    "decided_at",
    "divergence_digest",
    "expired",
    "expires_at",
    "id",
    "reason",
    "remaining",
    "requested_by",
    "resumed_run",
    "run_id",
    "state",
    "step",
    "trace_id",
]


def _post(client, url, body):
    return client.post(url, body, content_type="application/json")


# --- the per-kind endpoints, pinned ---------------------------------------------------------


def test_the_force_continue_endpoint_answers_the_filed_request(as_persona, replayed):
    run = replayed("diverged")

    created = _post(
        as_persona("alice"), f"/api/replays/{run.id}/force-continue/", {"reason": "known drift"}
    )

    assert created.status_code == 201
    body = created.json()
    row = ForceContinueRequest.objects.get()
    assert sorted(body) == OLD_FORCE_CONTINUE_KEYS
    assert (body["id"], body["run_id"], body["step"], body["state"], body["reason"]) == (
        str(row.id),
        str(run.id),
        row.step,
        "pending",
        "known drift",
    )
    assert (body["requested_by"], body["resumed_run"], body["decided_at"]) == ("alice", None, None)
    assert (body["expired"], body["remaining"]) == (
        False,
        "1 admin approval(s) and 2 council approval(s)",
    )


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        (
            {},
            {
                "error_code": "INVALID_INPUT",
                "message": "invalid input: reason: This field is required.",
                "fields": {"reason": ["This field is required."]},
            },
        ),
        (
            {"reason": "x", "expires_in_hours": 0},
            {
                "error_code": "INVALID_INPUT",
                "message": "invalid input: expires_in_hours: Ensure this value is greater than"
                " or equal to 1.",
                "fields": {
                    "expires_in_hours": ["Ensure this value is greater than or equal to 1."]
                },
            },
        ),
    ],
)
def test_the_per_kind_endpoints_refuse_a_malformed_body_precisely(
    as_persona, replayed, ingest, body, answer
):
    run, trace = replayed("diverged"), ingest("ok")
    for url in (
        f"/api/replays/{run.id}/force-continue/",
        f"/api/traces/{trace.blob.sha256}/production-requests/",
    ):
        refused = _post(as_persona("alice"), url, body)
        assert (refused.status_code, refused.json()) == (400, answer)
    assert not ForceContinueRequest.objects.exists()
    assert not ProductionReplayRequest.objects.exists()


def test_the_production_endpoint_answers_the_filed_request(as_persona, ingest):
    trace = ingest("ok")

    created = _post(
        as_persona("alice"),
        f"/api/traces/{trace.blob.sha256}/production-requests/",
        {"reason": "restore job 7", "expires_in_hours": 4},
    )

    assert created.status_code == 201
    body = created.json()
    row = ProductionReplayRequest.objects.get()
    assert (body["id"], body["state"], body["trace_sha256"], body["requested_by"]) == (
        str(row.id),
        "pending",
        trace.blob.sha256,
        "alice",
    )


# --- the shared endpoint ----------------------------------------------------------------------


def test_alice_files_a_force_continue_through_the_shared_endpoint(as_persona, replayed):
    run = replayed("diverged")

    created = _post(
        as_persona("alice"),
        "/api/requests/force-continue/",
        {"subject": str(run.id), "reason": "known drift"},
    )

    assert created.status_code == 201, created.json()
    row = ForceContinueRequest.objects.get()
    body = created.json()
    assert (body["kind"], body["key"], body["state"], body["votes"]) == (
        "force-continue",
        str(row.id),
        "pending",
        [],
    )
    assert body["needed"] == {"admin": 1, "council": 2}
    assert (row.run_id, row.step, row.reason, row.requested_by.username) == (
        run.id,
        3,
        "known drift",
        "alice",
    )
    assert row.request_event.type == codes.FORCE_CONTINUE_REQUEST


def test_alice_asks_for_a_production_replay_through_the_shared_endpoint(as_persona, ingest):
    trace = ingest("ok")

    created = _post(
        as_persona("alice"),
        "/api/requests/production-replay/",
        {"subject": trace.blob.sha256, "reason": "restore job 7", "expires_in_hours": 4},
    )

    assert created.status_code == 201, created.json()
    row = ProductionReplayRequest.objects.get()
    assert (created.json()["kind"], created.json()["key"]) == ("production-replay", str(row.id))
    assert (row.trace_id, row.reason, row.request_event.type) == (
        trace.pk,
        "restore job 7",
        codes.PRODUCTION_REPLAY_REQUEST,
    )
    filed_for = (row.expires_at - row.created_at).total_seconds()
    assert 4 * 3600 - 5 < filed_for <= 4 * 3600


@pytest.mark.parametrize(
    "case",
    [
        ("alice", "force-continue", {"reason": "x"}),  # a replay that did not diverge: 409
        ("alice", "force-continue", {}),  # no reason: 400
        ("vera", "force-continue", {"reason": "x"}),  # a viewer may not file: 403
        ("alice", "production-replay", {"reason": "x", "expires_in_hours": 0}),  # 400
        ("cora", "production-replay", {"reason": "x"}),  # the council does not ask: 403
    ],
)
def test_the_shared_endpoint_answers_what_the_per_kind_one_answers(
    as_persona, replayed, ingest, case
):
    name, kind, body = case
    run, trace = replayed("ok"), ingest("ok")
    subject, old = {
        "force-continue": (str(run.id), f"/api/replays/{run.id}/force-continue/"),
        "production-replay": (
            trace.blob.sha256,
            f"/api/traces/{trace.blob.sha256}/production-requests/",
        ),
    }[kind]

    before = _post(as_persona(name), old, body)
    shared = _post(as_persona(name), f"/api/requests/{kind}/", {**body, "subject": subject})

    assert before.status_code in (400, 403, 409)
    assert (shared.status_code, shared.json()) == (before.status_code, before.json())
    assert not ForceContinueRequest.objects.exists()
    assert not ProductionReplayRequest.objects.exists()


@pytest.mark.parametrize("kind", ["role-grant", "halt-clear", "legal-release", "legal-erasure"])
def test_kinds_filed_elsewhere_are_not_filed_here(as_persona, kind):
    refused = _post(as_persona("adam"), f"/api/requests/{kind}/", {"subject": "1", "reason": "x"})

    assert refused.status_code == 405
    assert refused.json()["error_code"] == "METHOD_NOT_ALLOWED"


def test_the_shared_endpoint_needs_a_subject(as_persona):
    refused = _post(as_persona("alice"), "/api/requests/force-continue/", {"reason": "x"})

    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error_code": "INVALID_INPUT",
            "message": "invalid input: subject: This field is required.",
            "fields": {"subject": ["This field is required."]},
        },
    )
