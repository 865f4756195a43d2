"""Filing a governed request through the API: the per-kind endpoints (pinned: status, every
field of the body, each refusal's exact body) and the shared ``POST /api/requests/<kind>/``
for the kinds that file by API (force-continue, production replay), which answers the same
codes and files the same rows."""

from __future__ import annotations

import pytest

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
