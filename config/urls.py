from __future__ import annotations

from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from console.api.common import SchemaFormatNegotiation
from console.views import (
    auth,
    errors,
    exports,
    governance,
    health,
    inbox,
    notes,
    ops,
    otel,
    otlp,
    production,
    requests,
    runs,
    tokens,
    traces,
)

#: (old URL prefix, kind) of the pages each council kind had before they became one pair
LEGACY_REQUEST_URLS = (
    ("force-continue", "force-continue"),
    ("production", "production-replay"),
    ("governance/role-grants", "role-grant"),
)


handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.page_not_found
handler500 = errors.server_error

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="trace-list", permanent=False)),
    path("healthz", health.healthz_view, name="healthz"),
    # sign-in and the second factor
    path("accounts/login/", auth.login_view, name="login"),
    path("accounts/logout/", auth.logout_view, name="logout"),
    path("accounts/2fa/setup/", auth.otp_setup_view, name="otp-setup"),
    path("accounts/2fa/verify/", auth.otp_verify_view, name="otp-verify"),
    # traces
    path("traces/", traces.trace_list_view, name="trace-list"),
    path("traces/upload/", traces.trace_upload_view, name="trace-upload"),
    path("traces/export.csv", exports.trace_export_view, {"fmt": "csv"}, name="trace-export-csv"),
    path(
        "traces/export.json", exports.trace_export_view, {"fmt": "json"}, name="trace-export-json"
    ),
    path("traces/<str:trace_ref>/", traces.trace_detail_view, name="trace-detail"),
    path("traces/<str:trace_ref>/replay/", runs.run_start_view, name="run-start"),
    path("traces/<str:trace_ref>/notes/", notes.trace_notes_view, name="trace-notes"),
    path(
        "traces/<str:trace_ref>/compare/",
        traces.trace_compare_pick_view,
        name="trace-compare-pick",
    ),
    path(
        "traces/<str:trace_ref>/compare/<str:other_ref>/",
        traces.trace_compare_view,
        name="trace-compare",
    ),
    path(
        "traces/<str:trace_ref>/production/",
        production.production_request_view,
        name="production-request",
    ),
    path(
        "traces/<str:trace_ref>/records/<int:position>/",
        traces.trace_record_view,
        name="trace-record",
    ),
    path(
        "traces/<str:trace_ref>/events/<int:seq>/",
        traces.trace_event_view,
        name="trace-event",
    ),
    # replays
    path("runs/<str:run_id>/", runs.run_detail_view, name="run-detail"),
    path("runs/<str:run_id>/status/", runs.run_status_view, name="run-status"),
    path("runs/<str:run_id>/requeue/", runs.run_requeue_view, name="run-requeue"),
    path("runs/<str:run_id>/value/", runs.run_value_view, name="run-value"),
    path("runs/<str:run_id>/report.json", runs.run_report_json_view, name="run-report-json"),
    path("runs/<str:run_id>/report/", runs.run_report_tree_view, name="run-report-tree"),
    path(
        "runs/<str:run_id>/force-continue/",
        governance.force_continue_request_view,
        name="force-continue-request",
    ),
    # governance
    path("inbox/", inbox.inbox_view, name="inbox"),
    # one list and one approval page for every kind of council request (issue 19)
    path("requests/<str:kind>/", requests.request_list_view, name="request-list"),
    path(
        "requests/<str:kind>/<str:request_id>/",
        requests.request_detail_view,
        name="request-detail",
    ),
    # their old URLs, one copy per kind: GET moves permanently, POST is still taken
    *(
        pattern
        for prefix, kind in LEGACY_REQUEST_URLS
        for pattern in (
            path(f"{prefix}/", requests.legacy_list_view, {"kind": kind}),
            path(f"{prefix}/<str:request_id>/", requests.legacy_detail_view, {"kind": kind}),
        )
    ),
    path("governance/", governance.ledger_view, name="ledger"),
    path("governance/verify/", governance.ledger_verify_view, name="ledger-verify"),
    path("governance/witness-push/", governance.witness_push_view, name="ledger-witness-push"),
    path(
        "governance/witness-alert/<int:alert_id>/ack/",
        governance.witness_alert_ack_view,
        name="ledger-witness-ack",
    ),
    path(
        "governance/verification/",
        governance.ledger_verification_view,
        name="ledger-verification",
    ),
    path(
        "governance/checkpoint.json",
        governance.checkpoint_export_view,
        name="checkpoint-export",
    ),
    path(
        "governance/checkpoint/check/",
        governance.checkpoint_check_view,
        name="checkpoint-check",
    ),
    path("governance/halts/", governance.halt_list_view, name="halt-list"),
    path(
        "governance/halts/incident/",
        governance.incident_declare_view,
        name="incident-declare",
    ),
    # a halt's old approval page: it moved to /requests/halt-clear/<seq>/ (issue 19)
    path(
        "governance/halts/<str:request_id>/",
        requests.legacy_detail_view,
        {"kind": "halt-clear"},
        name="halt-detail",
    ),
    path("governance/keys/", governance.key_list_view, name="key-list"),
    path("governance/keys/register/", governance.key_register_view, name="key-register"),
    path("governance/keys/rotate/", governance.server_key_rotate_view, name="server-key-rotate"),
    path(
        "governance/keys/verification/add/",
        governance.verification_key_add_view,
        name="verification-key-add",
    ),
    path(
        "governance/keys/verification/<str:key_id>/revoke/",
        governance.verification_key_revoke_view,
        name="verification-key-revoke",
    ),
    path(
        "governance/keys/<str:key_id>/confirm/",
        governance.key_confirm_view,
        name="key-confirm",
    ),
    path(
        "governance/keys/<str:key_id>/revoke/",
        governance.key_revoke_view,
        name="key-revoke",
    ),
    path("governance/users/", governance.user_list_view, name="user-list"),
    path("ops/", ops.dashboard_view, name="ops-dashboard"),
    # data subject requests (issue 14)
    path("dsr/", include("dsr.urls")),
    # a person's own API tokens
    path("tokens/", tokens.api_token_list_view, name="api-token-list"),
    path(
        "tokens/<str:token_id>/revoke/",
        tokens.api_token_revoke_view,
        name="api-token-revoke",
    ),
    # OpenTelemetry: OTLP/HTTP trace export (OTEL_EXPORTER_OTLP_ENDPOINT=<console>/otlp), and
    # the traces still being received, before they are sealed
    path("otlp/v1/traces", otlp.otlp_traces_view, name="otlp-traces"),
    path("otel/traces/", otel.otel_open_list_view, name="otel-open-list"),
    path("otel/traces/<str:trace_id>/", otel.otel_open_detail_view, name="otel-open-detail"),
    path("otel/traces/<str:trace_id>/seal/", otel.otel_seal_view, name="otel-seal"),
    # API
    path("api/", include("console.api.urls")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(content_negotiation_class=SchemaFormatNegotiation),
        name="schema",
    ),
    path("api/docs/", ops.api_docs_view, name="api-docs"),
]
