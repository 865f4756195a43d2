from __future__ import annotations

from django.urls import include, path

from console.api import governance, inbox, notes, production, replays, requests, traces, users

urlpatterns = [
    path("inbox/", inbox.InboxApi.as_view(), name="api-inbox"),
    # one set of endpoints for every kind of governed request (issue 19)
    path("requests/", requests.KindListApi.as_view(), name="api-request-kinds"),
    path("requests/<str:kind>/", requests.RequestFileApi.as_view(), name="api-request-list"),
    path(
        "requests/<str:kind>/<str:key>/",
        requests.RequestDetailApi.as_view(),
        name="api-request-detail",
    ),
    path(
        "requests/<str:kind>/<str:key>/votes/",
        requests.RequestVoteApi.as_view(),
        name="api-request-vote",
    ),
    path("traces/", traces.TraceListApi.as_view(), name="api-trace-list"),
    path("traces/upload/", traces.TraceUploadApi.as_view(), name="api-trace-upload"),
    path("traces/verify/", traces.TraceVerifyApi.as_view(), name="api-trace-verify"),
    path("traces/<str:trace_ref>/", traces.TraceDetailApi.as_view(), name="api-trace-detail"),
    path("traces/<str:trace_ref>/notes/", notes.TraceNotesApi.as_view(), name="api-trace-notes"),
    path(
        "traces/<str:trace_ref>/record/", traces.TraceRecordApi.as_view(), name="api-trace-record"
    ),
    path(
        "traces/<str:trace_ref>/production-requests/",
        production.ProductionRequestCreateApi.as_view(),
        name="api-production-request-create",
    ),
    path("replays/", replays.ReplayCreateApi.as_view(), name="api-replay-create"),
    path("replays/<str:run_id>/", replays.ReplayStatusApi.as_view(), name="api-replay-status"),
    path(
        "replays/<str:run_id>/report/",
        replays.ReplayReportApi.as_view(),
        name="api-replay-report",
    ),
    path(
        "replays/<str:run_id>/force-continue/",
        governance.ForceContinueRequestCreateApi.as_view(),
        name="api-force-continue-create",
    ),
    path(
        "force-continue/", governance.ForceContinueListApi.as_view(), name="api-force-continue-list"
    ),
    path(
        "force-continue/<str:request_id>/",
        governance.ForceContinueDetailApi.as_view(),
        name="api-force-continue-detail",
    ),
    path(
        "force-continue/<str:request_id>/approvals/",
        governance.ApprovalCreateApi.as_view(),
        name="api-approval-create",
    ),
    path(
        "production-requests/",
        production.ProductionRequestListApi.as_view(),
        name="api-production-request-list",
    ),
    path(
        "production-requests/<str:request_id>/",
        production.ProductionRequestDetailApi.as_view(),
        name="api-production-request-detail",
    ),
    path(
        "production-requests/<str:request_id>/approvals/",
        production.ProductionApprovalCreateApi.as_view(),
        name="api-production-approval-create",
    ),
    path("halts/", governance.HaltListApi.as_view(), name="api-halt-list"),
    path(
        "halts/incidents/",
        governance.IncidentDeclareApi.as_view(),
        name="api-incident-declare",
    ),
    path(
        "halts/<int:halt_seq>/approvals/",
        governance.HaltClearApprovalApi.as_view(),
        name="api-halt-clear",
    ),
    path("keys/", governance.KeyListApi.as_view(), name="api-key-list"),
    path("keys/register/", governance.KeyRegisterApi.as_view(), name="api-key-register"),
    path("keys/<str:key_id>/confirm/", governance.KeyConfirmApi.as_view(), name="api-key-confirm"),
    path("users/", users.UserListApi.as_view(), name="api-user-list"),
    path("users/<str:user_id>/roles/", users.UserRolesApi.as_view(), name="api-user-roles"),
    path("role-grants/", users.RoleGrantListApi.as_view(), name="api-role-grant-list"),
    path(
        "role-grants/<str:request_id>/",
        users.RoleGrantDetailApi.as_view(),
        name="api-role-grant-detail",
    ),
    path(
        "role-grants/<str:request_id>/approvals/",
        users.RoleGrantApprovalCreateApi.as_view(),
        name="api-role-grant-approve",
    ),
    # legal requests (issue 14): dsr's endpoints, mounted by dotted path as config.urls
    # mounts its pages, so the console imports nothing of dsr (pyproject: [tool.importlinter])
    path("legal-requests/", include("dsr.api_urls")),
    path("governance/events/", governance.EventListApi.as_view(), name="api-event-list"),
    path(
        "governance/verification/",
        governance.LedgerVerificationApi.as_view(),
        name="api-ledger-verification",
    ),
    path("governance/tlog/", governance.TransparencyApi.as_view(), name="api-tlog"),
    path(
        "governance/tlog/inclusion/",
        governance.InclusionProofApi.as_view(),
        name="api-tlog-inclusion",
    ),
    path(
        "governance/tlog/consistency/",
        governance.ConsistencyProofApi.as_view(),
        name="api-tlog-consistency",
    ),
]
